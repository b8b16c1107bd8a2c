"""Races of the Redis state store (issue 16), each driven deterministically on a real Redis: another request's change
lands between two steps of one request, or inside its block (after its change, before its publish succeeds or fails).

SQLite has none of them: its changes serialize (a change waits for the other's transaction, publish included), so
these interleavings live here rather than in the contract (tests/contract/), where both adapters run.

- A code renamed while it is being used, or while its limit is being set: neither fails for a name that stays
  valid (a renamed code's former names still find it), and a use undone after the rename is undone whole.
- A referral removed and the user referred again before the removal's publish failed: the removal stands and
  reaches the log ahead of the new use, which the workers pay (and, the other way round, a use whose referral was
  removed before the use's publish failed stands: the removal is never of a referral the log never had).
- An affiliate code created or renamed, used through its new name, then the creation's or rename's publish failed:
  the change stands, so the name used stays the code's.
"""

from contextlib import asynccontextmanager
from dataclasses import dataclass, fields
from decimal import Decimal
from urllib.parse import urlsplit, urlunsplit

import pytest
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from rewards.adapters.production.outbox_relay import OutboxRelay
from rewards.adapters.production.redis_keys import ProjectKeys
from rewards.adapters.production.redis_scripts import Scripts
from rewards.adapters.production.redis_state import RedisStateStore, open_redis_state
from rewards.domain.payout_config import PayoutConfig
from rewards.domain.referrals import CodeInUse
from rewards.ports import Delivery, LogUnavailable
from rewards.settings import Settings
from runtime.wiring import open_embedded
from schemas.records import load_records
from stream_workers.processor import process_delivery
from tests.contract.support import create_codes, redis_url, user  # noqa: F401 (redis_url: a fixture)

OWN_DB = 11  # this module's database: its relay reads the whole outbox index, which no other test's changes reach
CONFIG = {"default_tier": None, "tiers": [], "conversions": [], "referral_reward": {"referrer": "50", "referred": "10"}}


class Interleaved(Redis):
    """A client of a real Redis node that lets another request's change land right after its `after`-th command
    from now (a pipeline counts as one): `arm(after, change)`."""

    _after = 0
    _change = None

    def arm(self, after: int, change) -> None:
        self._after, self._change = after, change

    async def landed(self) -> bool:
        """Whether the change has landed; if not (the request ended first), it lands now."""
        change, self._change = self._change, None
        if change is not None:
            await change()
        return change is None

    async def _step(self) -> None:
        if self._change is not None:
            self._after -= 1
            if self._after == 0:
                await self.landed()

    async def execute_command(self, *args, **options):
        result = await super().execute_command(*args, **options)
        await self._step()
        return result

    def pipeline(self, transaction: bool = True, shard_hint=None) -> Pipeline:
        return _CountedPipeline(self, transaction, shard_hint)


class _CountedPipeline(Pipeline):
    def __init__(self, client: Interleaved, transaction: bool, shard_hint):
        super().__init__(client.connection_pool, client.response_callbacks, transaction, shard_hint)
        self._client = client

    async def execute(self, raise_on_error: bool = True):
        result = await super().execute(raise_on_error)
        await self._client._step()
        return result


class Log:
    """The event log (EventLog port): keeps the messages of one project, in order."""

    shards = 1  # never spreads conversions

    def __init__(self, project_id: str):
        self.project_id, self.messages = project_id, []

    async def publish(self, project_id: str, message: bytes) -> None:
        if project_id == self.project_id:
            self.messages.append(message)


# -- fixtures ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def own_url(redis_url) -> str:  # noqa: F811
    return urlunsplit(urlsplit(redis_url)._replace(path=f"/{OWN_DB}"))


@pytest.fixture(scope="module")
async def other(own_url) -> RedisStateStore:
    """The store of the other requests (another process's)."""
    store = await open_redis_state(own_url)
    await store._redis.flushdb()
    yield store
    await store.close()


@pytest.fixture(scope="module")
async def racing(own_url, other) -> RedisStateStore:
    """The store of the request under test, whose client lets the other's change land where a test says."""
    client = Interleaved.from_url(own_url, decode_responses=True)
    store = RedisStateStore(client)
    for script in fields(Scripts):  # loaded: no first call goes NOSCRIPT and sends a command more
        await client.script_load(getattr(store._scripts, script.name).script)
    yield store
    await store.close()


@pytest.fixture
async def pid(other) -> str:
    project_id = await other.create_project("races")
    await other.put_config(project_id, PayoutConfig.model_validate(CONFIG))
    return project_id


@pytest.fixture(scope="module")
async def warehouse(tmp_path_factory):
    """The embedded warehouse (chdb), which the workers' processor writes with the Redis store's state."""
    backends = await open_embedded(Settings(data_dir=tmp_path_factory.mktemp("races")))
    yield backends.warehouse
    await backends.close()


# -- helpers -----------------------------------------------------------------------------------------------------


async def affiliate_code(store, pid: str, owner, code: str):
    async with store.create_affiliate_code(pid, owner, code, None, {}) as created:
        return created.value


async def rename(store, pid: str, owner, code: str) -> None:
    async with store.rename_affiliate_code(pid, owner, code, {}):
        pass


async def use(store, pid: str, code: str, n: int, log: Log | None = None) -> None:
    async with store.use_code(pid, code, user(n), {}) as used:
        if log is not None:
            await log.publish(pid, used.payload)


@dataclass
class Answer:
    status: int = 200


@asynccontextmanager
async def answered():
    """What the request's HTTP answer would be: 503 when the block's LogUnavailable goes out, else 200."""
    answer = Answer()
    try:
        yield answer
    except LogUnavailable:
        answer.status = 503


def refused() -> LogUnavailable:
    return LogUnavailable("the event log did not take it: nothing changed")


async def outbox(store, pid: str) -> dict[str, float]:
    return dict(await store._redis.zrange(ProjectKeys(pid).outbox(), 0, -1, withscores=True))


async def relayed(own_url: str, log: Log) -> None:
    """What the outbox relay publishes now (entries due), as it does once every second."""
    relay = OutboxRelay.open(own_url, log)
    try:
        await relay.run_once()
    finally:
        await relay.close()


async def processed(store, warehouse, log: Log) -> None:
    """The workers' processing of the log's messages, in its order (one delivery each)."""
    for n, message in enumerate(log.messages):
        await process_delivery(Delivery(f"{log.project_id}-{n}", load_records(message)), store, warehouse)


async def points(warehouse, pid: str) -> dict[str, str]:
    rows = await warehouse.query(
        "SELECT recipient_identifier AS user, toString(sum(amount)) AS points FROM payouts"
        " WHERE project_id = {p:String} GROUP BY user ORDER BY user",
        {"p": pid},
    )
    return {row["user"]: row["points"] for row in rows}


async def dead_letters(warehouse, pid: str) -> list[str]:
    rows = await warehouse.query("SELECT reason FROM dead_letters WHERE project_id = {p:String}", {"p": pid})
    return [row["reason"] for row in rows]


async def code_figures(warehouse, pid: str, code: str) -> tuple[int, int]:
    """The warehouse's users referred through the code, and those of them whose referral was removed."""
    rows = await warehouse.query(
        "SELECT sum(referred) AS referred, sum(removed) AS removed FROM code_stats"
        " WHERE project_id = {p:String} AND code = {c:String}",
        {"p": pid, "c": code},
    )
    return int(rows[0]["referred"]), int(rows[0]["removed"])


# -- 1. a rename racing a use, or a change of the limit -------------------------------------------------------------


@pytest.mark.parametrize("after", range(1, 7))
async def test_a_use_by_the_old_name_never_fails_for_a_rename_landing_meanwhile(racing, other, pid, after):
    """The rename lands after the use's n-th command, whichever: the use (begun under a name that stays the code's)
    succeeds, and is the renamed code's."""
    await affiliate_code(other, pid, user(1), "before")
    racing._redis.arm(after, lambda: rename(other, pid, user(1), "after"))
    await use(racing, pid, "before", 2)
    await racing._redis.landed()
    code = await other.get_code(pid, "after")
    assert (code.code, code.current_uses, [u.identifier for u in code.used_by]) == ("AFTER", 1, [user(2).identifier])
    assert await other.get_code(pid, "before") == code
    assert (await other.referral_of(pid, user(2))).code == "AFTER"
    assert await outbox(other, pid) == {}


@pytest.mark.parametrize("after", range(1, 4))
async def test_a_limit_set_by_the_old_name_never_fails_for_a_rename_landing_meanwhile(racing, other, pid, after):
    await affiliate_code(other, pid, user(1), "limited")
    racing._redis.arm(after, lambda: rename(other, pid, user(1), "renamed"))
    assert (await racing.set_max_uses(pid, "limited", 3)).max_uses == 3
    await racing._redis.landed()
    assert (await other.get_code(pid, "renamed")).max_uses == 3


async def test_a_use_undone_after_a_rename_is_undone_whole(racing, other, pid):
    """The use's publish fails after the code was renamed: the use goes from the code under its new name."""
    await affiliate_code(other, pid, user(1), "first")
    with pytest.raises(LogUnavailable):
        async with racing.use_code(pid, "first", user(2), {}):
            await rename(other, pid, user(1), "second")
            raise refused()
    code = await other.get_code(pid, "second")
    assert (code.code, code.current_uses, code.used_by) == ("SECOND", 0, [])
    assert await other.referral_of(pid, user(2)) is None
    assert await outbox(other, pid) == {}
    await use(other, pid, "first", 3)
    assert (await other.get_code(pid, "second")).current_uses == 1


# -- 2. a referral removed while the user is referred again -----------------------------------------------------------


async def test_a_removal_failing_after_a_new_referral_stands_and_reaches_the_log_first(
    racing, other, pid, warehouse, own_url
):
    """The user, referred by 1, is referred again by 2 while the removal of the first referral publishes; then that
    publish fails. The new referral stands on the removal, so the removal stands too (its request succeeds) and
    reaches the log ahead of the new use: the workers pay the new use, dead-letter nothing, and count the first
    referral out."""
    [first], [second] = await create_codes(other, pid, user(1)), await create_codes(other, pid, user(2))
    log = Log(pid)
    await use(other, pid, first, 3, log)
    async with answered() as removal, racing.remove_referral(pid, user(3), first, user(1)):
        await use(other, pid, second, 3, log)  # referred again meanwhile
        raise refused()  # the removal's own publish fails
    await relayed(own_url, log)  # (the removal's entry, due at once: a repeat, written once)
    kinds = [r.type for m in log.messages for r in load_records(m)]
    assert kinds == ["code_use", "referral_removed", "code_use", "referral_removed"]
    await processed(other, warehouse, log)
    assert await dead_letters(warehouse, pid) == []
    assert await points(warehouse, pid) == {
        user(1).identifier: "50",
        user(2).identifier: "50",
        user(3).identifier: "20",
    }
    assert await code_figures(warehouse, pid, first) == (1, 1) and await code_figures(warehouse, pid, second) == (1, 0)
    assert (await other.referral_of(pid, user(3))).referrer == user(2)
    assert await outbox(other, pid) == {}
    assert removal.status == 200  # the removal stands: a success


async def test_a_removal_failing_alone_leaves_no_trace(racing, other, pid):
    [first], [second] = await create_codes(other, pid, user(1)), await create_codes(other, pid, user(2))
    await use(other, pid, first, 3)
    with pytest.raises(LogUnavailable):
        async with racing.remove_referral(pid, user(3), first, user(1)):
            raise refused()
    assert (await other.referral_of(pid, user(3))).referrer == user(1)
    assert await outbox(other, pid) == {}
    assert await other._redis.exists(ProjectKeys(pid).referral_removals()) == 0
    async with other.remove_referral(pid, user(3), first, user(1)):  # removed for good this time
        pass
    assert await other._redis.exists(ProjectKeys(pid).referral_removals()) == 0
    await use(other, pid, second, 3)
    assert (await other.referral_of(pid, user(3))).referrer == user(2)


async def test_a_use_failing_after_its_referral_was_removed_stands(racing, other, pid, warehouse, own_url):
    """The other way round: the referral a use just made is removed before the use's publish fails. The removal
    stands on the use, so the use stands too (its request succeeds): the warehouse never holds the removal of a
    referral it never had."""
    [code] = await create_codes(other, pid, user(1))
    log = Log(pid)
    async with answered() as use_request, racing.use_code(pid, code, user(3), {}):
        async with other.remove_referral(pid, user(3), code, user(1)) as removed:
            await log.publish(pid, removed.payload)
        raise refused()
    await relayed(own_url, log)
    await processed(other, warehouse, log)
    assert await code_figures(warehouse, pid, code) == (1, 1)
    assert (await other.get_code(pid, code)).current_uses == 1
    assert await other.referral_of(pid, user(3)) is None
    assert await dead_letters(warehouse, pid) == [] and await outbox(other, pid) == {}
    assert use_request.status == 200


# -- 3. a code's creation or rename undone after a use of its name ---------------------------------------------------


@pytest.mark.parametrize("kind", ["affiliate", "generated"])
async def test_a_creation_failing_after_a_use_of_the_code_stands(racing, other, pid, own_url, kind):
    log = Log(pid)
    creating = (
        racing.create_affiliate_code(pid, user(1), "chosen", Decimal("0.1"), {})
        if kind == "affiliate"
        else racing.create_codes(pid, user(1), 1, None)
    )
    async with answered() as creation, creating as created:
        name = created.value.code if kind == "affiliate" else created.value[0].code
        await use(other, pid, name.lower(), 2, log)  # (a generated code is practically invisible until created)
        raise refused()
    code = await other.get_code(pid, name)
    assert (code.owner, code.current_uses) == (user(1), 1)
    assert (await other.referral_of(pid, user(2))).code == name
    with pytest.raises(CodeInUse):
        await affiliate_code(other, pid, user(5), name)
    await relayed(own_url, log)  # and the creation reaches the log
    assert [r.type for m in log.messages for r in load_records(m)] == ["code_use", "codes_created"]
    assert await outbox(other, pid) == {}
    assert creation.status == 200  # the code stands: a success


@pytest.mark.parametrize("by", ["new", "old"])
async def test_a_rename_failing_after_a_use_of_the_code_stands(racing, other, pid, own_url, by):
    await affiliate_code(other, pid, user(1), "old")
    log = Log(pid)
    async with answered() as renaming, racing.rename_affiliate_code(pid, user(1), "new", {}):
        await use(other, pid, by, 2, log)
        raise refused()
    code = await other.get_code(pid, "new")
    assert (code.code, code.names, code.current_uses) == ("NEW", ("OLD",), 1)
    assert await other.get_code(pid, "old") == code
    assert (await other.referral_of(pid, user(2))).code == "NEW"
    for name in ("new", "old"):
        with pytest.raises(CodeInUse):
            await affiliate_code(other, pid, user(5), name)
    await relayed(own_url, log)
    assert [r.type for m in log.messages for r in load_records(m)] == ["code_use", "codes_created"]
    assert load_records(log.messages[-1])[0].codes == ["NEW"]
    assert await outbox(other, pid) == {}
    assert renaming.status == 200  # the rename stands: a success
