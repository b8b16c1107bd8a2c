"""ReferralStore on Redis: referral codes, affiliate codes and the referral graph their uses make. Until the undo of a
change whose block raised (the package says why), concurrent readers can see:

- create_codes: the new codes (not yet returned to anyone, so practically invisible).
- use_code: the incremented uses, the use in `used_by` and the referral edge. Meanwhile a concurrent
  use may be refused for it (code at its limit, user already referred, cycle) and a worker may pay
  along the edge.
- create_affiliate_code: the code (its name taken, its owner's one affiliate code); rename_affiliate_code: the
  code under its new name (the undo moves it back only if it still has that name); remove_referral: the referral's
  absence.

A change that another change was built on before it was published stands too, since undoing it would pull the
ground from under the other (redis_scripts' outbox_build_on): a use of a code stands on the code's creation or
rename (so an undo never frees or moves a name a user was referred through), and on the removal of the user's
earlier referral, whose message it carries ahead of its own (the workers refuse a use of a user the warehouse holds
a referral of); a removal stands on the use that made the referral. A request that reads a code by a name reads it
atomically with the name's lookup, and again when a script finds it renamed since (use_code, set_max_uses, the undo of
a use): a rename never fails a request for a name that stays valid.
"""

import json
import uuid
from collections.abc import Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from decimal import Decimal
from functools import partial

from rewards.adapters.production.redis_keys import ProjectKeys, parse_user_field, user_field
from rewards.adapters.production.redis_state.base import (
    _ATTEMPTS,
    RedisStateBase,
    StateChanging,
    _Entry,
    _json,
    _new_entry,
)
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
from schemas.records import CodeUseRecord, dump_records

USED_BY_LIMIT = 1000  # a code record shows its latest uses only; current_uses still counts them all
_CHAIN_LIMIT = 64  # referral chains are walked this far when looking for cycles


class RedisReferralStore(RedisStateBase):
    """The production adapter of rewards.ports.ReferralStore."""

    @asynccontextmanager
    async def create_codes(self, project_id: str, owner: User, quantity: int, max_uses: int | None):
        k, created_ms, codes = ProjectKeys(project_id), now_ms(), _draw_codes(quantity)
        for _ in range(_ATTEMPTS):  # all or none: candidates colliding with existing codes are drawn again
            former = await self._redis.hmget(k.code_names(), codes)  # a renamed code's names stay its own
            if any(name is not None for name in former):
                codes = _draw_codes(quantity, [c for c, name in zip(codes, former, strict=True) if name is None])
                continue
            records = [CodeRecord(code, owner, created_ms, max_uses, 0, []) for code in codes]
            entry = replace(_new_entry(), payload=dump_records([codes_created_record(project_id, owner, records)]))
            code_keys = [k.code(c) for c in codes]
            undo = self._outbox_undo(k, entry, self._scripts.undo_codes, [k.owner_codes(owner), *code_keys], codes)
            args = [user_field(owner), created_ms, "" if max_uses is None else max_uses, *codes]
            writing = (self._scripts.create_codes, [k.code_seq(), k.owner_codes(owner), *code_keys], args)
            result = await self._outbox_write(k, entry, *writing, undo)
            if result[0] == "created":
                break
            codes = _draw_codes(quantity, [c for c in codes if c not in result[1:]])
        else:
            raise StateChanging(f"referral codes kept colliding with existing ones ({k.project_id})")
        async with self._published(k, entry, undo, records) as change:
            yield change

    async def list_codes(self, project_id: str, owner: User, offset: int, limit: int) -> tuple[list[CodeRecord], int]:
        k = ProjectKeys(project_id)
        count, codes = await self._scripts.owner_codes(keys=[k.owner_codes(owner)], args=[offset, offset + limit - 1])
        if limit <= 0:
            codes = []
        return await self._read_codes(k, codes), count

    async def codes_of(self, project_id: str, owners: Sequence[User]) -> dict[User, list[str]]:
        k, unique = ProjectKeys(project_id), list(dict.fromkeys(owners))
        async with self._redis.pipeline(transaction=False) as pipe:
            for owner in unique:
                pipe.zrevrange(k.owner_codes(owner), 0, -1)
            found = await pipe.execute()
        return {owner: codes for owner, codes in zip(unique, found, strict=True) if codes}

    async def get_code(self, project_id: str, code: str) -> CodeRecord | None:
        k, name = ProjectKeys(project_id), normalize_code(code)
        records = await self._read_codes(k, [name])
        if not records:  # a renamed code's former name finds it
            current = await self._redis.hget(k.code_names(), name)
            records = [] if current is None else await self._read_codes(k, [current])
        return records[0] if records else None

    async def _code_by_name(
        self, k: ProjectKeys, name: str, user: User | None = None
    ) -> tuple[str, CodeRecord | None, str | None]:
        """The code `name` finds now, read atomically with what finds it (a rename moves a code to its new name, so a
        name read apart from the code may be stale by the read): its current name, its record (None: no code has the
        name), and `user`'s referral edge (None: none, or no user given)."""
        current = name
        for _ in range(_ATTEMPTS):
            keys = [k.code_names(), k.code(current), *([] if user is None else [k.referrals()])]
            found = await self._scripts.code_by_name(
                keys=keys, args=[name, current, "" if user is None else user_field(user)]
            )
            if found[0] == "code":
                return current, _code_record(current, _pairs(found[1]), []), found[2] or None
            current = found[1]
        raise StateChanging(f"referral code {name} kept being renamed ({k.project_id})")

    async def set_max_uses(self, project_id: str, code: str, max_uses: int | None) -> CodeRecord:
        k, name, limit = ProjectKeys(project_id), normalize_code(code), "" if max_uses is None else max_uses
        for _ in range(_ATTEMPTS):  # checked here, then again by the script (a use or a rename may come in between)
            current, record, _ = await self._code_by_name(k, name)
            if record is None:
                raise CodeNotFound("Referral code not found")
            if max_uses_below_current(max_uses, record.current_uses):
                raise MaxUsesBelowCurrent(f"max_uses must not be less than current_uses ({record.current_uses})")
            keys = [k.code(current), k.code_uses(current)]
            result = await self._scripts.set_max_uses(keys=keys, args=[limit, USED_BY_LIMIT])
            if result[0] == "set":
                return _code_record(current, _pairs(result[1]), result[2])
        raise StateChanging(f"referral code {name} kept changing")

    @asynccontextmanager
    async def use_code(self, project_id: str, code: str, user: User, proof: dict):
        k, used_at, use_id = ProjectKeys(project_id), now_ms(), uuid.uuid4().hex
        use = _json({"use_id": use_id, "user": user_field(user), "at": used_at, "proof": proof})
        record, event, entry, undo = await self._apply_use(k, normalize_code(code), user, (use, used_at), use_id)
        async with self._published(k, entry, undo, (record, event)) as change:
            yield change

    async def _apply_use(
        self, k: ProjectKeys, name: str, user: User, use: tuple[str, int], use_id: str
    ) -> tuple[CodeRecord, CodeUseRecord, _Entry, Callable]:
        """Check the use in Python, then apply it with a script that re-checks what may have changed since (a rename
        too: the code is then looked up again by the name given). Returns the code, the use, its entry (the message
        its script wrote: the use's record, after any record it carries) and its undo."""
        use_json, used_at = use
        entry = _new_entry(use_id)
        for _ in range(_ATTEMPTS):
            code, record, referrer = await self._use_snapshot(k, name, user)
            chains = await self.referrer_chains(k.project_id, [record.owner], _CHAIN_LIMIT)
            check_use(record, user, referrer, chains[record.owner])
            event = _code_use_record(k.project_id, entry.id, record, user, used_at)
            entry = replace(entry, payload=dump_records([event]))
            undo = self._use_undo(k, entry, code, use_json, user)
            edge = _json({"by": user_field(record.owner), "code": code, "at": used_at, "use": entry.id})
            max_uses = "" if record.max_uses is None else str(record.max_uses)
            args = [user_field(user), use_json, edge, user_field(record.owner), _CHAIN_LIMIT, USED_BY_LIMIT, max_uses]
            keys = [k.code(code), k.code_uses(code), k.referrals(), k.referral_removals()]
            result = await self._outbox_write(k, entry, self._scripts.use_code, keys, args, undo)
            if result[0] == "used":
                entry = replace(entry, payload=result[3].encode())
                return _code_record(code, _pairs(result[1]), result[2]), event, entry, undo
        raise StateChanging(f"referral code {name} kept changing while being used")

    async def _use_snapshot(self, k: ProjectKeys, name: str, user: User) -> tuple[str, CodeRecord, User | None]:
        """The code `name` finds (its current name and record) and the user's referrer, read together: use_code's
        script re-checks them."""
        code, record, edge = await self._code_by_name(k, name, user)
        if record is None:
            raise CodeNotFound("Referral code not found")
        return code, record, None if edge is None else parse_user_field(json.loads(edge)["by"])

    def _use_undo(self, k: ProjectKeys, entry: _Entry, code: str, use_json: str, user: User) -> Callable:
        """The undo of a use made under the name `code`: under the code's current name (it may be renamed by then)."""

        async def undo():
            current = code
            for _ in range(_ATTEMPTS):
                keys = [k.outbox(), k.outbox_records(), k.code_names(), k.code(current), k.code_uses(current),
                        k.referrals()]  # fmt: skip
                args = [entry.id, entry.due_ms, use_json, user_field(user), entry.id, code, current]
                result = await self._scripts.undo_use(keys=keys, args=args)
                if not isinstance(result, list):
                    return result
                current = result[1]
            raise StateChanging(f"referral code {code} kept being renamed while its use was undone")

        return undo

    async def referral_of(self, project_id: str, user: User) -> Referral | None:
        return (await self.referrals_among(project_id, [user])).get(user)

    async def referrer_chains(self, project_id: str, users: Sequence[User], depth: int) -> dict[User, list[User]]:
        users = list(dict.fromkeys(users))
        if not users:
            return {}
        args = [max(depth, 0), *(user_field(user) for user in users)]
        found = await self._scripts.referrer_chains(keys=[ProjectKeys(project_id).referrals()], args=args)
        return {user: [parse_user_field(f) for f in chain] for user, chain in zip(users, found, strict=True)}

    async def _read_codes(self, k: ProjectKeys, codes: list[str]) -> list[CodeRecord]:
        """The records of `codes` in order (codes that no longer exist are left out)."""
        if not codes:
            return []
        keys = [key for code in codes for key in (k.code(code), k.code_uses(code))]
        found = await self._scripts.read_codes(keys=keys, args=[USED_BY_LIMIT])
        records = (_code_record(code, _pairs(fields), uses) for code, (fields, uses) in zip(codes, found, strict=True))
        return [record for record in records if record is not None]

    # -- affiliate codes (API.md §7): a code chosen by its owner; renamed, it keeps its former names ------------

    @asynccontextmanager
    async def create_affiliate_code(
        self, project_id: str, owner: User, code: str, rebate_rate: Decimal | None, proof: dict
    ):
        k, name, created_ms = ProjectKeys(project_id), normalize_code(code), now_ms()
        record = CodeRecord(name, owner, created_ms, None, 0, [], chosen=True, rebate_rate=_rate(rebate_rate))
        entry = replace(_new_entry(), payload=dump_records([codes_created_record(project_id, owner, [record])]))
        owner_field = user_field(owner)
        undo_keys = [k.owner_codes(owner), k.code(name), k.affiliate_codes()]
        undo = self._outbox_undo(k, entry, self._scripts.undo_affiliate_code, undo_keys, [name, owner_field])
        keys = [k.code_seq(), k.owner_codes(owner), k.code(name), k.code_names(), k.affiliate_codes()]
        args = [owner_field, created_ms, name, _rate_text(rebate_rate), _json(proof)]
        result = await self._outbox_write(k, entry, self._scripts.create_affiliate_code, keys, args, undo)
        if result == "code_in_use":
            raise CodeInUse()
        if result == "address_in_use":
            raise AddressInUse()
        async with self._published(k, entry, undo, record) as change:
            yield change

    @asynccontextmanager
    async def rename_affiliate_code(self, project_id: str, owner: User, code: str, proof: dict):
        k, name, owner_field = ProjectKeys(project_id), normalize_code(code), user_field(owner)
        for _ in range(_ATTEMPTS):  # the script re-checks that the owner's code still has the name read
            old = await self._redis.hget(k.affiliate_codes(), owner_field)
            if old is None:
                raise AffiliateCodeNotFound("The user has no affiliate code")
            fields = await self._redis.hgetall(k.code(old))
            before = _code_record(old, fields, [])
            if before is None:
                continue
            if old == name:
                yield Change((await self._read_codes(k, [old]))[0], None)
                return
            renamed = replace(before, code=name, names=tuple(sorted({*before.names, old} - {name})))
            renamed = replace(renamed, updated_at_ms=now_ms())
            entry = replace(_new_entry(), payload=dump_records([codes_created_record(project_id, owner, [renamed])]))
            keys = [k.affiliate_codes(), k.code_names(), k.owner_codes(owner), k.code(old), k.code_uses(old),
                    k.code(name), k.code_uses(name)]  # fmt: skip
            earlier = [fields.get(field, "") for field in ("names", "proof", "updated_ms", "pending")]
            undo_args = [owner_field, old, name, *earlier]
            undo = self._outbox_undo(k, entry, self._scripts.undo_rename_affiliate_code, keys, undo_args)
            args = [owner_field, old, name, _json(proof), renamed.updated_at_ms]
            result = await self._outbox_write(k, entry, self._scripts.rename_affiliate_code, keys, args, undo)
            if result == "code_in_use":
                raise CodeInUse()
            if result == "renamed":
                break
        else:
            raise StateChanging(f"the affiliate code of {owner_field} kept changing ({k.project_id})")
        records = await self._read_codes(k, [name])
        async with self._published(k, entry, undo, records[0] if records else renamed) as change:
            yield change

    async def set_rebate_rate(
        self, project_id: str, owner: User, code: str, rebate_rate: Decimal | None, proof: dict
    ) -> CodeRecord:
        k, name = ProjectKeys(project_id), normalize_code(code)
        for _ in range(_ATTEMPTS):  # again if the code was renamed between its lookup and the change
            current, record, _ = await self._code_by_name(k, name)
            if record is None or record.owner != owner:
                raise AffiliateCodeNotFound("The user has no such code")
            args = [user_field(owner), _rate_text(rebate_rate), _json(proof), now_ms()]
            if await self._scripts.set_rebate_rate(keys=[k.code(current)], args=args) == 1:
                return (await self._read_codes(k, [current]))[0]
        raise StateChanging(f"referral code {name} kept changing")

    @asynccontextmanager
    async def remove_referral(self, project_id: str, user: User, code: str, referrer: User):
        k, user_key = ProjectKeys(project_id), user_field(user)
        for _ in range(_ATTEMPTS):  # the script re-checks that the referral is still the one read
            edge_text = await self._redis.hget(k.referrals(), user_key)
            edge = None if edge_text is None else json.loads(edge_text)
            if edge is None or parse_user_field(edge["by"]) != referrer:
                raise ReferralNotFound("Referral not found")
            names = [normalize_code(code), edge["code"]]  # resolved at once: a rename moves both or neither
            now = await self._redis.hmget(k.code_names(), names)
            named, through = (current or name for current, name in zip(now, names, strict=True))
            if through != named:
                raise ReferralNotFound("Referral not found")
            record = referral_removed_record(
                project_id, uuid.uuid4().hex, edge.get("use", ""), edge["code"], referrer, user, edge["at"], now_ms()
            )
            entry = replace(_new_entry(record.id), payload=dump_records([record]))
            edge_keys, edge_args = [k.referrals(), k.referral_removals()], [user_key, edge_text]
            undo = self._outbox_undo(k, entry, self._scripts.undo_remove_referral, edge_keys, edge_args)
            writing = (self._scripts.remove_referral, edge_keys, edge_args)
            if await self._outbox_write(k, entry, *writing, undo) == "removed":
                break
        else:
            raise StateChanging(f"the referral of {user_key} kept changing ({k.project_id})")
        removal_keys = [k.outbox(), k.outbox_records(), k.referral_removals()]
        published = partial(self._scripts.referral_removal_published, keys=removal_keys, args=[entry.id, user_key])
        async with self._published(k, entry, undo, Referral(through, referrer, edge["at"]), published) as change:
            yield change

    async def referrals_among(self, project_id: str, users: Sequence[User]) -> dict[User, Referral]:
        users = list(dict.fromkeys(users))
        if not users:
            return {}
        k = ProjectKeys(project_id)
        edges = await self._redis.hmget(k.referrals(), [user_field(u) for u in users])
        found = {u: json.loads(edge) for u, edge in zip(users, edges, strict=True) if edge is not None}
        names = list(dict.fromkeys(edge["code"] for edge in found.values()))
        current = dict(zip(names, await self._redis.hmget(k.code_names(), names), strict=True)) if names else {}
        return {
            u: Referral(current[edge["code"]] or edge["code"], parse_user_field(edge["by"]), edge["at"])
            for u, edge in found.items()
        }

    async def rebate_rates(self, project_id: str, codes: Sequence[str]) -> dict[str, Decimal]:
        codes = list(dict.fromkeys(codes))
        if not codes:
            return {}
        k = ProjectKeys(project_id)
        async with self._redis.pipeline(transaction=False) as pipe:  # one slot: the project's
            for code in codes:
                pipe.hget(k.code(code), "rebate_rate")
            rates = await pipe.execute()
        return {code: Decimal(rate) for code, rate in zip(codes, rates, strict=True) if rate is not None}


def _rate(rate: Decimal | None) -> Decimal | None:
    """A rebate rate as it reads back from Redis (its text)."""
    return None if rate is None else Decimal(format_amount(rate))


def _rate_text(rate: Decimal | None) -> str:
    return "" if rate is None else format_amount(rate)


def _code_record(code: str, fields: dict[str, str], uses: list[str]) -> CodeRecord | None:
    if not fields:
        return None
    max_uses, rate, updated = fields.get("max_uses"), fields.get("rebate_rate"), fields.get("updated_ms")
    return CodeRecord(
        code=code,
        owner=parse_user_field(fields["owner"]),
        created_at_ms=int(fields["created_ms"]),
        max_uses=None if max_uses is None else int(max_uses),
        current_uses=int(fields["current_uses"]),
        used_by=sorted((_code_use(use) for use in uses), key=lambda use: use.used_at_ms),
        chosen=fields.get("chosen") == "1",
        rebate_rate=None if rate is None else Decimal(rate),
        names=tuple(sorted(json.loads(fields.get("names") or "[]"))),
        updated_at_ms=None if updated is None else int(updated),
    )


def _code_use(document: str) -> CodeUse:
    use = json.loads(document)
    user = parse_user_field(use["user"])
    return CodeUse(user.identifier, user.identifier_type, use["at"])


def _draw_codes(quantity: int, keep: Sequence[str] = ()) -> list[str]:
    """`quantity` distinct candidate codes: `keep`, then new ones."""
    codes = list(dict.fromkeys(keep))
    while len(codes) < quantity:
        code = generate_code()
        if code not in codes:
            codes.append(code)
    return codes


def _code_use_record(project_id: str, use_id: str, record: CodeRecord, user: User, used_at: int) -> CodeUseRecord:
    return CodeUseRecord(
        project_id=project_id, use_id=use_id, code=record.code,
        owner_identifier=record.owner.identifier, owner_identifier_type=record.owner.identifier_type,
        user_identifier=user.identifier, user_identifier_type=user.identifier_type, used_at_ms=used_at,
        max_uses=record.max_uses,
    )  # fmt: skip


def _pairs(flat: list[str]) -> dict[str, str]:
    return dict(zip(flat[::2], flat[1::2], strict=True))
