"""The WebhookQueue contract (API.md §10): deliveries held once each, leased by endpoint (earliest due first, fairly,
never twice at once, again once a lease ends), settled as attempted, listed newest first, redelivered, forgotten with
their endpoint and swept once old. On SQLite and Redis, and with `-m cluster` on a Redis Cluster.

The queue is shared by every project of the store (a lease takes any project's deliveries): each test's endpoints are
its own and forgotten after it, so no test leases another's."""

import asyncio
import uuid

import pytest

from rewards.domain import webhook_events
from rewards.domain.webhook_events import (
    FAILED,
    LEASE_MS,
    PENDING_DELIVERY,
    RETAIN_MS,
    SUCCEEDED,
    Delivery,
    after_attempt,
    new_delivery,
)
from rewards.ports import WebhookQueue
from tests.contract.support import CLUSTER, assert_implements

T0 = 1_900_000_000_000  # the tests' clock (ms); every delivery is due from here on
FAR = 10**15  # a lease's `now` past every delivery's due time


def test_has_the_port(store: WebhookQueue):
    assert_implements(type(store), WebhookQueue)


@pytest.fixture
async def endpoints(store: WebhookQueue, pid: str):
    """New endpoint ids (of `pid`, or of the project given), forgotten after the test."""
    made: list[tuple[str, str]] = []

    def new(project_id: str = pid) -> str:
        made.append((project_id, f"wh_{uuid.uuid4().hex[:16]}"))
        return made[-1][1]

    yield new
    for project_id, endpoint_id in made:
        await store.forget_endpoint(project_id, endpoint_id)


def delivery(pid: str, endpoint_id: str, n: int, at: int = T0) -> Delivery:
    return new_delivery(pid, endpoint_id, "reward.earned", f"conversion:e-{n}:0", f'{{"n":{n}}}'.encode(), at)


def ids(deliveries) -> list[str]:
    return [d.id for d in deliveries]


def mine(deliveries, *endpoint_ids: str) -> list[Delivery]:
    return [d for d in deliveries if d.endpoint_id in endpoint_ids]


async def lease(store: WebhookQueue, now: int = FAR, limit: int = 100, per_endpoint: int = 100, busy=None):
    return await store.lease(now, limit, per_endpoint, busy or {}, LEASE_MS)


async def test_enqueue_holds_each_delivery_once_whatever_its_state(store: WebhookQueue, pid: str, endpoints):
    e = endpoints()
    a, b, c = (delivery(pid, e, n) for n in range(3))
    pending = await store.pending_deliveries()
    assert await store.enqueue([a, b, a]) == 2
    assert await store.enqueue([a, b, c]) == 1  # the log read again after a crash
    assert await store.pending_deliveries() == pending + 3
    [first, *_] = await lease(store, limit=1)
    await store.settle([after_attempt(first, True, 200, None, T0)], T0)
    assert await store.enqueue([a, b, c]) == 0  # finished: not made pending again
    assert (await store.get_delivery(pid, e, first.id)).status == SUCCEEDED
    assert await store.pending_deliveries() == pending + 2
    assert await store.enqueue([]) == 0


async def test_lease_takes_what_is_due_earliest_first_within_limit_and_room(store: WebhookQueue, pid: str, endpoints):
    e = endpoints()
    due = [delivery(pid, e, n, at=T0 + 1000 * n) for n in range(5)]
    await store.enqueue(list(reversed(due)))
    assert await lease(store, now=T0 - 1) == []
    leased = await lease(store, now=T0 + 1000)
    assert ids(leased) == ids(due[:2]) and {d.next_attempt_ms for d in leased} == {T0 + 1000 + LEASE_MS}
    assert {d.status for d in leased} == {PENDING_DELIVERY} and leased[0].body == due[0].body
    now = T0 + 10_000
    assert ids(await lease(store, now=now, limit=1)) == ids(due[2:3])  # the limit
    assert await lease(store, now=now, per_endpoint=5, busy={e: 5}) == []  # no room: 5 in flight already
    assert ids(await lease(store, now=now, per_endpoint=5, busy={e: 4})) == ids(due[3:4])
    assert ids(await lease(store, now=now)) == ids(due[4:])


async def test_a_long_backlog_leaves_room_for_other_endpoints(store: WebhookQueue, pid: str, endpoints):
    backlog, other, third = endpoints(), endpoints(), endpoints()
    await store.enqueue([delivery(pid, backlog, n, at=T0 + n) for n in range(1000)])
    await store.enqueue([delivery(pid, other, 0, at=T0 + 5000), delivery(pid, third, 0, at=T0 + 6000)])
    leased = await lease(store, limit=10, per_endpoint=1000)
    assert [d.endpoint_id for d in leased] == [backlog] * 8 + [other, third]  # earliest due endpoint first
    assert [d.created_ms for d in leased[:8]] == [T0 + n for n in range(8)]
    leased = await lease(store, limit=100, per_endpoint=10)
    assert len(mine(leased, backlog)) == 10  # at most per_endpoint of one endpoint


async def test_a_lease_ends_and_the_delivery_is_leased_again(store: WebhookQueue, pid: str, endpoints):
    e = endpoints()
    await store.enqueue([delivery(pid, e, 1)])
    [leased] = await lease(store, now=T0)
    assert leased.next_attempt_ms == T0 + LEASE_MS
    assert (await store.get_delivery(pid, e, leased.id)).next_attempt_ms == T0 + LEASE_MS
    assert await lease(store, now=T0 + LEASE_MS - 1) == []  # its dispatcher may still be sending it
    [again] = await lease(store, now=T0 + LEASE_MS)  # that dispatcher died: tried again
    assert again.id == leased.id and again.next_attempt_ms == T0 + 2 * LEASE_MS and again.attempts == 0


async def test_two_leasers_at_once_never_take_the_same_delivery(store: WebhookQueue, pid: str, endpoints):
    made = [endpoints() for _ in range(5)]
    await store.enqueue([delivery(pid, e, n, at=T0 + n) for e in made for n in range(12)])
    first, second = await asyncio.gather(*(lease(store, limit=40, per_endpoint=10) for _ in range(2)))
    assert set(ids(first)) & set(ids(second)) == set() and len(first) + len(second) == 60
    assert max(len(mine(leased, e)) for leased in (first, second) for e in made) <= 10
    assert await lease(store, now=FAR + LEASE_MS - 1) == []
    assert len(await lease(store, now=FAR + LEASE_MS)) == 60  # the two's leases ended: all of them again


async def test_settle_records_each_attempt_and_when_its_endpoint_began_failing(store: WebhookQueue, pid, endpoints):
    e, other = endpoints(), endpoints()
    await store.enqueue([delivery(pid, e, n) for n in range(3)] + [delivery(pid, other, 9)])
    a, b, c, d = sorted(await lease(store, now=T0), key=lambda x: (x.endpoint_id != e, x.id))
    t1 = T0 + 1000
    settled = [after_attempt(a, True, 200, None, t1), after_attempt(b, False, 500, None, t1),
               after_attempt(c, False, 410, None, t1), after_attempt(d, True, 200, None, t1)]  # fmt: skip
    assert await store.settle(settled, t1) == {e: t1, other: None}  # e: its last attempts failed
    got = [await store.get_delivery(pid, x.endpoint_id, x.id) for x in (a, b, c)]
    assert [x.status for x in got] == [SUCCEEDED, PENDING_DELIVERY, FAILED]
    assert [x.attempts for x in got] == [1, 1, 1] and got[1].next_attempt_ms == t1 + 5000
    assert got[2].last_status_code == 410 and got[0].next_attempt_ms is None and got[2].next_attempt_ms is None
    assert await lease(store, now=t1 + 4999) == []
    [retried] = await lease(store, now=t1 + 5000)
    assert retried.id == b.id and retried.attempts == 1

    t2 = t1 + 10_000
    assert await store.settle([after_attempt(retried, False, 503, None, t2)], t2) == {e: t1}  # kept across calls
    [retried] = await lease(store, now=t2 + 30_000)
    t3 = t2 + 40_000
    assert await store.settle([after_attempt(retried, True, 204, None, t3)], t3) == {e: None}  # a success clears it
    await store.enqueue([delivery(pid, e, 5, at=t3)])
    [fresh] = await lease(store, now=t3)
    t4 = t3 + 1000
    assert await store.settle([after_attempt(fresh, False, None, "timed out", t4)], t4) == {e: t4}  # a new run
    assert (await store.get_delivery(pid, e, fresh.id)).last_error == "timed out"
    assert await store.settle([], t4) == {}


async def test_list_is_newest_first_paged_by_offset_with_the_total(store: WebhookQueue, pid: str, endpoints):
    e = endpoints()
    made = [delivery(pid, e, n, at=T0 + 1000 * (n // 3)) for n in range(8)]  # three at each time: ordered by id
    await store.enqueue(made)
    newest_first = sorted(made, key=lambda d: (d.created_ms, d.id), reverse=True)
    pages = [await store.list_deliveries(pid, e, offset, 3) for offset in (0, 3, 6, 9)]
    assert [total for _, total in pages] == [8, 8, 8, 8]
    assert [len(page) for page, _ in pages] == [3, 3, 2, 0]
    assert [i for page, _ in pages for i in ids(page)] == ids(newest_first)
    assert await store.list_deliveries(pid, e, 7, 100) == ([newest_first[7]], 8)
    assert (await store.list_deliveries(pid, e, 0, 100))[0][0] == newest_first[0]
    assert await store.list_deliveries(pid, endpoints(), 0, 10) == ([], 0)


async def test_get_and_redeliver(store: WebhookQueue, pid: str, endpoints):
    e = endpoints()
    made = delivery(pid, e, 1)
    await store.enqueue([made])
    assert await store.get_delivery(pid, e, made.id) == made
    assert await store.get_delivery(pid, endpoints(), made.id) is None  # another endpoint's id
    assert await store.get_delivery(pid, e, "msg_unknown") is None
    [leased] = await lease(store, now=T0)
    failed = after_attempt(leased, False, 410, None, T0 + 1)
    await store.settle([failed], T0 + 1)
    now = T0 + 86_400_000
    again = await store.redeliver(pid, e, made.id, now)
    assert (again.id, again.status, again.next_attempt_ms, again.window_ms) == (made.id, PENDING_DELIVERY, now, now)
    assert again.attempts == 1 and again.last_status_code == 410  # its history kept
    assert await store.get_delivery(pid, e, made.id) == again
    assert ids(await lease(store, now=now)) == [made.id]
    assert await store.redeliver(pid, e, "msg_unknown", now) is None


async def test_forget_endpoint_lets_all_of_it_go(store: WebhookQueue, pid: str, endpoints):
    e, kept = endpoints(), endpoints()
    await store.enqueue([delivery(pid, e, n) for n in range(3)] + [delivery(pid, kept, 1)])
    pending = await store.pending_deliveries()
    leased = mine(await lease(store, now=T0), e)
    assert await store.settle([after_attempt(leased[0], False, 500, None, T0)], T0) == {e: T0}
    await store.forget_endpoint(pid, e)
    assert await store.list_deliveries(pid, e, 0, 10) == ([], 0)
    assert await store.get_delivery(pid, e, leased[0].id) is None
    assert await store.pending_deliveries() == pending - 3
    assert mine(await lease(store), e) == []
    late = after_attempt(leased[1], False, 500, None, T0 + 1)  # an attempt in flight when it was deleted
    assert await store.settle([late], T0 + 1) == {e: None}  # neither the delivery nor its failing made again
    assert await store.get_delivery(pid, e, late.id) is None and await store.enqueue([delivery(pid, e, 7)]) == 1
    assert len((await store.list_deliveries(pid, kept, 0, 10))[0]) == 1
    await store.forget_endpoint(pid, "wh_never")


async def test_sweep_lets_old_finished_deliveries_go_not_pending_ones(store: WebhookQueue, pid: str, endpoints):
    e = endpoints()
    old_done, old_pending, young_done = delivery(pid, e, 1), delivery(pid, e, 2), delivery(pid, e, 3, at=T0 + 5000)
    await store.enqueue([old_done, old_pending, young_done])
    leased = {d.id: d for d in await lease(store, now=T0 + 5000)}
    attempted = [after_attempt(leased[d.id], True, 200, None, T0 + 5000) for d in (old_done, young_done)]
    await store.settle([*attempted, after_attempt(leased[old_pending.id], False, 500, None, T0 + 5000)], T0 + 5000)
    assert await store.sweep_deliveries(T0 + RETAIN_MS) == 0  # (created exactly RETAIN_MS ago: kept)
    assert await store.sweep_deliveries(T0 + RETAIN_MS + 1) == 1
    listed, total = await store.list_deliveries(pid, e, 0, 10)
    assert set(ids(listed)) == {old_pending.id, young_done.id} and total == 2
    assert await store.sweep_deliveries(T0 + RETAIN_MS + 1) == 0
    assert ids(await lease(store)) == [old_pending.id]  # the sweep did not hide it


async def test_an_endpoint_keeps_its_newest_finished_deliveries(store: WebhookQueue, pid, endpoints, monkeypatch):
    monkeypatch.setattr(webhook_events, "RETAIN_PER_ENDPOINT", 3)
    e = endpoints()
    made = [delivery(pid, e, n, at=T0 + n) for n in range(7)]
    await store.enqueue(made)
    leased = await lease(store, now=T0 + 10)
    assert ids(leased) == ids(made)
    settled = [after_attempt(d, d.created_ms != T0, 200 if d.created_ms != T0 else 500, None, T0 + 20) for d in leased]
    await store.settle(settled[:4], T0 + 20)
    await store.settle(settled[4:], T0 + 20)
    listed, total = await store.list_deliveries(pid, e, 0, 10)
    assert total == 4 and ids(listed) == [*ids(reversed(made[4:])), made[0].id]  # the oldest, pending, is never let go
    assert listed[-1].status == PENDING_DELIVERY


async def test_projects_see_only_their_own(store: WebhookQueue, pid: str, other_pid: str, endpoints):
    theirs = endpoints(other_pid)
    made = delivery(other_pid, theirs, 1)
    await store.enqueue([made])
    assert await store.list_deliveries(pid, theirs, 0, 10) == ([], 0)
    assert await store.get_delivery(pid, theirs, made.id) is None
    assert await store.redeliver(pid, theirs, made.id, T0) is None
    await store.forget_endpoint(pid, theirs)
    assert await store.get_delivery(other_pid, theirs, made.id) == made
    [leased] = mine(await lease(store), theirs)
    assert (leased.project_id, leased.endpoint_id) == (other_pid, theirs)


@pytest.mark.parametrize("store", ["redis", CLUSTER], indirect=True)
async def test_on_redis_a_late_answer_never_hides_a_due_delivery(store, pid: str, endpoints):
    """The Redis adapter's global index of endpoints (its own slot) applies an endpoint's state only if newer than the
    one it holds: the answer of a lease read before an enqueue, arriving after it, leaves the new delivery due."""
    e = endpoints()
    await store.enqueue([delivery(pid, e, 1)])
    await lease(store, now=T0)
    _, late = await store._lease(pid, e, 1, T0, T0 + LEASE_MS)  # its endpoint's earliest due: the lease's end
    fresh = delivery(pid, e, 2)
    await store.enqueue([fresh])
    await store._index([late])
    assert ids(await lease(store, now=T0)) == [fresh.id]
