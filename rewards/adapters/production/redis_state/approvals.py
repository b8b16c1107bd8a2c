"""ApprovalStore on Redis: each held payout in a key of its own (`held_payout:<id>`: its row, then 'decided' for 35
days), decided by a script that checks every key is still as read (else read again), with the outbox entry of the
decisions' records; undone (held again) if the publish fails."""

import json
from collections.abc import Sequence
from contextlib import asynccontextmanager
from dataclasses import replace

from rewards.adapters.production.redis_keys import ProjectKeys
from rewards.adapters.production.redis_state.base import _ATTEMPTS, RedisStateBase, StateChanging, _json, _new_entry
from rewards.domain.allotment import KEPT_MS
from rewards.domain.approvals import NotPending, decision_record
from schemas.records import dump_records

DECIDED = "decided"


class RedisApprovalStore(RedisStateBase):
    async def hold_payouts(self, project_id: str, held: Sequence[dict]) -> None:
        if held:
            k = ProjectKeys(project_id)
            keys = [k.held_payout(row["payout_id"]) for row in held]
            await self._scripts.hold_payouts(keys=keys, args=[_json(row) for row in held])

    @asynccontextmanager
    async def decide_payouts(
        self, project_id: str, payout_ids: Sequence[str], decision: str, reason: str | None, decided_at_ms: int
    ):
        k = ProjectKeys(project_id)
        ids = list(dict.fromkeys(payout_ids))
        keys = [k.held_payout(payout_id) for payout_id in ids]
        for _ in range(_ATTEMPTS):  # the script refuses if a key changed since it was read
            texts = await self._redis.mget(keys)
            for payout_id, text in zip(ids, texts, strict=True):
                if text is None or text == DECIDED:
                    raise NotPending(payout_id)
            records = [
                decision_record(project_id, payout_id, decision, reason, decided_at_ms, json.loads(text))
                for payout_id, text in zip(ids, texts, strict=True)
            ]
            entry = replace(_new_entry(), payload=dump_records(records))
            undo = self._outbox_undo(k, entry, self._scripts.undo_decide_payouts, keys, texts)
            writing = (self._scripts.decide_payouts, keys, [KEPT_MS, *texts])
            if await self._outbox_write(k, entry, *writing, undo) == "decided":
                break
        else:
            raise StateChanging(f"the held payouts of project {project_id} kept changing")
        async with self._published(k, entry, undo, len(records)) as change:
            yield change
