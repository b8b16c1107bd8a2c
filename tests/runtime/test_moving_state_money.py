"""runtime.moving.state_money: an embedded state store's caps and budgets, reversals and debts, held payouts and
webhooks, filled through its ports, copied into Redis; the Redis store then answers every read as the SQLite store
does, and the next writes alike (caps reached to the unit, a released check, a kept call, a reversal's share, a
webhook lease); its keys are those the Redis store writes itself, with the same times to live."""

import uuid
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from rewards.adapters.embedded.sqlite_db import SqliteDatabase
from rewards.adapters.embedded.sqlite_state import SqliteStateStore
from rewards.adapters.production.redis_client import open_redis
from rewards.adapters.production.redis_keys import ProjectKeys, webhook_endpoints, webhook_ready
from rewards.adapters.production.redis_state import RedisStateStore, open_redis_state
from rewards.domain import allotment, sealing
from rewards.domain import claim_checks as cc
from rewards.domain.allotment import DAY_MS, KEPT_MS, Ask, CapRule, Grant, Limits, Tally
from rewards.domain.approvals import APPROVED, NotPending
from rewards.domain.integrity import Rejection
from rewards.domain.reversals import Owed, PastWhole, Reversal, TakeBack
from rewards.domain.timestamps import now_ms
from rewards.domain.webhook_events import LEASE_MS, RETAIN_MS, after_attempt, new_delivery
from rewards.domain.webhooks import Endpoint
from rewards.settings import Settings
from runtime.moving import MoveRefused, state_money
from runtime.moving.state import Moving, check_sealed, check_target, copy_state, open_source
from schemas.records import load_records
from tests.contract.support import check, redis_url, user  # noqa: F401 (redis_url: a fixture)

D = Decimal
P, TOKEN = "pünkt", "0x" + "ab" * 20  # a currency longer in bytes than in characters, and one with a budget
END, REF, WALLET = ("end_user",), ("referrer",), ("end_user", "referrer")
CAPS = (CapRule(END, 100, "all_time"), CapRule(WALLET, 120, "calendar_month"), CapRule(REF, 40, "rolling", DAY_MS))
LIMITS = Limits(budgets={TOKEN: 1000}, caps={P: CAPS})
CAP, BUDGET = Rejection.CAP_EXCEEDED, Rejection.BUDGET_EXHAUSTED
ALICE, BOB, CAROL, DAVE = (user(n) for n in range(1, 5))
USDC = check("p", 1, BOB).currency.address.lower()


def ask(n: int, who, side: str, units: int, currency: str = P, at: int | None = None) -> Ask:
    return Ask(f"conversion:e{n}:0", who, side, currency, units, at if at is not None else now_ms() - 3_000)


def held(n: int) -> dict:
    return {"project_id": "p", "payout_id": f"conversion:e-{n}:0", "amount": str(10 * n), "status": "pending"}


def endpoint(endpoint_id: str, n: int, sealed: str = "plain:00") -> Endpoint:
    return Endpoint(endpoint_id, f"https://93.184.216.34/{n}", ("reward.earned",), None, True, sealed, 1000 + n)


async def fill(store, pid: str, endpoints: tuple[str, str], t0: int) -> dict:
    """The scenario, through the ports of `store`; what it answered."""
    answers = {"d1": await store.allot(pid, "d1", LIMITS, D1, seeds={TOKEN: 0})}
    tallies = [Tally(CAROL, "referrer", P), Tally(BOB, "referrer", P)]
    tallies[0].add(10, t0 - 5_000)
    tallies[0].add(20, t0 - 4_000)
    tallies[1].add(30, t0 - 4_000)
    answers["d2"] = await store.allot_tallies(pid, "d2", LIMITS, tallies)
    assert await store.release(pid, "check-1", TOKEN, 100)
    await store.allot(pid, "d-forgotten", LIMITS, [ask(9, DAVE, "end_user", 1)])
    await store.forget_grants(pid, ["d-forgotten"])
    await fill_reversals(store, pid, answers)
    await store.hold_payouts(pid, [held(1), held(2)])
    async with store.decide_payouts(pid, [held(2)["payout_id"]], APPROVED, "ok", 1):
        pass
    await fill_webhooks(store, pid, endpoints, t0)
    return answers


# alice: 70 of her all-time 100; bob: 90 of his month's 120 (60 here, 30 as a referrer in d2); carol: 35 of a day's
# 40 as a referrer (30 in d2, 5 here); the budget: 300 paid, then 100 released.
D1 = [
    ask(1, ALICE, "end_user", 70),
    ask(2, BOB, "end_user", 60),
    ask(3, CAROL, "referrer", 5),
    ask(4, ALICE, "end_user", 300, TOKEN),
]


async def fill_reversals(store, pid: str, answers: dict) -> None:
    async with store.reverse(pid, [Reversal("e-1", "refund", D("0.25")), Reversal("e-2", "x", D("0.5"))], 1):
        pass
    await store.mark_reversed(pid, {"e-1": D("0.25")})
    opened, closed = check(pid, 1, BOB), check(pid, 2, BOB)
    await store.register_claim_checks(pid, [opened, closed])
    async with store.update_claim_checks(pid, [closed.id], cc.close, BOB):
        pass
    items = [TakeBack(opened.id, BOB, USDC, 1_500_000), TakeBack(closed.id, BOB, USDC, 5)]
    answers["take_back"] = await store.take_back(pid, "t1:take_back", items)
    answers["settle"] = await store.settle_debts(pid, "t2:settle", [Owed(BOB, USDC, 200_000)])


def delivery(pid: str, endpoint_id: str, n: int, at: int):
    return new_delivery(pid, endpoint_id, "reward.earned", f"conversion:e-{n}:0", f'{{"n":{n}}}'.encode(), at)


async def fill_webhooks(store, pid: str, endpoints: tuple[str, str], t0: int) -> None:
    """Endpoint a: one delivery succeeded, one pending after a failed attempt, one pending never tried (enqueued
    last); endpoint b: one failed for good (its endpoint failing since), one succeeded past RETAIN_MS."""
    a, b = endpoints
    await store.create_webhook(pid, endpoint(a, 1))
    await store.create_webhook(pid, endpoint(b, 2))
    attempted = [delivery(pid, a, 1, t0 - 50_000), delivery(pid, a, 2, t0 - 40_000), delivery(pid, b, 3, t0 - 30_000),
                 delivery(pid, b, 4, t0 - RETAIN_MS - 60_000)]  # fmt: skip
    await store.enqueue(attempted)
    leased = {d.id: d for d in await store.lease(t0, 100, 100, {}, LEASE_MS) if d.project_id == pid}
    ok, failed, gone, old = (leased[d.id] for d in attempted)
    tried = [(ok, True, 200), (failed, False, 500), (old, True, 200), (gone, False, 410)]
    await store.settle([after_attempt(d, success, code, None, t0) for d, success, code in tried], t0)
    await store.enqueue([delivery(pid, a, 0, t0 - 60_000)])


def sqlite_store(path: Path) -> SqliteStateStore:
    return SqliteStateStore(SqliteDatabase(path))


async def move(path: Path, url: str) -> dict[str, int]:
    redis = await open_redis(url, decode_responses=True)
    try:
        return await copy_state(path, redis, Settings())
    finally:
        await redis.aclose()


async def copy_money(path: Path, url: str, settings: Settings) -> dict[str, int]:
    """runtime.moving.state.copy_state with this module's copies alone (its own refusals seen apart)."""
    source = await open_source(path)
    redis = await open_redis(url, settings, decode_responses=True)
    try:
        moving = Moving(source, redis, now_ms(), settings)
        check_sealed(moving)
        await check_target(moving)
        return {"+".join(c.tables): await c.copy(moving) for c in state_money.COPIES}
    finally:
        source.close()
        await redis.aclose()


@dataclass
class Moved:
    sqlite: SqliteStateStore
    redis: RedisStateStore
    pid: str
    endpoints: tuple[str, str]
    t0: int  # the scenario's time
    answers: dict  # what the SQLite store answered in it

    def both(self):
        return self.sqlite, self.redis


@pytest.fixture(params=["redis", pytest.param("redis_cluster", marks=pytest.mark.cluster)])
def url(request) -> str:
    """The Redis moved into: one node, and with `-m cluster` a Redis Cluster."""
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
async def moved(tmp_path: Path, url: str):
    """A SQLite store filled (a project of its own), moved into the session's Redis; both stores open."""
    path, t0 = tmp_path / "state.sqlite3", now_ms()
    store = sqlite_store(path)
    pid = await store.create_project("money")
    endpoints = (f"wh_{uuid.uuid4().hex[:16]}", f"wh_{uuid.uuid4().hex[:16]}")
    answers = await fill(store, pid, endpoints, t0)
    await store.close()
    copied = await move(path, url)
    assert copied["webhook_deliveries+webhook_queued"] == 4  # (not the one past RETAIN_MS)
    sqlite, redis = sqlite_store(path), await open_redis_state(url)
    yield Moved(sqlite, redis, pid, endpoints, t0, answers)
    for endpoint_id in endpoints:
        await redis.forget_endpoint(pid, endpoint_id)  # (the lease reads every project's: none is left to the next)
    await sqlite.close()
    await redis.close()


# -- reads ----------------------------------------------------------------------------------------------------------


async def test_every_read_answers_the_same(moved: Moved):
    pid, (a, b) = moved.pid, moved.endpoints
    await moved.sqlite.sweep_deliveries(now_ms())  # (the finished delivery past RETAIN_MS, not copied)
    for read in (
        lambda s: s.budgets_paid(pid, [TOKEN, P]),
        lambda s: s.reversed_shares(pid, ["e-1", "e-2", "e-3"]),
        lambda s: s.list_webhooks(pid),
        lambda s: s.get_webhook(pid, b),
        lambda s: s.list_deliveries(pid, a, 0, 100),
        lambda s: s.list_deliveries(pid, b, 0, 100),
        lambda s: s.list_deliveries(pid, a, 1, 1),
    ):
        assert await read(moved.sqlite) == await read(moved.redis)
    assert await moved.redis.budgets_paid(pid, [TOKEN]) == {TOKEN: 200}
    assert [e.id for e in await moved.redis.list_webhooks(pid)] == [a, b]
    listed, total = await moved.redis.list_deliveries(pid, a, 0, 100)
    assert total == 3 and [d.status for d in listed] == ["pending", "succeeded", "pending"]
    for d in listed:
        assert await moved.redis.get_delivery(pid, a, d.id) == await moved.sqlite.get_delivery(pid, a, d.id) == d


# -- the next writes ------------------------------------------------------------------------------------------------


async def test_caps_and_budgets_are_reached_to_the_unit_on_both(moved: Moved):
    asks = [
        ask(11, ALICE, "end_user", 30), ask(12, ALICE, "end_user", 1),  # all-time: 70 + 30 of 100
        ask(13, BOB, "end_user", 30), ask(14, BOB, "end_user", 1),  # the month: 90 + 30 of 120
        ask(15, CAROL, "referrer", 5), ask(16, CAROL, "referrer", 1),  # rolling: 35 + 5 of 40
        ask(17, DAVE, "end_user", 800, TOKEN), ask(18, DAVE, "end_user", 1, TOKEN),  # the budget: 200 + 800 of 1000
    ]  # fmt: skip
    expected = [Grant(30, None), Grant(0, CAP), Grant(30, None), Grant(0, CAP), Grant(5, None), Grant(0, CAP),
                Grant(800, None), Grant(0, BUDGET)]  # fmt: skip
    for store in moved.both():
        assert await store.allot(moved.pid, "d3", LIMITS, asks) == expected
        assert await store.budgets_paid(moved.pid, [TOKEN]) == {TOKEN: 1000}
    # the same for a tally, decided whole or one by one
    for store in moved.both():
        tally = Tally(CAROL, "referrer", P)
        tally.add(1, now_ms() - 1_000)
        assert await store.allot_tallies(moved.pid, "d4", LIMITS, [tally]) == ["1"]


async def test_a_released_check_and_a_kept_call_are_not_made_again(moved: Moved):
    pid = moved.pid
    for store in moved.both():
        assert await store.release(pid, "check-1", TOKEN, 100) is False
        assert await store.release(pid, "check-2", TOKEN, 50) is True
        assert await store.budgets_paid(pid, [TOKEN]) == {TOKEN: 150}
        assert await store.take_back(pid, "t1:take_back", []) == moved.answers["take_back"]
        assert await store.settle_debts(pid, "t2:settle", [Owed(BOB, USDC, 1)]) == moved.answers["settle"]


async def test_debts_settle_the_same(moved: Moved):
    # 500,005 owed (1,000,000 of 1,500,000 came out of the open check, none of the closed one's 5), 200,000 settled:
    # 300,005 left
    assert moved.answers["settle"] == [200_000]
    for store in moved.both():
        asks = [Owed(BOB, USDC, 250_000), Owed(BOB, USDC, 250_000), Owed(ALICE, USDC, 7)]
        assert await store.settle_debts(moved.pid, "t3:settle", asks) == [250_000, 50_005, 0]


async def test_the_next_reversal_gets_the_same_share(moved: Moved):
    pid = moved.pid
    for store in moved.both():
        async with store.reverse(pid, [Reversal("e-1", "refund", D("0.250"))], 2) as repeat:
            assert repeat.value == 0  # a reversal seen before
        async with store.reverse(pid, [Reversal("e-1", "chargeback", D("0.5"))], 2) as change:
            [record] = load_records(change.payload)
        assert (record.reversed_before, record.reversed_after) == ("0.25", "0.75")
        with pytest.raises(PastWhole):
            async with store.reverse(pid, [Reversal("e-2", "more", D("0.5000001"))], 2):
                pass
        await store.mark_reversed(pid, {"e-1": D("0.1")})  # a late mark: the share never goes down
        assert await store.reversed_shares(pid, ["e-1"]) == {"e-1": D("0.25")}


async def test_held_payouts_are_decided_once_on_both(moved: Moved):
    pid, one, two = moved.pid, held(1)["payout_id"], held(2)["payout_id"]
    for store in moved.both():
        await store.hold_payouts(pid, [held(2), {**held(1), "amount": "999"}])  # decided, held: left as they are
        with pytest.raises(NotPending):
            async with store.decide_payouts(pid, [two], APPROVED, None, 3):
                pass
        async with store.decide_payouts(pid, [one], APPROVED, "later", 3) as change:
            [record] = load_records(change.payload)
        assert record.payout == held(1)


async def test_a_webhook_lease_takes_the_same_delivery_and_settles_alike(moved: Moved):
    pid, (a, b) = moved.pid, moved.endpoints
    now = moved.t0 + 1_000  # (the delivery tried and failed at t0 is due again at t0 + 5 s)
    leased = []
    for store in moved.both():
        leased.append([d for d in await store.lease(now, 100, 100, {}, LEASE_MS) if d.project_id == pid])
    assert leased[0] == leased[1] and [d.endpoint_id for d in leased[0]] == [a]
    failing = []
    for store in moved.both():
        failing.append(await store.settle([after_attempt(leased[0][0], False, 500, None, now)], now))
        again = delivery(pid, b, 3, moved.t0 - 30_000)  # failed for good: held, never enqueued again
        assert await store.enqueue([again]) == 0
    assert failing[0] == failing[1] == {a: moved.t0}  # the copied failing-since, kept
    # the index the next lease reads: the endpoint's earliest due, applied over the copied state (its version)
    listed, _ = await moved.sqlite.list_deliveries(pid, a, 0, 100)
    due = min(d.next_attempt_ms for d in listed if d.status == "pending")
    assert await moved.redis._redis.zscore(webhook_ready(), f"{pid}\x1f{a}") == due
    assert await moved.sqlite.list_deliveries(pid, a, 0, 100) == await moved.redis.list_deliveries(pid, a, 0, 100)
    for store in moved.both():  # endpoint b's failing-since, copied, is kept by its next failure
        redelivered = await store.redeliver(pid, b, delivery(pid, b, 3, 0).id, now)
        [taken] = [d for d in await store.lease(now, 100, 100, {}, LEASE_MS) if d.project_id == pid]
        assert taken.id == redelivered.id
        failing.append(await store.settle([after_attempt(taken, False, 500, None, now + 1)], now + 1))
    assert failing[2] == failing[3] == {b: moved.t0}


# -- the keys -------------------------------------------------------------------------------------------------------


async def test_the_keys_and_their_times_to_live_are_the_redis_stores(moved: Moved, url: str):
    """The same scenario run on the Redis store itself writes the same keys, of the same types, each with a time to
    live where the copy's has one, ending at the same time (to the scenario's few seconds)."""
    redis = await open_redis(url, decode_responses=True)
    copied = await layout(redis, moved.pid)  # (before the scenario's lease, which reads every project's deliveries)
    native = await moved.redis.create_project("native")
    await fill(moved.redis, native, moved.endpoints, moved.t0)
    try:
        made = await layout(redis, native)
        assert {key: kind for key, (kind, _) in made.items()} == {key: kind for key, (kind, _) in copied.items()}
        for key, (_, expires) in copied.items():
            assert (expires == -1) == (made[key][1] == -1), key
            assert abs(expires - made[key][1]) < 60_000, key
        month = allotment.calendar_month(moved.t0 - 3_000)
        assert copied[f"al:month:{month}"][1] == allotment.month_end_of(month) + KEPT_MS
        assert copied["held_payout:conversion:e-2:0"][1] > now_ms() + KEPT_MS - 60_000
        for endpoint_id in moved.endpoints:  # the global index: the endpoint holding deliveries, pending ones or not
            members = [f"{project_id}\x1f{endpoint_id}" for project_id in (moved.pid, native)]
            pending = [(await redis.hget(webhook_endpoints(), m)).split(":")[1] for m in members]
            ready = [await redis.zscore(webhook_ready(), m) is not None for m in members]
            assert pending[0] == pending[1] and ready[0] == ready[1] == (endpoint_id == moved.endpoints[0])
    finally:
        for endpoint_id in moved.endpoints:
            await moved.redis.forget_endpoint(native, endpoint_id)
        await redis.aclose()


async def layout(redis, pid: str) -> dict[str, tuple[str, int]]:
    """The project's keys (past its prefix) → (type, when it expires in ms, -1: never)."""
    prefix = ProjectKeys(pid).project().removesuffix("project")
    found = {}
    async for key in redis.scan_iter(match=prefix + "*"):
        name = key.removeprefix(prefix)
        # (the other half's; the outbox, drained; each delivery's grants, never asked again: state.NOT_COPIED)
        if not name.startswith(("project", "claim_check:", "outbox", "al:deliveries")):
            found[name] = (await redis.type(key), await redis.pexpiretime(key))
    return found


# -- sealed secrets -------------------------------------------------------------------------------------------------


async def test_secrets_sealed_by_a_key_production_lacks_are_refused(tmp_path: Path, redis_url):  # noqa: F811
    key = Fernet.generate_key().decode()
    path = tmp_path / "state.sqlite3"
    store = sqlite_store(path)
    pid = await store.create_project("sealed")
    endpoint_id = f"wh_{uuid.uuid4().hex[:16]}"
    await store.create_webhook(pid, endpoint(endpoint_id, 1, sealing.seal(b"whsec_x", [key])))
    await store.close()
    with pytest.raises(MoveRefused, match=endpoint_id):
        await copy_money(path, redis_url, Settings())
    with pytest.raises(MoveRefused, match="REWARDS_SECRETS_KEY"):
        await copy_money(path, redis_url, Settings(secrets_key=Fernet.generate_key().decode()))
    await copy_money(path, redis_url, Settings(secrets_key=f"{Fernet.generate_key().decode()},{key}"))
    redis = await open_redis_state(redis_url)
    try:
        [copied] = await redis.list_webhooks(pid)
        assert sealing.unseal(copied.sealed_secret, [key]) == b"whsec_x"
    finally:
        await redis.close()
