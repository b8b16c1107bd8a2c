"""StateStore on SQLite: the embedded stand-in for Redis."""

import json
import sqlite3
import uuid
from collections.abc import Callable, Sequence
from contextlib import asynccontextmanager

from rewards.adapters.embedded.sqlite_db import SqliteDatabase
from rewards.domain import keys
from rewards.domain.affiliates import affiliate_record, codes_created_record, stored_affiliate, stored_attributes
from rewards.domain.claim_checks import ClaimCheck, ClaimCheckNotFound, from_record, to_record
from rewards.domain.codes import generate_code, normalize_code
from rewards.domain.errors import IdempotencyKeyReused
from rewards.domain.payout_config import EMPTY_CONFIG, PayoutConfig
from rewards.domain.payouts import User
from rewards.domain.referrals import CodeNotFound, CodeRecord, CodeUse, MaxUsesBelowCurrent, check_use
from rewards.domain.timestamps import now_ms
from rewards.ports import Affiliate, Change, IngestClaim, Principal, Referral
from schemas.records import ClaimCheckRecord, CodeUseRecord, dump_records

_CHAIN_LIMIT = 64  # referral chains are walked this far when looking for cycles
# dedup.processed: 0 accepted, 1 processed, 2 failed (set aside by the workers as a dead letter)
_PROCESSED, _FAILED = 1, 2
_STATUSES = ("accepted", "processed", "failed")


SWEEP_LIMIT = 256  # rows of each table deleted at most per sweep (one per ingest, which adds at most 100)


class SqliteStateStore:
    """The reference adapter of rewards.ports.StateStore, so of each of its ports: ProjectStore, AffiliateStore,
    ReferralStore, IngestStore and ClaimCheckStore.

    Dedup ids and users' event names are kept for `dedup_window_s`, Idempotency-Key records for
    `idempotency_ttl_s`: a row past its time reads as absent at once, and every ingest deletes up to
    SWEEP_LIMIT expired rows of each table (found by their time index, so an empty sweep is one probe)."""

    def __init__(self, db: SqliteDatabase, dedup_window_s: float = 35 * 86400, idempotency_ttl_s: float = 24 * 3600):
        self._db = db
        self._window_ms = max(1, int(dedup_window_s * 1000))
        self._idempotency_ms = max(1, int(idempotency_ttl_s * 1000))

    @property
    def database(self) -> SqliteDatabase:
        """The store's SQLite database, which the embedded outbox shares (a change and its publish: one transaction)."""
        return self._db

    # -- projects and keys -------------------------------------------------------------------

    async def create_project(self, name: str) -> str:
        project_id = uuid.uuid4().hex
        await self._db.run(
            lambda c: c.execute(
                "INSERT INTO projects (id, name, created_ms) VALUES (?, ?, ?)", (project_id, name, now_ms())
            )
        )
        return project_id

    async def delete_project(self, project_id: str) -> bool:
        cursor = await self._db.run(
            lambda c: c.execute(
                "UPDATE projects SET deleted_ms = ? WHERE id = ? AND deleted_ms IS NULL", (now_ms(), project_id)
            )
        )
        return cursor.rowcount == 1

    async def project_exists(self, project_id: str) -> bool:
        row = await self._db.run(
            lambda c: c.execute("SELECT 1 FROM projects WHERE id = ? AND deleted_ms IS NULL", (project_id,)).fetchone()
        )
        return row is not None

    async def create_key(self, project_id: str, scopes: Sequence[str]) -> str:
        api_key, key_id, secret_hash = keys.new_key()
        await self._db.run(
            lambda c: c.execute(
                "INSERT INTO api_keys (id, project_id, secret_hash, scopes, created_ms) VALUES (?, ?, ?, ?, ?)",
                (key_id, project_id, secret_hash, json.dumps(sorted(set(scopes))), now_ms()),
            )
        )
        return api_key

    async def revoke_key(self, api_key: str) -> bool:
        principal = await self.resolve_key(api_key)
        if principal is None:
            return False
        await self._db.run(
            lambda c: c.execute("UPDATE api_keys SET revoked_ms = ? WHERE id = ?", (now_ms(), principal.key_id))
        )
        return True

    async def resolve_key(self, api_key: str) -> Principal | None:
        parts = keys.split_key(api_key)
        if parts is None:
            return None
        key_id, secret = parts
        row = await self._db.run(
            lambda c: c.execute(
                "SELECT k.project_id, k.secret_hash, k.scopes, p.deleted_ms FROM api_keys k "
                "JOIN projects p ON p.id = k.project_id WHERE k.id = ? AND k.revoked_ms IS NULL",
                (key_id,),
            ).fetchone()
        )
        if row is None or not keys.secret_matches(secret, row["secret_hash"]):
            return None
        return Principal(key_id, row["project_id"], frozenset(json.loads(row["scopes"])), row["deleted_ms"] is not None)

    async def get_config(self, project_id: str) -> PayoutConfig:
        row = await self._db.run(
            lambda c: c.execute("SELECT document FROM configs WHERE project_id = ?", (project_id,)).fetchone()
        )
        return EMPTY_CONFIG if row is None else PayoutConfig.model_validate_json(row["document"])

    async def put_config(self, project_id: str, config: PayoutConfig) -> None:
        document = config.model_dump_json()
        await self._db.run(
            lambda c: c.execute(
                "INSERT INTO configs (project_id, document, updated_ms) VALUES (?, ?, ?) ON CONFLICT (project_id) "
                "DO UPDATE SET document = excluded.document, updated_ms = excluded.updated_ms",
                (project_id, document, now_ms()),
            )
        )

    # -- affiliates ----------------------------------------------------------------------------

    @asynccontextmanager
    async def create_affiliate(self, project_id: str, affiliate: Affiliate):
        row = _affiliate_row(project_id, affiliate)
        insert = f"INSERT OR IGNORE INTO affiliates ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})"
        async with self._db.transaction():
            cursor = await self._db.run(lambda c: c.execute(insert, tuple(row.values())))
            created = cursor.rowcount == 1
            yield Change(created, dump_records([affiliate_record(project_id, affiliate)]) if created else None)

    async def get_affiliate(self, project_id: str, user: User) -> Affiliate | None:
        return (await self.affiliates_among(project_id, [user])).get(user)

    async def affiliates_among(self, project_id: str, users: Sequence[User]) -> dict[User, Affiliate]:
        def read(c: sqlite3.Connection) -> dict[User, Affiliate]:
            found = {}
            for user in users:
                row = c.execute(
                    "SELECT * FROM affiliates WHERE project_id = ? AND user_type = ? AND user_id = ?",
                    (project_id, user.identifier_type, user.identifier),
                ).fetchone()
                if row is not None:
                    found[user] = _affiliate(user, row)
            return found

        return await self._db.run(read)

    # -- referral codes ------------------------------------------------------------------------

    @asynccontextmanager
    async def create_codes(self, project_id: str, owner: User, quantity: int, max_uses: int | None):
        created = now_ms()

        def insert(c: sqlite3.Connection) -> list[str]:
            seq = c.execute("SELECT COALESCE(MAX(seq), 0) FROM codes WHERE project_id = ?", (project_id,)).fetchone()[0]
            codes: list[str] = []
            while len(codes) < quantity:
                code = generate_code()
                cursor = c.execute(
                    "INSERT OR IGNORE INTO codes (project_id, code, owner_type, owner_id, max_uses, created_ms, seq) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (project_id, code, owner.identifier_type, owner.identifier, max_uses, created, seq + 1),
                )
                if cursor.rowcount == 1:  # a collision with an existing code is simply drawn again
                    codes.append(code)
                    seq += 1
            return codes

        async with self._db.transaction():
            codes = await self._db.run(insert)
            records = [CodeRecord(code, owner, created, max_uses, 0, []) for code in codes]
            yield Change(records, dump_records([codes_created_record(project_id, owner, records)]))

    async def list_codes(self, project_id: str, owner: User, offset: int, limit: int) -> tuple[list[CodeRecord], int]:
        def read(c: sqlite3.Connection):
            where = "project_id = ? AND owner_type = ? AND owner_id = ?"
            args = (project_id, owner.identifier_type, owner.identifier)
            count = c.execute(f"SELECT COUNT(*) FROM codes WHERE {where}", args).fetchone()[0]
            rows = c.execute(
                f"SELECT * FROM codes WHERE {where} ORDER BY seq DESC LIMIT ? OFFSET ?", (*args, limit, offset)
            ).fetchall()
            return [self._code_record(c, row) for row in rows], count

        return await self._db.run(read)

    async def codes_of(self, project_id: str, owners: Sequence[User]) -> dict[User, list[str]]:
        def read(c: sqlite3.Connection) -> dict[User, list[str]]:
            codes: dict[User, list[str]] = {}
            for owner in dict.fromkeys(owners):
                rows = c.execute(
                    "SELECT code FROM codes WHERE project_id = ? AND owner_type = ? AND owner_id = ? ORDER BY seq DESC",
                    (project_id, owner.identifier_type, owner.identifier),
                ).fetchall()
                if rows:
                    codes[owner] = [row["code"] for row in rows]
            return codes

        return await self._db.run(read)

    async def get_code(self, project_id: str, code: str) -> CodeRecord | None:
        return await self._db.run(lambda c: self._read_code(c, project_id, normalize_code(code)))

    async def set_max_uses(self, project_id: str, code: str, max_uses: int | None) -> CodeRecord:
        code = normalize_code(code)

        def update(c: sqlite3.Connection) -> CodeRecord:
            record = self._read_code(c, project_id, code)
            if record is None:
                raise CodeNotFound("Referral code not found")
            if max_uses is not None and max_uses < record.current_uses:
                raise MaxUsesBelowCurrent(f"max_uses must not be less than current_uses ({record.current_uses})")
            c.execute("UPDATE codes SET max_uses = ? WHERE project_id = ? AND code = ?", (max_uses, project_id, code))
            return self._read_code(c, project_id, code)

        return await self._db.run(update)

    @asynccontextmanager
    async def use_code(self, project_id: str, code: str, user: User, proof: dict):
        code = normalize_code(code)
        used_at = now_ms()
        use_id = uuid.uuid4().hex

        def use(c: sqlite3.Connection) -> tuple[CodeRecord, CodeUseRecord]:
            record = self._read_code(c, project_id, code)
            if record is None:
                raise CodeNotFound("Referral code not found")
            check_use(record, user, self._referrer(c, project_id, user), self._chain(c, project_id, record.owner))
            c.execute(
                "UPDATE codes SET current_uses = current_uses + 1 WHERE project_id = ? AND code = ?", (project_id, code)
            )
            c.execute(
                "INSERT INTO code_uses (project_id, code, use_id, user_type, user_id, used_ms, proof) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (project_id, code, use_id, user.identifier_type, user.identifier, used_at, json.dumps(proof)),
            )
            c.execute(
                "INSERT INTO referrals (project_id, user_type, user_id, referrer_type, referrer_id, code, referred_ms)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (project_id, user.identifier_type, user.identifier, record.owner.identifier_type,
                 record.owner.identifier, code, used_at),
            )  # fmt: skip
            event = CodeUseRecord(
                project_id=project_id, use_id=use_id, code=code,
                owner_identifier=record.owner.identifier, owner_identifier_type=record.owner.identifier_type,
                user_identifier=user.identifier, user_identifier_type=user.identifier_type, used_at_ms=used_at,
                max_uses=record.max_uses,
            )  # fmt: skip
            return self._read_code(c, project_id, code), event

        async with self._db.transaction():
            record, event = await self._db.run(use)
            yield Change((record, event), dump_records([event]))

    async def referral_of(self, project_id: str, user: User) -> Referral | None:
        row = await self._db.run(
            lambda c: c.execute(
                "SELECT referrer_type, referrer_id, code, referred_ms FROM referrals "
                "WHERE project_id = ? AND user_type = ? AND user_id = ?",
                (project_id, user.identifier_type, user.identifier),
            ).fetchone()
        )
        if row is None:
            return None
        return Referral(row["code"], User(row["referrer_id"], row["referrer_type"]), row["referred_ms"])

    async def referrer_chains(self, project_id: str, users: Sequence[User], depth: int) -> dict[User, list[User]]:
        return await self._db.run(lambda c: {user: self._chain(c, project_id, user, depth) for user in users})

    def _referrer(self, c: sqlite3.Connection, project_id: str, user: User) -> User | None:
        row = c.execute(
            "SELECT referrer_type, referrer_id FROM referrals WHERE project_id = ? AND user_type = ? AND user_id = ?",
            (project_id, user.identifier_type, user.identifier),
        ).fetchone()
        return None if row is None else User(row["referrer_id"], row["referrer_type"])

    def _chain(self, c: sqlite3.Connection, project_id: str, user: User, depth: int = _CHAIN_LIMIT) -> list[User]:
        chain: list[User] = []
        current = self._referrer(c, project_id, user)
        while current is not None and len(chain) < depth and current not in chain:
            chain.append(current)
            current = self._referrer(c, project_id, current)
        return chain

    def _read_code(self, c: sqlite3.Connection, project_id: str, code: str) -> CodeRecord | None:
        row = c.execute("SELECT * FROM codes WHERE project_id = ? AND code = ?", (project_id, code)).fetchone()
        return None if row is None else self._code_record(c, row)

    @staticmethod
    def _code_record(c: sqlite3.Connection, row: sqlite3.Row) -> CodeRecord:
        uses = c.execute(
            "SELECT user_id, user_type, used_ms FROM code_uses WHERE project_id = ? AND code = ? ORDER BY used_ms",
            (row["project_id"], row["code"]),
        ).fetchall()
        return CodeRecord(
            code=row["code"],
            owner=User(row["owner_id"], row["owner_type"]),
            created_at_ms=row["created_ms"],
            max_uses=row["max_uses"],
            current_uses=row["current_uses"],
            used_by=[CodeUse(u["user_id"], u["user_type"], u["used_ms"]) for u in uses],
        )

    # -- events ----------------------------------------------------------------------------------

    @asynccontextmanager
    async def ingest(
        self,
        project_id: str,
        dedup_ids: list[str],
        users_and_names: list[tuple[User, str]],
        idempotency: tuple[str, str] | None,
    ):
        claim = IngestClaim()
        async with self._db.transaction():
            now = now_ms()
            if idempotency is not None:
                claim.replay = await self._db.run(
                    lambda c: self._idempotent_replay(c, project_id, *idempotency, now - self._idempotency_ms)
                )
                if claim.replay is not None:
                    yield claim
                    return
            claim.fresh = await self._db.run(
                lambda c: self._claim(c, project_id, dedup_ids, users_and_names, now, now - self._window_ms)
            )
            yield claim
            if idempotency is not None and claim.response is not None:
                key, body_hash = idempotency
                await self._db.run(
                    lambda c: c.execute(
                        "INSERT INTO idempotency (project_id, key, body_hash, response, created_ms) "
                        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (project_id, key) DO UPDATE SET "
                        "body_hash = excluded.body_hash, response = excluded.response, "
                        "created_ms = excluded.created_ms",
                        (project_id, key, body_hash, claim.response, now),
                    )
                )
            await self._db.run(lambda c: self._sweep(c, now, SWEEP_LIMIT))

    async def sweep_expired(self, limit: int = SWEEP_LIMIT) -> int:
        """Delete up to `limit` expired rows of each table (dedup, user_events, idempotency); returns how many."""
        return await self._db.run(lambda c: self._sweep(c, now_ms(), limit))

    def _sweep(self, c: sqlite3.Connection, now: int, limit: int) -> int:
        window_cutoff, idem_cutoff = now - self._window_ms, now - self._idempotency_ms
        deleted = c.execute(
            "DELETE FROM dedup WHERE (project_id, dedup_id) IN "
            "(SELECT project_id, dedup_id FROM dedup WHERE created_ms <= ? ORDER BY created_ms LIMIT ?)",
            (window_cutoff, limit),
        ).rowcount
        deleted += c.execute(
            "DELETE FROM user_events WHERE (project_id, user_type, user_id, name) IN "
            "(SELECT project_id, user_type, user_id, name FROM user_events WHERE seen_ms <= ? "
            "ORDER BY seen_ms LIMIT ?)",
            (window_cutoff, limit),
        ).rowcount
        deleted += c.execute(
            "DELETE FROM idempotency WHERE rowid IN "
            "(SELECT rowid FROM idempotency WHERE created_ms <= ? ORDER BY created_ms LIMIT ?)",
            (idem_cutoff, limit),
        ).rowcount
        return deleted

    @staticmethod
    def _idempotent_replay(
        c: sqlite3.Connection, project_id: str, key: str, body_hash: str, cutoff: int
    ) -> bytes | None:
        row = c.execute(
            "SELECT body_hash, response FROM idempotency WHERE project_id = ? AND key = ? AND created_ms > ?",
            (project_id, key, cutoff),
        ).fetchone()
        if row is None:
            return None
        if row["body_hash"] != body_hash:
            raise IdempotencyKeyReused("Idempotency-Key has already been used with a different body")
        return row["response"]

    @staticmethod
    def _claim(
        c: sqlite3.Connection, project_id: str, dedup_ids: list[str], users_and_names, now: int, cutoff: int
    ) -> list[int]:
        fresh = []
        for index, dedup_id in enumerate(dedup_ids):
            # New, or known from before the window (not yet swept): a new event either way.
            cursor = c.execute(
                "INSERT INTO dedup (project_id, dedup_id, processed, created_ms) VALUES (?, ?, 0, ?) "
                "ON CONFLICT (project_id, dedup_id) DO UPDATE SET processed = 0, created_ms = excluded.created_ms "
                "WHERE dedup.created_ms <= ?",
                (project_id, dedup_id, now, cutoff),
            )
            if cursor.rowcount == 1:
                fresh.append(index)
        c.executemany(
            "INSERT INTO user_events (project_id, user_type, user_id, name, seen_ms) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (project_id, user_type, user_id, name) DO UPDATE SET seen_ms = excluded.seen_ms",
            [(project_id, users_and_names[i][0].identifier_type, users_and_names[i][0].identifier,
              users_and_names[i][1], now) for i in fresh],
        )  # fmt: skip
        return fresh

    async def event_status(self, project_id: str, dedup_id: str) -> str | None:
        row = await self._db.run(
            lambda c: c.execute(
                "SELECT processed FROM dedup WHERE project_id = ? AND dedup_id = ? AND created_ms > ?",
                (project_id, dedup_id, now_ms() - self._window_ms),
            ).fetchone()
        )
        if row is None:
            return None
        return _STATUSES[row["processed"]]

    async def has_event(self, project_id: str, user: User, name: str) -> bool:
        row = await self._db.run(
            lambda c: c.execute(
                "SELECT 1 FROM user_events WHERE project_id = ? AND user_type = ? AND user_id = ? AND name = ? "
                "AND seen_ms > ?",
                (project_id, user.identifier_type, user.identifier, name, now_ms() - self._window_ms),
            ).fetchone()
        )
        return row is not None

    async def mark_processed(self, project_id: str, dedup_ids: list[str]) -> None:
        await self._mark(project_id, dedup_ids, _PROCESSED)

    async def mark_failed(self, project_id: str, dedup_ids: list[str]) -> None:
        await self._mark(project_id, dedup_ids, _FAILED)

    async def _mark(self, project_id: str, dedup_ids: list[str], status: int) -> None:
        await self._db.run(
            lambda c: c.executemany(
                "UPDATE dedup SET processed = ? WHERE project_id = ? AND dedup_id = ?",
                [(status, project_id, dedup_id) for dedup_id in dedup_ids],
            )
        )

    # -- claim checks ----------------------------------------------------------------------------

    async def register_claim_checks(self, project_id: str, checks: Sequence[ClaimCheck]) -> None:
        rows = [
            (project_id, check.id, check.user.identifier_type, check.user.identifier,
             to_record(project_id, check).model_dump_json())
            for check in checks
        ]  # fmt: skip
        await self._db.run(
            lambda c: c.executemany(
                "INSERT OR IGNORE INTO claim_checks (project_id, id, user_type, user_id, record) "
                "VALUES (?, ?, ?, ?, ?)",
                rows,
            )
        )

    @asynccontextmanager
    async def update_claim_checks(
        self, project_id: str, ids: Sequence[str], change: Callable[[ClaimCheck], ClaimCheck], owner: User | None
    ):
        def update(c: sqlite3.Connection) -> list[ClaimCheck]:
            changed = [change(self._claim_check(c, project_id, check_id, owner)) for check_id in ids]
            c.executemany(
                "UPDATE claim_checks SET record = ? WHERE project_id = ? AND id = ?",
                [(to_record(project_id, check).model_dump_json(), project_id, check.id) for check in changed],
            )
            return changed

        async with self._db.transaction():
            changed = await self._db.run(update)
            yield Change(changed, dump_records([to_record(project_id, c) for c in changed]) if changed else None)

    @staticmethod
    def _claim_check(c: sqlite3.Connection, project_id: str, check_id: str, owner: User | None) -> ClaimCheck:
        row = c.execute("SELECT * FROM claim_checks WHERE project_id = ? AND id = ?", (project_id, check_id)).fetchone()
        owned = owner is None or (row is not None and User(row["user_id"], row["user_type"]) == owner)
        if row is None or not owned:
            raise ClaimCheckNotFound(f"claim check {check_id} not found")
        return from_record(ClaimCheckRecord.model_validate_json(row["record"]))

    async def processed_among(self, project_id: str, dedup_ids: list[str]) -> set[str]:
        def read(c: sqlite3.Connection) -> set[str]:
            marks = ",".join("?" * len(dedup_ids))
            rows = c.execute(
                "SELECT dedup_id FROM dedup WHERE project_id = ? AND processed > 0 AND created_ms > ? "
                f"AND dedup_id IN ({marks})",
                (project_id, now_ms() - self._window_ms, *dedup_ids),
            ).fetchall()
            return {row["dedup_id"] for row in rows}

        return await self._db.run(read) if dedup_ids else set()

    async def ping(self) -> None:
        await self._db.run(lambda c: c.execute("SELECT 1").fetchone())

    async def close(self) -> None:
        await self._db.close()


# The affiliates table's columns (rewards.adapters.embedded.sqlite_db) named otherwise than the attributes they hold.
_AFFILIATE_COLUMNS = {"created_at_ms": "created_ms"}
_AFFILIATE_ATTRIBUTES = {column: name for name, column in _AFFILIATE_COLUMNS.items()}


def _affiliate_row(project_id: str, a: Affiliate) -> dict:
    attributes = {_AFFILIATE_COLUMNS.get(name, name): value for name, value in stored_attributes(a).items()}
    return {"project_id": project_id, "user_type": a.user.identifier_type, "user_id": a.user.identifier, **attributes}


def _affiliate(user: User, row: sqlite3.Row) -> Affiliate:
    columns = zip(row.keys(), row, strict=True)
    return stored_affiliate(user, {_AFFILIATE_ATTRIBUTES.get(column, column): value for column, value in columns})
