"""AllotmentStore on Redis: rewards.domain.allotment's rule in one Lua script per call (lua/allot_tallies.lua,
lua/allot.lua), every key in the project's slot, so a cap or budget is counted by one atomic step whatever the number
of workers."""

import hashlib
import json
from collections.abc import Mapping, Sequence

import orjson

from rewards.adapters.production.redis_keys import ProjectKeys, user_field
from rewards.adapters.production.redis_state.base import RedisStateBase
from rewards.domain import allotment
from rewards.domain.allotment import (
    END_USER,
    GRANTS_KEPT_MS,
    KEPT_MS,
    REFERRER,
    RELEASES_KEPT_MS,
    Ask,
    Grant,
    Limits,
    Tally,
    UnseededBudgets,
)
from rewards.domain.timestamps import now_ms

SIDES = (END_USER, REFERRER)


def _field(side: str, currency: str, user) -> str:
    """A user's counter of one side and currency, as include/allot_book.lua's field() names it (its length in bytes)."""
    return f"{side}|{len(currency.encode())}:{currency}|{user_field(user)}"


def _limits(limits: Limits) -> str:
    caps = {
        currency: [[list(cap.sides), str(cap.units), cap.window, cap.window_ms] for cap in rules]
        for currency, rules in limits.caps.items()
    }
    history = {currency: kept for currency in limits.caps if (kept := limits.history_ms(currency))}
    counts = {currency: {side: limits.counts(currency, side) for side in SIDES} for currency in limits.caps}
    budgets = {currency: str(units) for currency, units in limits.budgets.items()}
    document = {"budgets": budgets, "caps": caps, "history": history, "counts": counts, "kept_ms": KEPT_MS}
    return json.dumps({**document, "grants_kept_ms": GRANTS_KEPT_MS})


def _tally(tally: Tally, history: bool) -> list:
    """A tally as lua/allot_tallies.lua reads it (its grants by time only where a rolling cap keeps them)."""
    months = [[month, str(units), allotment.month_end_of(month) + KEPT_MS] for month, units in tally.months().items()]
    times = tally.times
    grants = ",".join(f"{at}:{units}" for at, units in times.items()) if history else ""
    user, units = user_field(tally.user), str(tally.units)
    return [user, tally.side, tally.currency, units, months, min(times), max(times), grants]


def _ask(ask: Ask) -> list:
    month_kept = allotment.month_end_ms(ask.at_ms) + KEPT_MS
    month = allotment.calendar_month(ask.at_ms)
    return [ask.payout_id, user_field(ask.user), ask.side, ask.currency, str(ask.units), ask.at_ms, month, month_kept]


class RedisAllotmentStore(RedisStateBase):
    """The production adapter of rewards.ports.AllotmentStore."""

    async def allot_tallies(
        self,
        project_id: str,
        delivery: str,
        limits: Limits,
        tallies: Sequence[Tally],
        seeds: Mapping[str, int] | None = None,
    ) -> list[str]:
        asked = orjson.dumps([_tally(tally, "h" in limits.counts(tally.currency, tally.side)) for tally in tallies])
        answer = await self._run("allot_tallies", project_id, delivery, limits, asked, seeds)
        return list(answer)

    async def allot(
        self,
        project_id: str,
        delivery: str,
        limits: Limits,
        asks: Sequence[Ask],
        seeds: Mapping[str, int] | None = None,
    ) -> list[Grant]:
        answer = await self._run(
            "allot", project_id, delivery, limits, orjson.dumps([_ask(ask) for ask in asks]), seeds
        )
        return allotment.grants_of(asks, orjson.loads(answer))

    async def _run(
        self, script: str, project_id: str, delivery: str, limits: Limits, asked: bytes, seeds: Mapping[str, int] | None
    ) -> str:
        """One of the two scripts over the project's keys; its answer. The fingerprint of what is asked is the hash
        of its arguments' bytes (the same asks make the same bytes)."""
        k = ProjectKeys(project_id)
        keys = [k.allotment("deliveries"), k.allotment("deliveries_at"), k.allotment("paid"), k.allotment("total")]
        seeded = json.dumps({currency: str(units) for currency, units in (seeds or {}).items()})
        fingerprint = hashlib.blake2b(asked, digest_size=16).hexdigest()
        args = [k.allotment(), now_ms(), _limits(limits), seeded, asked, delivery, fingerprint]
        answer = await getattr(self._scripts, script)(keys=keys, args=args)
        if answer[0] == "unseeded":
            raise UnseededBudgets(answer[1:])
        return answer[1]

    async def forget_grants(self, project_id: str, deliveries: Sequence[str]) -> None:
        if deliveries:
            k = ProjectKeys(project_id)
            await self._redis.hdel(k.allotment("deliveries"), *deliveries)
            await self._redis.zrem(k.allotment("deliveries_at"), *deliveries)

    async def release(self, project_id: str, check_id: str, currency: str, units: int) -> bool:
        k = ProjectKeys(project_id)
        keys = [k.allotment("paid"), k.allotment("released")]
        args = [check_id, currency, str(units), now_ms(), RELEASES_KEPT_MS]
        return await self._scripts.release(keys=keys, args=args) == 1

    async def give_back(self, project_id: str, token: str, limits: Limits, tallies: Sequence[Tally]) -> bool:
        k = ProjectKeys(project_id)
        backs = []
        for back in allotment.given_back(tallies, limits):
            field = back.currency if back.user is None else _field(back.side, back.currency, back.user)
            backs += [back.counter, field, str(back.units)]
        keys = [k.allotment("released"), k.allotment("paid"), k.allotment("total")]
        args = [token, now_ms(), RELEASES_KEPT_MS, k.allotment(), *backs]
        return await self._scripts.give_back(keys=keys, args=args) == 1

    async def budgets_paid(self, project_id: str, currencies: Sequence[str]) -> dict[str, int]:
        if not currencies:
            return {}
        found = await self._redis.hmget(ProjectKeys(project_id).allotment("paid"), list(currencies))
        return {currency: int(units) for currency, units in zip(currencies, found, strict=True) if units is not None}

    async def reset_budgets(self, project_id: str, currencies: Sequence[str]) -> None:
        if currencies:
            await self._redis.hdel(ProjectKeys(project_id).allotment("paid"), *currencies)
