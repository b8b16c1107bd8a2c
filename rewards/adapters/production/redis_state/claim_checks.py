"""ClaimCheckStore on Redis. Until the undo of a change whose block raised (the package says why), concurrent readers
can see:

- update_claim_checks: the changed checks. The undo puts a check back only if no later update
  replaced it since (a later update built on ours and published its own state).
"""

from collections.abc import Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace

from rewards.adapters.production.redis_keys import ProjectKeys
from rewards.adapters.production.redis_state.base import _ATTEMPTS, RedisStateBase, StateChanging, _new_entry
from rewards.domain.claim_checks import ClaimCheck, ClaimCheckNotFound, from_record, to_record
from rewards.domain.payouts import User
from rewards.ports import Change
from schemas.records import ClaimCheckRecord, dump_records


class RedisClaimCheckStore(RedisStateBase):
    """The production adapter of rewards.ports.ClaimCheckStore."""

    async def register_claim_checks(self, project_id: str, checks: Sequence[ClaimCheck]) -> None:
        if checks:
            k = ProjectKeys(project_id)
            records = [to_record(project_id, check).model_dump_json() for check in checks]
            await self._scripts.register_claim_checks(keys=[k.claim_check(check.id) for check in checks], args=records)

    @asynccontextmanager
    async def update_claim_checks(
        self, project_id: str, ids: Sequence[str], change: Callable[[ClaimCheck], ClaimCheck], owner: User | None
    ):
        k = ProjectKeys(project_id)
        check_keys = [k.claim_check(check_id) for check_id in ids]
        if not check_keys:
            yield Change([], None)
            return
        for _ in range(_ATTEMPTS):  # written only if no check changed since read (else read again)
            before = await self._redis.mget(check_keys)
            changed = [change(_owned_check(raw, i, owner)) for raw, i in zip(before, ids, strict=True)]
            records = [to_record(project_id, check) for check in changed]
            after = [record.model_dump_json() for record in records]
            entry = replace(_new_entry(), payload=dump_records(records))
            swaps = [value for pair in zip(after, before, strict=True) for value in pair]
            undo = self._outbox_undo(k, entry, self._scripts.undo_claim_checks, check_keys, swaps)
            pairs = [value for pair in zip(before, after, strict=True) for value in pair]
            writing = (self._scripts.update_claim_checks, check_keys, pairs)
            if await self._outbox_write(k, entry, *writing, undo) == "updated":
                break
        else:
            raise StateChanging(f"{check_keys[0]} kept changing")
        async with self._published(k, entry, undo, changed) as published:
            yield published

    async def get_claim_checks(self, project_id: str, ids: Sequence[str]) -> list[ClaimCheck]:
        ids = list(dict.fromkeys(ids))
        if not ids:
            return []
        k = ProjectKeys(project_id)
        found = await self._redis.mget([k.claim_check(check_id) for check_id in ids])  # one slot: the project's
        return [from_record(ClaimCheckRecord.model_validate_json(raw)) for raw in found if raw is not None]


def _owned_check(raw: str | None, check_id: str, owner: User | None) -> ClaimCheck:
    check = None if raw is None else from_record(ClaimCheckRecord.model_validate_json(raw))
    if check is None or (owner is not None and check.user != owner):
        raise ClaimCheckNotFound(f"claim check {check_id} not found")
    return check
