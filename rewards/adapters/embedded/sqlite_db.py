"""One SQLite database for the embedded default: the state store (Redis's role) and the outbox
(Kafka's role) live in it, so a batch's dedup claim and its publication commit together.

Every statement runs on one thread; an asyncio lock serialises writers across coroutines, and a
context variable lets statements inside `transaction()` join it. Other processes (the CLI) share
the file through WAL mode and a busy timeout.
"""

import asyncio
import contextvars
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS projects (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, created_ms INTEGER NOT NULL, deleted_ms INTEGER);
CREATE TABLE IF NOT EXISTS api_keys (
    id TEXT PRIMARY KEY, project_id TEXT NOT NULL, secret_hash BLOB NOT NULL, scopes TEXT NOT NULL,
    created_ms INTEGER NOT NULL, revoked_ms INTEGER);
CREATE TABLE IF NOT EXISTS configs (
    project_id TEXT PRIMARY KEY, document TEXT NOT NULL, updated_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS affiliates (
    project_id TEXT NOT NULL, user_type TEXT NOT NULL, user_id TEXT NOT NULL, id TEXT NOT NULL,
    name TEXT, status TEXT NOT NULL, region TEXT, audience TEXT, tax_status TEXT NOT NULL, tier TEXT,
    created_ms INTEGER NOT NULL, PRIMARY KEY (project_id, user_type, user_id));
CREATE TABLE IF NOT EXISTS codes (
    project_id TEXT NOT NULL, code TEXT NOT NULL, owner_type TEXT NOT NULL, owner_id TEXT NOT NULL,
    max_uses INTEGER, current_uses INTEGER NOT NULL DEFAULT 0, created_ms INTEGER NOT NULL,
    seq INTEGER NOT NULL, PRIMARY KEY (project_id, code));
CREATE INDEX IF NOT EXISTS codes_by_owner ON codes (project_id, owner_type, owner_id, seq);
CREATE TABLE IF NOT EXISTS code_uses (
    project_id TEXT NOT NULL, code TEXT NOT NULL, use_id TEXT NOT NULL, user_type TEXT NOT NULL,
    user_id TEXT NOT NULL, used_ms INTEGER NOT NULL, proof TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS code_uses_by_code ON code_uses (project_id, code, used_ms);
CREATE TABLE IF NOT EXISTS referrals (
    project_id TEXT NOT NULL, user_type TEXT NOT NULL, user_id TEXT NOT NULL,
    referrer_type TEXT NOT NULL, referrer_id TEXT NOT NULL, code TEXT NOT NULL,
    referred_ms INTEGER NOT NULL, PRIMARY KEY (project_id, user_type, user_id));
CREATE TABLE IF NOT EXISTS dedup (
    project_id TEXT NOT NULL, dedup_id TEXT NOT NULL, processed INTEGER NOT NULL DEFAULT 0,
    created_ms INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (project_id, dedup_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS user_events (
    project_id TEXT NOT NULL, user_type TEXT NOT NULL, user_id TEXT NOT NULL, name TEXT NOT NULL,
    seen_ms INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (project_id, user_type, user_id, name)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS idempotency (
    project_id TEXT NOT NULL, key TEXT NOT NULL, body_hash TEXT NOT NULL, response BLOB,
    created_ms INTEGER NOT NULL, PRIMARY KEY (project_id, key));
CREATE TABLE IF NOT EXISTS claim_checks (
    project_id TEXT NOT NULL, id TEXT NOT NULL, user_type TEXT NOT NULL, user_id TEXT NOT NULL,
    record TEXT NOT NULL, PRIMARY KEY (project_id, id)) WITHOUT ROWID;
-- A project's claim signer (API.md §7), apart from its configuration: its address, its key sealed
-- (rewards.domain.sealing).
CREATE TABLE IF NOT EXISTS claim_signers (
    project_id TEXT PRIMARY KEY, address TEXT NOT NULL, sealed_key TEXT NOT NULL, updated_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT, project_id TEXT NOT NULL, payload BLOB NOT NULL,
    created_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS outbox_plan (
    id INTEGER PRIMARY KEY CHECK (id = 1), first_id INTEGER NOT NULL, last_id INTEGER NOT NULL);
-- Tracking events (API.md §7), each row until expires_ms: kind 'repeat' (key: an exact repeat's key), 'code' and
-- 'user' (key: a tracking id; value: its code, its user as <type>:<identifier>).
CREATE TABLE IF NOT EXISTS tracking (
    project_id TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
    expires_ms INTEGER NOT NULL, PRIMARY KEY (project_id, kind, key)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tracking_by_expiry ON tracking (expires_ms);
-- A project's blocklist (API.md §8).
CREATE TABLE IF NOT EXISTS blocklist (
    project_id TEXT NOT NULL, user_type TEXT NOT NULL, user_id TEXT NOT NULL, reason TEXT,
    created_ms INTEGER NOT NULL, PRIMARY KEY (project_id, user_type, user_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS blocklist_by_time ON blocklist (project_id, created_ms);
-- Caps and budgets (API.md §8; rewards.domain.allotment): each delivery's grants until its rows are written (what
-- it asked: a fingerprint; the grants not whole: JSON), the counters (key: paid|<currency>,
-- total|<side>|<n>:<currency>|<user>, month|<YYYY-MM>|<side>|<n>:<currency>|<user>, n the currency's length) and
-- each rolling cap's grants (key: <side>|<n>:<currency>|<user>), in units as decimal text (they outgrow 64 bits).
CREATE TABLE IF NOT EXISTS allot_deliveries (
    project_id TEXT NOT NULL, delivery TEXT NOT NULL, fingerprint TEXT NOT NULL, cuts TEXT NOT NULL,
    created_ms INTEGER NOT NULL, PRIMARY KEY (project_id, delivery)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS allot_deliveries_by_time ON allot_deliveries (created_ms);
-- Expired claim checks whose amount went back to their budget (once each).
CREATE TABLE IF NOT EXISTS allot_released (
    project_id TEXT NOT NULL, check_id TEXT NOT NULL, created_ms INTEGER NOT NULL,
    PRIMARY KEY (project_id, check_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS allot_released_by_time ON allot_released (created_ms);
CREATE TABLE IF NOT EXISTS allot_counters (
    project_id TEXT NOT NULL, key TEXT NOT NULL, units TEXT NOT NULL, expires_ms INTEGER,
    PRIMARY KEY (project_id, key)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS allot_counters_by_expiry ON allot_counters (expires_ms) WHERE expires_ms IS NOT NULL;
-- A rolling cap's grants by time: a row per user, side and currency and per call that granted any (JSON
-- [[event ms, units], …]), kept until its latest grant is past the longest window + 35 days.
CREATE TABLE IF NOT EXISTS allot_history (
    project_id TEXT NOT NULL, key TEXT NOT NULL, grants TEXT NOT NULL, expires_ms INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS allot_history_by_key ON allot_history (project_id, key);
CREATE INDEX IF NOT EXISTS allot_history_by_expiry ON allot_history (expires_ms);
-- Reversals (API.md §9): each event's reversed share (exact decimal text) and its reversals' digests (JSON list),
-- kept for the dedup window after its last reversal; `written`: the share the workers wrote (share_text).
CREATE TABLE IF NOT EXISTS reversals (
    project_id TEXT NOT NULL, dedup_id TEXT NOT NULL, reversed TEXT NOT NULL, digests TEXT NOT NULL,
    updated_ms INTEGER NOT NULL, written TEXT, PRIMARY KEY (project_id, dedup_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS reversals_by_time ON reversals (updated_ms);
-- What recipients owe in a token (units as decimal text) after a reversal met a closed or claimed check; kept until
-- settled by their next checks. And the answers of the workers' calls that change them, once per call's token.
CREATE TABLE IF NOT EXISTS debts (
    project_id TEXT NOT NULL, user_type TEXT NOT NULL, user_id TEXT NOT NULL, currency TEXT NOT NULL,
    units TEXT NOT NULL, PRIMARY KEY (project_id, user_type, user_id, currency)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS debt_calls (
    project_id TEXT NOT NULL, token TEXT NOT NULL, answer TEXT NOT NULL, created_ms INTEGER NOT NULL,
    PRIMARY KEY (project_id, token)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS debt_calls_by_time ON debt_calls (created_ms);
-- Payouts held for an operator's decision (API.md §9): the payouts row (JSON) of each, and when it was decided (NULL:
-- still held); a decided one is kept 35 days, so that a delivery processed again never holds it again.
CREATE TABLE IF NOT EXISTS held_payouts (
    project_id TEXT NOT NULL, payout_id TEXT NOT NULL, row TEXT NOT NULL, decided_ms INTEGER,
    PRIMARY KEY (project_id, payout_id));
-- A project's webhook endpoints (API.md §10): each one's document (JSON, its signing secret sealed).
CREATE TABLE IF NOT EXISTS webhook_endpoints (
    project_id TEXT NOT NULL, id TEXT NOT NULL, document TEXT NOT NULL, created_ms INTEGER NOT NULL,
    PRIMARY KEY (project_id, id)) WITHOUT ROWID;
-- Outbox messages of projects with webhook endpoints, copied there when the worker has written them (in the same
-- transaction that deletes them from the outbox): the webhook dispatcher's own read of the log, at its own pace.
CREATE TABLE IF NOT EXISTS webhook_feed (id INTEGER PRIMARY KEY, project_id TEXT NOT NULL, payload BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS held_payouts_by_decision ON held_payouts (decided_ms) WHERE decided_ms IS NOT NULL;
-- Webhook deliveries (API.md §10; rewards.domain.webhook_events.Delivery): each one's document (JSON) and status, and
-- while pending when it is due or its lease ends (this column, not the document, says). Leased by endpoint, earliest
-- due first; listed newest first; finished ones kept RETAIN_MS, and the newest RETAIN_PER_ENDPOINT of an endpoint.
CREATE TABLE IF NOT EXISTS webhook_deliveries (
    project_id TEXT NOT NULL, id TEXT NOT NULL, endpoint_id TEXT NOT NULL, created_ms INTEGER NOT NULL,
    status TEXT NOT NULL, next_attempt_ms INTEGER, document TEXT NOT NULL, PRIMARY KEY (project_id, id));
CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (endpoint_id, next_attempt_ms)
    WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS webhook_deliveries_by_time ON webhook_deliveries (project_id, endpoint_id, created_ms, id);
CREATE INDEX IF NOT EXISTS webhook_deliveries_finished ON webhook_deliveries (project_id, endpoint_id, created_ms, id)
    WHERE status <> 'pending';
CREATE INDEX IF NOT EXISTS webhook_deliveries_finished_by_time ON webhook_deliveries (created_ms)
    WHERE status <> 'pending';
-- The endpoints that may have deliveries pending: a lease asks each for its earliest due through the index above (one
-- probe per endpoint, not a scan of every pending delivery); one found without any is let go then.
CREATE TABLE IF NOT EXISTS webhook_queued (
    project_id TEXT NOT NULL, endpoint_id TEXT NOT NULL, PRIMARY KEY (project_id, endpoint_id)) WITHOUT ROWID;
-- Since when every attempt of a webhook endpoint failed (none: its last attempt succeeded); 5 days disable it.
CREATE TABLE IF NOT EXISTS webhook_failing (
    endpoint_id TEXT PRIMARY KEY, project_id TEXT NOT NULL, since_ms INTEGER NOT NULL);
-- Erasures (API.md §11): each project's salt of its pseudonyms (rewards.domain.erasure), and the requests: the user
-- while pending (user_id NULL once done), its pseudonym, when a round took it; a finished one kept 35 days.
CREATE TABLE IF NOT EXISTS erasure_salts (project_id TEXT PRIMARY KEY, salt BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS erasures (
    project_id TEXT NOT NULL, id TEXT NOT NULL, user_type TEXT NOT NULL, user_id TEXT, pseudonym TEXT NOT NULL,
    requested_ms INTEGER NOT NULL, taken_ms INTEGER, done_ms INTEGER, PRIMARY KEY (project_id, id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS erasures_pending ON erasures (requested_ms) WHERE done_ms IS NULL;
CREATE INDEX IF NOT EXISTS erasures_done ON erasures (done_ms) WHERE done_ms IS NOT NULL;
"""

# Columns added to tables of earlier installs, and the indexes the expiry sweeps use (created after them).
# Rows of an earlier install get the upgrade's time: they expire one window after it.
_ADDED_COLUMNS = (("dedup", "created_ms"), ("user_events", "seen_ms"))
_TIME_INDEXES = """
CREATE INDEX IF NOT EXISTS dedup_by_time ON dedup (created_ms);
CREATE INDEX IF NOT EXISTS user_events_by_time ON user_events (seen_ms);
CREATE INDEX IF NOT EXISTS idempotency_by_time ON idempotency (created_ms);
"""


def _upgrade(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        for table, column in _ADDED_COLUMNS:
            if column not in {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} INTEGER NOT NULL DEFAULT 0")
                conn.execute(f"UPDATE {table} SET {column} = ?", (int(time.time() * 1000),))
        for statement in filter(str.strip, _TIME_INDEXES.split(";")):
            conn.execute(statement)
        _upgrade_codes(conn)
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


# Affiliate codes and rebates (API.md §7): columns of codes and referrals, and the names renamed codes had.
_CODE_COLUMNS = (
    ("codes", "chosen", "INTEGER NOT NULL DEFAULT 0"),  # 1: an affiliate code (chosen by its owner)
    ("codes", "rebate_rate", "TEXT"),  # exact decimal text; NULL: none
    ("codes", "proof", "TEXT"),  # the signature fields of its last creation, rename or rebate change (JSON)
    ("codes", "updated_ms", "INTEGER"),  # its last rename or rebate change
    ("referrals", "use_id", "TEXT"),  # the use that made the referral (NULL: made before this column)
    ("erasures", "taken_ms", "INTEGER"),  # when a round took the request (a data dir of 2026-11-29's first erasures)
)
_CODE_TABLES = """
CREATE TABLE IF NOT EXISTS code_names (
    project_id TEXT NOT NULL, name TEXT NOT NULL, code TEXT NOT NULL, PRIMARY KEY (project_id, name)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS code_names_by_code ON code_names (project_id, code);
CREATE INDEX IF NOT EXISTS codes_chosen ON codes (project_id, owner_type, owner_id) WHERE chosen = 1;
CREATE INDEX IF NOT EXISTS referrals_by_code ON referrals (project_id, code);
"""


def _upgrade_codes(conn: sqlite3.Connection) -> None:
    for table, column, declaration in _CODE_COLUMNS:
        if column not in {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
    for statement in filter(str.strip, _CODE_TABLES.split(";")):
        conn.execute(statement)


_in_transaction: contextvars.ContextVar[bool] = contextvars.ContextVar("in_sqlite_transaction", default=False)


class SqliteDatabase:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA journal_mode=WAL")
        # FULL: a commit is on disk before the 200 leaves, so an accepted batch survives power loss too.
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.executescript(SCHEMA)
        _upgrade(self._conn)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite")
        self._lock = asyncio.Lock()

    async def run(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        """Run `fn(connection)`: inside the caller's transaction if there is one, else as its own."""
        loop = asyncio.get_running_loop()
        if _in_transaction.get():
            return await loop.run_in_executor(self._executor, fn, self._conn)
        async with self._lock:
            return await loop.run_in_executor(self._executor, self._atomic, fn)

    def _atomic(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn(self._conn)
        except BaseException:
            self._rollback()
            raise
        self._conn.execute("COMMIT")
        return result

    def _rollback(self) -> None:
        # SQLite rolls a transaction back by itself on some errors (a full disk, I/O errors): a ROLLBACK then
        # fails ("no transaction is active") and would hide the error that matters.
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    @asynccontextmanager
    async def transaction(self):
        """Statements run through `run()` inside this block commit together, or not at all."""
        loop = asyncio.get_running_loop()
        async with self._lock:
            await loop.run_in_executor(self._executor, self._conn.execute, "BEGIN IMMEDIATE")
            token = _in_transaction.set(True)
            try:
                yield
            except BaseException:
                await loop.run_in_executor(self._executor, self._rollback)
                raise
            else:
                await loop.run_in_executor(self._executor, self._conn.execute, "COMMIT")
            finally:
                _in_transaction.reset(token)

    async def close(self) -> None:
        async with self._lock:
            self._executor.submit(self._conn.close).result()
            self._executor.shutdown(wait=True)
