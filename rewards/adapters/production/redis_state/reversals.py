"""ReversalStore on Redis: each event's reversed share and its reversals' digests in a key of its own (`reversal:
<dedup_id>`, JSON {s, d, e}; TTL the dedup window after its last reversal), settled in Python and written by a
script that checks every key is still as read (else read again), with the outbox entry of their records.

While the request publishes, a concurrent request may read the new share; a reversal settled on it stands on this one
(the script's outbox_build_on), so this one's undo, should its publish fail, is then skipped and the relay publishes
it: shares are never taken from under a later reversal."""

import json
import uuid
from collections.abc import Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from decimal import Decimal

from rewards.adapters.production.redis_keys import ProjectKeys
from rewards.adapters.production.redis_state.base import _ATTEMPTS, RedisStateBase, StateChanging, _json, _new_entry
from rewards.domain import reversals as rules
from rewards.domain.allotment import KEPT_MS
from rewards.domain.amounts import format_amount
from rewards.domain.claim_checks import from_record, to_record
from rewards.domain.reversals import Owed, Reversal, TakeBack
from rewards.domain.timestamps import now_ms
from rewards.ports import Change
from schemas.records import ClaimCheckRecord, dump_records


class RedisReversalStore(RedisStateBase):
    _window_ms: int  # RedisIngestStore's: the dedup window

    @asynccontextmanager
    async def reverse(self, project_id: str, reversals: Sequence[Reversal], reversed_at_ms: int):
        k = ProjectKeys(project_id)
        events = list(dict.fromkeys(r.dedup_id for r in reversals))
        for _ in range(_ATTEMPTS):  # the script refuses if another request changed a key since it was read
            texts = dict(zip(events, await self._redis.mget([k.reversal(d) for d in events]), strict=True))
            held = {d: json.loads(text) for d, text in texts.items() if text is not None}
            seen = {digest for state in held.values() for digest in state["d"]}
            shares = {d: Decimal(state["s"]) for d, state in held.items()}
            settled = rules.settle(reversals, shares, seen, {d: len(state["d"]) for d, state in held.items()})
            if not settled.steps:
                yield Change(0, None)
                return
            records = rules.records(project_id, settled, [uuid.uuid4().hex for _ in settled.steps], reversed_at_ms)
            entry = replace(_new_entry(), payload=dump_records(records))
            changed = list(settled.shares)
            added = {d: [s.reversal.digest() for s in settled.steps if s.reversal.dedup_id == d] for d in changed}
            new = {
                d: _json({"s": format_amount(after), "d": [*held.get(d, {}).get("d", []), *added[d]], "e": entry.id})
                for d, (_, after) in settled.shares.items()
            }
            keys = [k.reversal(d) for d in changed]
            write_args = [self._window_ms, *(text for d in changed for text in (texts[d] or "", new[d]))]
            undo_args = [text for d in changed for text in (new[d], texts[d] or "")]
            undo = self._outbox_undo(k, entry, self._scripts.undo_reverse, keys, undo_args)
            if await self._outbox_write(k, entry, self._scripts.reverse, keys, write_args, undo) == "reversed":
                break
        else:
            raise StateChanging(f"the reversals of project {project_id}'s events kept changing")
        async with self._published(k, entry, undo, len(records)) as change:
            yield change

    async def mark_reversed(self, project_id: str, shares: Mapping[str, Decimal]) -> None:
        if shares:
            k = ProjectKeys(project_id)
            keys = [k.reversal_written(dedup_id) for dedup_id in shares]
            await self._scripts.mark_reversed(
                keys=keys, args=[self._window_ms, *(rules.share_text(share) for share in shares.values())]
            )

    async def reversed_shares(self, project_id: str, dedup_ids: Sequence[str]) -> dict[str, Decimal]:
        dedup_ids = list(dict.fromkeys(dedup_ids))
        if not dedup_ids:
            return {}
        k = ProjectKeys(project_id)
        texts = await self._redis.mget([k.reversal_written(d) for d in dedup_ids])
        return {d: rules.share_of(t) for d, t in zip(dedup_ids, texts, strict=True) if t is not None}

    async def take_back(self, project_id: str, token: str, items: Sequence[TakeBack]):
        k = ProjectKeys(project_id)
        ids = list(dict.fromkeys(item.check_id for item in items))

        async def compute() -> tuple[str, list[tuple[str, str | None, str]]]:
            texts = dict(zip(ids, await self._redis.mget([k.claim_check(i) for i in ids]), strict=True))
            checks = {i: from_record(ClaimCheckRecord.model_validate_json(t)) for i, t in texts.items() if t}
            debts, debt_texts = await self._debts(k, items)
            changed, owed, added = rules.take_back(items, checks, debts)
            records = {i: to_record(project_id, check).model_dump_json() for i, check in changed.items()}
            swaps = [(k.claim_check(i), texts[i], record) for i, record in records.items()]
            swaps += _debt_swaps(k, owed, debt_texts)
            return json.dumps({"checks": list(records.values()), "added": added}), swaps

        answer = json.loads(await self._swap_once(k, token, compute))
        return [from_record(ClaimCheckRecord.model_validate_json(r)) for r in answer["checks"]], answer["added"]

    async def settle_debts(self, project_id: str, token: str, asks: Sequence[Owed]) -> list[int]:
        k = ProjectKeys(project_id)

        async def compute() -> tuple[str, list[tuple[str, str | None, str]]]:
            debts, debt_texts = await self._debts(k, asks)
            left, settled = rules.settle_debts(asks, debts)
            return json.dumps(settled), _debt_swaps(k, left, debt_texts)

        return json.loads(await self._swap_once(k, token, compute))

    async def _debts(self, k: ProjectKeys, asked: Sequence) -> tuple[dict, dict]:
        """The debts of `asked`'s recipients and currencies, and their keys' texts (None: none)."""
        pairs = list(dict.fromkeys((item.user, item.currency) for item in asked))
        texts = dict(zip(pairs, await self._redis.mget([k.debt(cur, user) for user, cur in pairs]), strict=True))
        return {pair: int(text) for pair, text in texts.items() if text}, texts

    async def _swap_once(self, k: ProjectKeys, token: str, compute) -> str:
        """The answer of a call once per token: computed from what is read, written by swap_once.lua only if nothing
        it read changed since (else read again). A call that changes nothing keeps nothing."""
        for _ in range(_ATTEMPTS):
            kept = await self._redis.hget(k.debt_calls(), token)
            if kept is not None:
                return kept
            answer, swaps = await compute()
            if not swaps:  # nothing changes: nothing to keep (asked again, it answers the same)
                return answer
            keys = [k.debt_calls(), k.debt_calls_at(), *(key for key, _, _ in swaps)]
            values = [value for _, before, after in swaps for value in (before or "", after)]
            result = await self._scripts.swap_once(keys=keys, args=[token, now_ms(), KEPT_MS, answer, *values])
            if result[0] != "changed":
                return result[1]
        raise StateChanging(f"the claim checks and debts of project {k.project_id} kept changing")


def _debt_swaps(k: ProjectKeys, debts: dict, texts: dict) -> list[tuple[str, str | None, str]]:
    return [(k.debt(cur, user), texts.get((user, cur)), str(units) if units else "")
            for (user, cur), units in debts.items()]  # fmt: skip
