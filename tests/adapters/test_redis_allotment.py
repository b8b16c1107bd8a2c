"""Grants by time written before tallies (one member per payout, "<payout id>|<units>" scored by its event time) are
still read by both allot scripts: a rolling cap keeps counting what was granted before an upgrade."""

from rewards.adapters.production.redis_keys import ProjectKeys, user_field
from rewards.adapters.production.redis_state import open_redis_state
from rewards.domain import allotment
from rewards.domain.allotment import DAY_MS, Ask, CapRule, Grant, Limits
from rewards.domain.integrity import Rejection
from rewards.domain.timestamps import now_ms
from tests.contract.support import redis_url, user  # noqa: F401 (redis_url: a fixture)

TOKEN = "0x" + "cd" * 20


async def test_grants_by_time_of_before_tallies_still_count(redis_url):  # noqa: F811
    store = await open_redis_state(redis_url)
    try:
        project_id = await store.create_project("old grants")
        alice, now = user(1), now_ms()
        limits = Limits(caps={TOKEN: (CapRule(("end_user",), 100, "rolling", DAY_MS),)})
        who = f"end_user|{len(TOKEN)}:{TOKEN}|{user_field(alice)}"
        history = ProjectKeys(project_id).allotment() + "hist:" + who
        await store._redis.zadd(history, {"conversion:old|odd:0|70": now - 1000})  # an id holding "|" and ":"
        await store._redis.hset(ProjectKeys(project_id).allotment("total"), who, "70")
        late = Ask("conversion:new:0", alice, "end_user", TOKEN, 50, now)
        tallies = allotment.tallied([late])[0]
        assert await store.allot_tallies(project_id, "d", limits, tallies) == [allotment.ONE_BY_ONE]
        assert await store.allot(project_id, "d:each", limits, [late]) == [Grant(30, Rejection.CAP_EXCEEDED)]
        # and what the new members hold is read alike: nothing left in the day
        again = Ask("conversion:new2:0", alice, "end_user", TOKEN, 5, now + 1)
        assert await store.allot(project_id, "d2", limits, [again]) == [Grant(0, Rejection.CAP_EXCEEDED)]
        await store.delete_project(project_id)
    finally:
        await store.close()
