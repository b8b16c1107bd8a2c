"""WebhookQueue on Redis (API.md §10), on one node or a Cluster: each project's deliveries in its own slot (a hash of
documents; per endpoint a zset of the pending ones by due time, a log of all of them for listing, and the finished
ones by age; the failing-since of its endpoints), and a global index of endpoints in a slot of its own,
`{webhooks}` (rewards.adapters.production.redis_keys).

A script may keep to one slot only, so each change is two: the project's script, which answers the state of each
endpoint it touched (its earliest due, its pending and held deliveries) with the project's version (incremented by
every change); then webhook_index, which applies each state unless a newer one of the endpoint was applied already
(two processes' answers may arrive out of order: an older one never puts back a due time a later change moved, nor
hides a due delivery). A lease reads the index for the endpoints due, then leases each in its project's script.

A process that dies between the two leaves the index behind: a due time too early is corrected by the next lease of
the endpoint, one too late by the next change of the endpoint or by the sweep, which reads every endpoint of the index
(O(endpoints)) and applies its state; an endpoint's first deliveries are indexed again when the dispatcher, restarted,
enqueues them again (the project's script answers the endpoint's state even when it adds nothing)."""

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace

from rewards.adapters.production import redis_keys
from rewards.adapters.production.redis_keys import ProjectKeys
from rewards.adapters.production.redis_state.base import _ATTEMPTS, RedisStateBase, StateChanging, _json
from rewards.domain import webhook_events
from rewards.domain.webhook_events import PENDING_DELIVERY, SUCCEEDED, Delivery, lease_shares

_SEPARATOR = "\x1f"  # between a project id and an endpoint id in the index's members (neither holds it)


class RedisWebhookQueue(RedisStateBase):
    """The production adapter of rewards.ports.WebhookQueue."""

    async def enqueue(self, deliveries: Sequence[Delivery]) -> int:
        async def enqueue(project_id: str, group: list[Delivery]) -> tuple[int, list]:
            k, endpoints = ProjectKeys(project_id), _endpoints_of(group)
            keys = [k.webhook_deliveries(), k.webhook_version(), *_endpoint_keys(k, endpoints, with_done=False)]
            args = [
                arg for d in group
                for arg in (endpoints[d.endpoint_id], d.id, _document(d), d.next_attempt_ms, _log_member(d))
            ]  # fmt: skip
            answer = await self._scripts.webhook_enqueue(keys=keys, args=args)
            return answer[0], _states(project_id, endpoints, answer[1], answer[2:])

        answers = await _each_project([_pending(d) for d in deliveries], enqueue)
        await self._index([state for _, states in answers for state in states])
        return sum(added for added, _ in answers)

    async def lease(
        self, now_ms: int, limit: int, per_endpoint: int, busy: Mapping[str, int], lease_ms: int
    ) -> list[Delivery]:
        """In rounds: the endpoints due (the index, earliest due first) share the limit (lease_shares); those that
        had as many due as their share and room to spare share what the others left, until none is left."""
        if limit <= 0:
            return []
        due = await self._redis.zrangebyscore(redis_keys.webhook_ready(), "-inf", now_ms, 0, limit + len(busy))
        rooms: dict[tuple[str, str], int] = {}
        for endpoint in map(_endpoint, due):
            room = per_endpoint - busy.get(endpoint[1], 0)
            if room > 0 and len(rooms) < limit:
                rooms[endpoint] = room
        taken: dict[tuple[str, str], list[Delivery]] = {endpoint: [] for endpoint in rooms}
        states, left = [], limit
        while left > 0 and rooms:
            shares = {endpoint: share for endpoint, share in lease_shares(rooms, left).items() if share > 0}
            leases = (self._lease(*endpoint, share, now_ms, now_ms + lease_ms) for endpoint, share in shares.items())
            rounds, more = await asyncio.gather(*leases), {}
            for (endpoint, share), (leased, state) in zip(shares.items(), rounds, strict=True):
                taken[endpoint] += leased
                states.append(state)
                left -= len(leased)
                if len(leased) == share and rooms[endpoint] > share:
                    more[endpoint] = rooms[endpoint] - share
            rooms = more
        await self._index(states)
        return [delivery for leased in taken.values() for delivery in leased]

    async def _lease(self, project_id: str, endpoint_id: str, most: int, now_ms: int, until_ms: int):
        k = ProjectKeys(project_id)
        keys = [k.webhook_deliveries(), k.webhook_version(), k.webhook_due(endpoint_id), k.webhook_log(endpoint_id)]
        answer = await self._scripts.webhook_lease(keys=keys, args=[now_ms, most, until_ms])
        leased = [replace(_from_document(document), next_attempt_ms=until_ms) for document in answer[2:]]
        return leased, _state(project_id, endpoint_id, answer[0], answer[1])

    async def settle(self, deliveries: Sequence[Delivery], now_ms: int) -> dict[str, int | None]:
        kept = webhook_events.RETAIN_PER_ENDPOINT

        async def settle(project_id: str, group: list[Delivery]) -> tuple[dict, list]:
            k, endpoints = ProjectKeys(project_id), _endpoints_of(group)
            keys = [k.webhook_deliveries(), k.webhook_version(), k.webhook_failing(), *_endpoint_keys(k, endpoints)]
            args = [now_ms, kept, *endpoints] + [
                arg for d in group
                for arg in (endpoints[d.endpoint_id], d.id, _document(d), _due(d), _log_member(d), d.created_ms,
                            int(d.status == SUCCEEDED))
            ]  # fmt: skip
            answer = await self._scripts.webhook_settle(keys=keys, args=args)
            failing = {e: int(row[3]) if row[3] != "" else None for e, row in zip(endpoints, answer[1:], strict=True)}
            return failing, _states(project_id, endpoints, answer[0], answer[1:])

        answers = await _each_project(list(deliveries), settle)
        await self._index([state for _, states in answers for state in states])
        return {endpoint: since for failing, _ in answers for endpoint, since in failing.items()}

    async def list_deliveries(
        self, project_id: str, endpoint_id: str, offset: int, limit: int
    ) -> tuple[list[Delivery], int]:
        """The page and the count in one script (webhook_page), so they agree."""
        k = ProjectKeys(project_id)
        keys = [k.webhook_deliveries(), k.webhook_due(endpoint_id), k.webhook_log(endpoint_id)]
        answer = await self._scripts.webhook_page(keys=keys, args=[offset, limit])
        page = answer[1:]
        return [_from_document(document, due) for document, due in zip(page[::2], page[1::2], strict=True)], answer[0]

    async def get_delivery(self, project_id: str, endpoint_id: str, delivery_id: str) -> Delivery | None:
        found = await self._get(project_id, endpoint_id, delivery_id)
        return None if found is None else found[0]

    async def _get(self, project_id: str, endpoint_id: str, delivery_id: str) -> tuple[Delivery, str] | None:
        """The delivery and its document as held, if it is the endpoint's."""
        k = ProjectKeys(project_id)
        keys = [k.webhook_deliveries(), k.webhook_due(endpoint_id)]
        found = await self._scripts.webhook_get(keys=keys, args=[delivery_id])
        if not found:
            return None
        delivery = _from_document(*found)
        return (delivery, found[0]) if delivery.endpoint_id == endpoint_id else None

    async def redeliver(self, project_id: str, endpoint_id: str, delivery_id: str, now_ms: int) -> Delivery | None:
        """Read, then written unless its document changed in between (an attempt settled): then read again."""
        k = ProjectKeys(project_id)
        keys = [k.webhook_deliveries(), k.webhook_version(), *_endpoint_keys(k, [endpoint_id])]
        for _ in range(_ATTEMPTS):
            found = await self._get(project_id, endpoint_id, delivery_id)
            if found is None:
                return None
            again = webhook_events.redelivered(found[0], now_ms)
            args = [delivery_id, found[1], _document(again), now_ms, _log_member(again)]
            answer = await self._scripts.webhook_redeliver(keys=keys, args=args)
            if answer[0] == 1:
                await self._index([_state(project_id, endpoint_id, answer[1], answer[2])])
                return again
        raise StateChanging(f"webhook delivery {delivery_id} kept changing")

    async def forget_endpoint(self, project_id: str, endpoint_id: str) -> None:
        k = ProjectKeys(project_id)
        keys = [k.webhook_deliveries(), k.webhook_version(), k.webhook_failing(), *_endpoint_keys(k, [endpoint_id])]
        version = await self._scripts.webhook_forget(keys=keys, args=[endpoint_id])
        await self._index([_state(project_id, endpoint_id, version, ["", 0, 0])])

    async def sweep_deliveries(self, now_ms: int) -> int:
        """Every endpoint of the index swept in its project's script, whose answer the index applies (which corrects
        what a process that died between a project's script and the index's left behind)."""
        cutoff = now_ms - webhook_events.RETAIN_MS

        async def sweep(project_id: str, endpoint_ids: list[str]) -> tuple[int, list]:
            k, endpoints = ProjectKeys(project_id), dict.fromkeys(endpoint_ids)
            keys = [k.webhook_deliveries(), k.webhook_version(), *_endpoint_keys(k, endpoints)]
            answer = await self._scripts.webhook_sweep(keys=keys, args=[cutoff])
            return answer[0], _states(project_id, endpoints, answer[1], answer[2:])

        by_project: dict[str, list[str]] = {}
        for project_id, endpoint_id in map(_endpoint, await self._redis.hkeys(redis_keys.webhook_endpoints())):
            by_project.setdefault(project_id, []).append(endpoint_id)
        answers = await asyncio.gather(*(sweep(project_id, ids) for project_id, ids in by_project.items()))
        await self._index([state for _, states in answers for state in states])
        return sum(swept for swept, _ in answers)

    async def pending_deliveries(self) -> int:
        """The sum of the index's counts (O(endpoints))."""
        applied = await self._redis.hvals(redis_keys.webhook_endpoints())
        return sum(int(state.split(":")[1]) for state in applied)

    async def _index(self, states: list[tuple]) -> None:
        """Apply endpoints' states to the global index, each unless a newer one was (webhook_index)."""
        if states:
            keys = [redis_keys.webhook_ready(), redis_keys.webhook_endpoints()]
            await self._scripts.webhook_index(keys=keys, args=[arg for state in states for arg in state])


async def _each_project(deliveries: list[Delivery], call) -> list:
    """`call(project_id, its deliveries)` for each project among `deliveries` (in their order), at once."""
    by_project: dict[str, list[Delivery]] = {}
    for delivery in deliveries:
        by_project.setdefault(delivery.project_id, []).append(delivery)
    return await asyncio.gather(*(call(project_id, group) for project_id, group in by_project.items()))


def _endpoints_of(deliveries: list[Delivery]) -> dict[str, int]:
    """The endpoints of `deliveries`, each → its index among them (from 1), as the scripts number them."""
    endpoints = dict.fromkeys(delivery.endpoint_id for delivery in deliveries)
    return {endpoint_id: n for n, endpoint_id in enumerate(endpoints, 1)}


def _endpoint_keys(k: ProjectKeys, endpoint_ids, with_done: bool = True) -> list[str]:
    keys = []
    for endpoint_id in endpoint_ids:
        keys += [k.webhook_due(endpoint_id), k.webhook_log(endpoint_id)]
        keys += [k.webhook_done(endpoint_id)] if with_done else []
    return keys


def _states(project_id: str, endpoint_ids, version: int, rows: list) -> list[tuple]:
    return [_state(project_id, e, version, row) for e, row in zip(endpoint_ids, rows, strict=True)]


def _state(project_id: str, endpoint_id: str, version: int, row: list) -> tuple:
    """An endpoint's state as webhook_index takes it: member, version, earliest due, pending, held."""
    return (f"{project_id}{_SEPARATOR}{endpoint_id}", version, *row[:3])


def _endpoint(member: str) -> tuple[str, str]:
    project_id, endpoint_id = member.split(_SEPARATOR, 1)
    return project_id, endpoint_id


def _pending(delivery: Delivery) -> Delivery:
    """A delivery as enqueued: pending, due at its next_attempt_ms (at its creation when it has none)."""
    due = delivery.created_ms if delivery.next_attempt_ms is None else delivery.next_attempt_ms
    return replace(delivery, status=PENDING_DELIVERY, next_attempt_ms=due)


def _due(delivery: Delivery) -> int | str:
    return delivery.next_attempt_ms if delivery.status == PENDING_DELIVERY else ""


def _member(created_ms: int, delivery_id: str) -> str:
    """A delivery's member of its endpoint's log (and of its finished ones): lex order is (created_ms, id) order."""
    return f"{created_ms:015d}:{delivery_id}"


def _log_member(delivery: Delivery) -> str:
    return _member(delivery.created_ms, delivery.id)


def _document(delivery: Delivery) -> str:
    return _json(webhook_events.delivery_to_json(delivery))


def _from_document(document: str, due: str = "") -> Delivery:
    """A held delivery: its next attempt is its due score (a lease changes the score alone)."""
    delivery = webhook_events.delivery_from_json(json.loads(document))
    pending = delivery.status == PENDING_DELIVERY and due != ""
    return replace(delivery, next_attempt_ms=int(float(due)) if pending else None)
