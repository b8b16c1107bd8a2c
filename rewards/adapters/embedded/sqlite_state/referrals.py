"""ReferralStore on SQLite: referral codes, affiliate codes and the referral graph their uses make."""

import json
import sqlite3
import uuid
from collections.abc import Sequence
from contextlib import asynccontextmanager
from decimal import Decimal

from rewards.adapters.embedded.sqlite_state.base import SqliteStateBase
from rewards.domain.affiliates import codes_created_record
from rewards.domain.amounts import format_amount
from rewards.domain.codes import generate_code, normalize_code
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
from rewards.ports import Change, Referral
from schemas.records import CodeUseRecord, ReferralRemovedRecord, dump_records

_CHAIN_LIMIT = 64  # referral chains are walked this far when looking for cycles


class SqliteReferralStore(SqliteStateBase):
    """The reference adapter of rewards.ports.ReferralStore."""

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
