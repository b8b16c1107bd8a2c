"""StateStore on SQLite: the embedded stand-in for Redis."""

import json
import sqlite3
import uuid
from collections.abc import Callable, Sequence
from contextlib import asynccontextmanager
from decimal import Decimal

from rewards.adapters.embedded.sqlite_db import SqliteDatabase
from rewards.domain import keys
from rewards.domain.affiliates import affiliate_record, codes_created_record, stored_affiliate, stored_attributes
from rewards.domain.amounts import format_amount
from rewards.domain.claim_checks import ClaimCheck, ClaimCheckNotFound, from_record, to_record
from rewards.domain.claim_signing import StoredSigner
from rewards.domain.codes import generate_code, normalize_code
from rewards.domain.errors import IdempotencyKeyReused
from rewards.domain.payout_config import EMPTY_CONFIG, PayoutConfig
from rewards.domain.payouts import User
from rewards.domain.referrals import (
    AddressInUse,
    AffiliateCodeNotFound,
    CodeInUse,
    CodeNotFound,
    CodeRecord,
    CodeUse,
    MaxUsesBelowCurrent,
    ReferralNotFound,
    check_use,
    max_uses_below_current,
    referral_removed_record,
)
from rewards.domain.timestamps import now_ms
from rewards.ports import Affiliate, Change, IngestClaim, Principal, Referral
from schemas.records import ClaimCheckRecord, CodeUseRecord, ReferralRemovedRecord, dump_records

_CHAIN_LIMIT = 64  # referral chains are walked this far when looking for cycles
# dedup.processed: 0 accepted, 1 processed, 2 failed (set aside by the workers as a dead letter)
_PROCESSED, _FAILED = 1, 2
_STATUSES = ("accepted", "processed", "failed")


SWEEP_LIMIT = 256  # rows of each table deleted at most per sweep (one per ingest, which adds at most 100)


class SqliteStateStore:
    """The reference adapter of rewards.ports.StateStore, so of each of its ports: ProjectStore, AffiliateStore,
    ReferralStore, IngestStore, ClaimCheckStore and TrackingStore.

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

    async def put_claim_signer(self, project_id: str, signer: StoredSigner | None) -> None:
        if signer is None:
            await self._db.run(lambda c: c.execute("DELETE FROM claim_signers WHERE project_id = ?", (project_id,)))
            return
        await self._db.run(
            lambda c: c.execute(
                "INSERT INTO claim_signers (project_id, address, sealed_key, updated_ms) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (project_id) DO UPDATE SET address = excluded.address, sealed_key = excluded.sealed_key, "
                "updated_ms = excluded.updated_ms",
                (project_id, signer.address, signer.sealed_key, now_ms()),
            )
        )

    async def get_claim_signer(self, project_id: str) -> StoredSigner | None:
        row = await self._db.run(
            lambda c: c.execute(
                "SELECT address, sealed_key FROM claim_signers WHERE project_id = ?", (project_id,)
            ).fetchone()
        )
        return None if row is None else StoredSigner(address=row["address"], sealed_key=row["sealed_key"])

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
                former = c.execute("SELECT 1 FROM code_names WHERE project_id = ? AND name = ?", (project_id, code))
                if former.fetchone() is not None:
                    continue  # the former name of a renamed code: still that code's
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
            if max_uses_below_current(max_uses, record.current_uses):
                raise MaxUsesBelowCurrent(f"max_uses must not be less than current_uses ({record.current_uses})")
            c.execute(
                "UPDATE codes SET max_uses = ? WHERE project_id = ? AND code = ?", (max_uses, project_id, record.code)
            )
            return self._read_code(c, project_id, record.code)

        return await self._db.run(update)

    @asynccontextmanager
    async def use_code(self, project_id: str, code: str, user: User, proof: dict):
        named = normalize_code(code)
        used_at = now_ms()
        use_id = uuid.uuid4().hex

        def use(c: sqlite3.Connection) -> tuple[CodeRecord, CodeUseRecord]:
            record = self._read_code(c, project_id, named)
            if record is None:
                raise CodeNotFound("Referral code not found")
            check_use(record, user, self._referrer(c, project_id, user), self._chain(c, project_id, record.owner))
            code = record.code  # its current name (it may have been found by a former one)
            c.execute(
                "UPDATE codes SET current_uses = current_uses + 1 WHERE project_id = ? AND code = ?", (project_id, code)
            )
            c.execute(
                "INSERT INTO code_uses (project_id, code, use_id, user_type, user_id, used_ms, proof) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (project_id, code, use_id, user.identifier_type, user.identifier, used_at, json.dumps(proof)),
            )
            c.execute(
                "INSERT INTO referrals (project_id, user_type, user_id, referrer_type, referrer_id, code, referred_ms,"
                " use_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (project_id, user.identifier_type, user.identifier, record.owner.identifier_type,
                 record.owner.identifier, code, used_at, use_id),
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
        """The code named `code` (normalized), by its current name or a former one."""
        row = c.execute("SELECT * FROM codes WHERE project_id = ? AND code = ?", (project_id, code)).fetchone()
        if row is None:
            renamed = c.execute(
                "SELECT code FROM code_names WHERE project_id = ? AND name = ?", (project_id, code)
            ).fetchone()
            if renamed is not None:
                row = c.execute(
                    "SELECT * FROM codes WHERE project_id = ? AND code = ?", (project_id, renamed["code"])
                ).fetchone()
        return None if row is None else self._code_record(c, row)

    @staticmethod
    def _code_record(c: sqlite3.Connection, row: sqlite3.Row) -> CodeRecord:
        uses = c.execute(
            "SELECT user_id, user_type, used_ms FROM code_uses WHERE project_id = ? AND code = ? ORDER BY used_ms",
            (row["project_id"], row["code"]),
        ).fetchall()
        names = c.execute(
            "SELECT name FROM code_names WHERE project_id = ? AND code = ?", (row["project_id"], row["code"])
        ).fetchall()
        return CodeRecord(
            code=row["code"],
            owner=User(row["owner_id"], row["owner_type"]),
            created_at_ms=row["created_ms"],
            max_uses=row["max_uses"],
            current_uses=row["current_uses"],
            used_by=[CodeUse(u["user_id"], u["user_type"], u["used_ms"]) for u in uses],
            chosen=bool(row["chosen"]),
            rebate_rate=None if row["rebate_rate"] is None else Decimal(row["rebate_rate"]),
            names=tuple(sorted(n["name"] for n in names)),
            updated_at_ms=row["updated_ms"],
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

    async def get_claim_checks(self, project_id: str, ids: Sequence[str]) -> list[ClaimCheck]:
        def read(c: sqlite3.Connection) -> dict[str, str]:
            rows = c.execute(
                f"SELECT id, record FROM claim_checks WHERE project_id = ? AND id IN ({','.join('?' * len(ids))})",
                (project_id, *ids),
            ).fetchall()
            return {row["id"]: row["record"] for row in rows}

        found = await self._db.run(read) if ids else {}
        return [from_record(ClaimCheckRecord.model_validate_json(found[i])) for i in dict.fromkeys(ids) if i in found]

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

    # -- tracking events (API.md §7): rows until their expiry, swept by each write --------------------------

    @asynccontextmanager
    async def first_within(self, project_id: str, key: str, window_s: float):
        now = now_ms()
        token = uuid.uuid4().hex

        def claim(c: sqlite3.Connection) -> bool:
            _sweep_tracking(c, now, SWEEP_LIMIT)
            cursor = c.execute(
                "INSERT INTO tracking (project_id, kind, key, value, expires_ms) VALUES (?, 'repeat', ?, ?, ?) "
                "ON CONFLICT (project_id, kind, key) DO UPDATE SET value = excluded.value, "
                "expires_ms = excluded.expires_ms WHERE tracking.expires_ms <= ?",
                (project_id, key, token, now + _ms(window_s), now),
            )
            return cursor.rowcount == 1

        first = await self._db.run(claim)
        try:
            yield first
        except BaseException as exc:
            if first and getattr(exc, "maybe_published", False) is not True:
                await self._db.run(
                    lambda c: c.execute(
                        "DELETE FROM tracking WHERE project_id = ? AND kind = 'repeat' AND key = ? AND value = ?",
                        (project_id, key, token),
                    )
                )
            raise

    async def bind_code(self, project_id: str, tracking_id: str, code: str, ttl_s: float) -> None:
        await self._db.run(lambda c: _bind(c, project_id, "code", tracking_id, code, ttl_s))

    async def bind_user(self, project_id: str, tracking_id: str, user: User, ttl_s: float) -> str | None:
        def bind(c: sqlite3.Connection) -> str | None:
            _bind(c, project_id, "user", tracking_id, f"{user.identifier_type}:{user.identifier}", ttl_s)
            return _bound(c, project_id, "code", tracking_id)

        return await self._db.run(bind)

    async def tracked_user(self, project_id: str, tracking_id: str) -> User | None:
        value = await self._db.run(lambda c: _bound(c, project_id, "user", tracking_id))
        if value is None:
            return None
        identifier_type, identifier = value.split(":", 1)
        return User(identifier, identifier_type)

    # -- affiliate codes (API.md §7): a code chosen by its owner; renamed, it keeps its former names ------------

    @asynccontextmanager
    async def create_affiliate_code(
        self, project_id: str, owner: User, code: str, rebate_rate: Decimal | None, proof: dict
    ):
        key, created = normalize_code(code), now_ms()

        def insert(c: sqlite3.Connection) -> CodeRecord:
            if _name_taken(c, project_id, key):
                raise CodeInUse()
            if _chosen_code(c, project_id, owner) is not None:
                raise AddressInUse()
            seq = c.execute("SELECT COALESCE(MAX(seq), 0) FROM codes WHERE project_id = ?", (project_id,)).fetchone()[0]
            c.execute(
                "INSERT INTO codes (project_id, code, owner_type, owner_id, max_uses, created_ms, seq, chosen, "
                "rebate_rate, proof) VALUES (?, ?, ?, ?, NULL, ?, ?, 1, ?, ?)",
                (project_id, key, owner.identifier_type, owner.identifier, created, seq + 1, _rate_text(rebate_rate),
                 json.dumps(proof)),
            )  # fmt: skip
            return self._read_code(c, project_id, key)

        async with self._db.transaction():
            record = await self._db.run(insert)
            yield Change(record, dump_records([codes_created_record(project_id, owner, [record])]))

    @asynccontextmanager
    async def rename_affiliate_code(self, project_id: str, owner: User, code: str, proof: dict):
        key, now = normalize_code(code), now_ms()

        def rename(c: sqlite3.Connection) -> tuple[CodeRecord, bool]:
            current = _chosen_code(c, project_id, owner)
            if current is None:
                raise AffiliateCodeNotFound("The user has no affiliate code")
            if key == current:
                return self._read_code(c, project_id, current), False
            own_name = c.execute(
                "SELECT 1 FROM code_names WHERE project_id = ? AND name = ? AND code = ?", (project_id, key, current)
            ).fetchone()
            if own_name is None and _name_taken(c, project_id, key):
                raise CodeInUse()
            moved = (key, project_id, current)
            c.execute("DELETE FROM code_names WHERE project_id = ? AND name = ?", (project_id, key))
            c.execute("UPDATE code_names SET code = ? WHERE project_id = ? AND code = ?", moved)
            c.execute("INSERT INTO code_names (project_id, name, code) VALUES (?, ?, ?)", (project_id, current, key))
            c.execute(
                "UPDATE codes SET code = ?, proof = ?, updated_ms = ? WHERE project_id = ? AND code = ?",
                (key, json.dumps(proof), now, project_id, current),
            )
            c.execute("UPDATE code_uses SET code = ? WHERE project_id = ? AND code = ?", moved)
            c.execute("UPDATE referrals SET code = ? WHERE project_id = ? AND code = ?", moved)
            return self._read_code(c, project_id, key), True

        async with self._db.transaction():
            record, renamed = await self._db.run(rename)
            yield Change(record, dump_records([codes_created_record(project_id, owner, [record])]) if renamed else None)

    async def set_rebate_rate(
        self, project_id: str, owner: User, code: str, rebate_rate: Decimal | None, proof: dict
    ) -> CodeRecord:
        def update(c: sqlite3.Connection) -> CodeRecord:
            record = self._read_code(c, project_id, normalize_code(code))
            if record is None or record.owner != owner:
                raise AffiliateCodeNotFound("The user has no such code")
            c.execute(
                "UPDATE codes SET rebate_rate = ?, proof = ?, updated_ms = ? WHERE project_id = ? AND code = ?",
                (_rate_text(rebate_rate), json.dumps(proof), now_ms(), project_id, record.code),
            )
            return self._read_code(c, project_id, record.code)

        return await self._db.run(update)

    @asynccontextmanager
    async def remove_referral(self, project_id: str, user: User, code: str, referrer: User):
        removed_at = now_ms()

        def remove(c: sqlite3.Connection) -> ReferralRemovedRecord:
            where = "project_id = ? AND user_type = ? AND user_id = ?"
            who = (project_id, user.identifier_type, user.identifier)
            row = c.execute(f"SELECT * FROM referrals WHERE {where}", who).fetchone()
            named = self._read_code(c, project_id, normalize_code(code))
            by = None if row is None else User(row["referrer_id"], row["referrer_type"])
            if row is None or named is None or named.code != row["code"] or by != referrer:
                raise ReferralNotFound("Referral not found")
            c.execute(f"DELETE FROM referrals WHERE {where}", who)
            use_id = row["use_id"]
            if use_id is None:  # a referral made before its use was recorded beside it: its use, found by its time
                use = c.execute(
                    "SELECT use_id FROM code_uses WHERE project_id = ? AND code = ? AND user_type = ? AND user_id = ? "
                    "AND used_ms = ?",
                    (project_id, row["code"], user.identifier_type, user.identifier, row["referred_ms"]),
                ).fetchone()
                use_id = "" if use is None else use["use_id"]
            return referral_removed_record(
                project_id, uuid.uuid4().hex, use_id, row["code"], referrer, user, row["referred_ms"], removed_at
            )

        async with self._db.transaction():
            record = await self._db.run(remove)
            yield Change(Referral(record.code, referrer, record.referred_at_ms), dump_records([record]))

    async def referrals_among(self, project_id: str, users: Sequence[User]) -> dict[User, Referral]:
        def read(c: sqlite3.Connection) -> dict[User, Referral]:
            found = {}
            for user in dict.fromkeys(users):
                row = c.execute(
                    "SELECT referrer_type, referrer_id, code, referred_ms FROM referrals "
                    "WHERE project_id = ? AND user_type = ? AND user_id = ?",
                    (project_id, user.identifier_type, user.identifier),
                ).fetchone()
                if row is not None:
                    referrer = User(row["referrer_id"], row["referrer_type"])
                    found[user] = Referral(row["code"], referrer, row["referred_ms"])
            return found

        return await self._db.run(read)

    async def rebate_rates(self, project_id: str, codes: Sequence[str]) -> dict[str, Decimal]:
        def read(c: sqlite3.Connection) -> dict[str, Decimal]:
            rates = {}
            for code in dict.fromkeys(codes):
                row = c.execute(
                    "SELECT rebate_rate FROM codes WHERE project_id = ? AND code = ?", (project_id, code)
                ).fetchone()
                if row is not None and row["rebate_rate"] is not None:
                    rates[code] = Decimal(row["rebate_rate"])
            return rates

        return await self._db.run(read)


def _name_taken(c: sqlite3.Connection, project_id: str, name: str) -> bool:
    """Whether a code of the project has the name (normalized), or had it."""
    return (
        c.execute("SELECT 1 FROM codes WHERE project_id = ? AND code = ?", (project_id, name)).fetchone() is not None
        or c.execute("SELECT 1 FROM code_names WHERE project_id = ? AND name = ?", (project_id, name)).fetchone()
        is not None
    )


def _chosen_code(c: sqlite3.Connection, project_id: str, owner: User) -> str | None:
    """The name of `owner`'s affiliate code, None if it has none."""
    row = c.execute(
        "SELECT code FROM codes WHERE project_id = ? AND owner_type = ? AND owner_id = ? AND chosen = 1",
        (project_id, owner.identifier_type, owner.identifier),
    ).fetchone()
    return None if row is None else row["code"]


def _rate_text(rate: Decimal | None) -> str | None:
    return None if rate is None else format_amount(rate)


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _bind(c: sqlite3.Connection, project_id: str, kind: str, tracking_id: str, value: str, ttl_s: float) -> None:
    now = now_ms()
    _sweep_tracking(c, now, SWEEP_LIMIT)
    c.execute(
        "INSERT INTO tracking (project_id, kind, key, value, expires_ms) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (project_id, kind, key) DO UPDATE SET value = excluded.value, expires_ms = excluded.expires_ms",
        (project_id, kind, tracking_id, value, now + _ms(ttl_s)),
    )


def _bound(c: sqlite3.Connection, project_id: str, kind: str, tracking_id: str) -> str | None:
    row = c.execute(
        "SELECT value FROM tracking WHERE project_id = ? AND kind = ? AND key = ? AND expires_ms > ?",
        (project_id, kind, tracking_id, now_ms()),
    ).fetchone()
    return None if row is None else row["value"]


def _sweep_tracking(c: sqlite3.Connection, now: int, limit: int) -> int:
    """Delete up to `limit` expired tracking rows (found by their expiry index: an empty sweep is one probe)."""
    return c.execute(
        "DELETE FROM tracking WHERE (project_id, kind, key) IN "
        "(SELECT project_id, kind, key FROM tracking WHERE expires_ms <= ? ORDER BY expires_ms LIMIT ?)",
        (now, limit),
    ).rowcount


# The affiliates table's columns (rewards.adapters.embedded.sqlite_db) named otherwise than the attributes they hold.
_AFFILIATE_COLUMNS = {"created_at_ms": "created_ms"}
_AFFILIATE_ATTRIBUTES = {column: name for name, column in _AFFILIATE_COLUMNS.items()}


def _affiliate_row(project_id: str, a: Affiliate) -> dict:
    attributes = {_AFFILIATE_COLUMNS.get(name, name): value for name, value in stored_attributes(a).items()}
    return {"project_id": project_id, "user_type": a.user.identifier_type, "user_id": a.user.identifier, **attributes}


def _affiliate(user: User, row: sqlite3.Row) -> Affiliate:
    columns = zip(row.keys(), row, strict=True)
    return stored_affiliate(user, {_AFFILIATE_ATTRIBUTES.get(column, column): value for column, value in columns})
