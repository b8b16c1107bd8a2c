"""The ErasureStore contract (API.md §11): one pending request per user and project, done without the identifier; and a
user renamed to their pseudonym everywhere the state store holds them (affiliate, codes, code uses, referrals both
ways, blocklist, claim checks, tracking, caps' counters), merged into a pseudonym that holds data already. On SQLite
and Redis, and with `-m cluster` on a Redis Cluster."""

import re

from rewards.domain.allotment import Ask, CapRule, Grant, Limits
from rewards.domain.erasure import Erasure
from rewards.domain.integrity import Rejection
from rewards.domain.payouts import User
from rewards.domain.timestamps import now_ms
from rewards.ports import ErasureStore, StateStore
from tests.contract.support import affiliate, assert_implements, check, create_codes, user

PSEUDONYM = re.compile(r"erased:[0-9a-f]{32}")


def test_has_the_port(store: StateStore):
    assert_implements(type(store), ErasureStore)


async def pending_of(store: StateStore, pid: str) -> dict[User, Erasure]:
    return {e.user: e for e in await store.take_erasures(10_000) if e.project_id == pid}


async def test_one_pending_request_per_user_then_done_without_the_identifier(store: StateStore, pid, other_pid):
    first = await store.request_erasure(pid, user(1))
    assert await store.request_erasure(pid, user(1)) == first  # pending: the same request
    second = await store.request_erasure(pid, user(2))
    theirs = await store.request_erasure(other_pid, user(1))
    assert len({first, second, theirs}) == 3
    assert await store.erasure_status(pid, first) == "pending"
    assert await store.erasure_status(other_pid, first) is None  # nothing crosses projects
    assert await store.erasure_status(pid, "er_unknown") is None

    mine, others = await pending_of(store, pid), await pending_of(store, other_pid)
    assert set(mine) == {user(1), user(2)} and mine[user(1)].id == first
    pseudonym = mine[user(1)].pseudonym
    assert PSEUDONYM.fullmatch(pseudonym.identifier) and pseudonym.identifier_type == "evm_address"
    assert others[user(1)].pseudonym != pseudonym  # each project its own salt

    await store.finish_erasures(list(mine.values()))
    assert await store.erasure_status(pid, first) == await store.erasure_status(pid, second) == "done"
    assert await pending_of(store, pid) == {}
    again = await store.request_erasure(pid, user(1))  # back, and asking again: a new request, the same pseudonym
    assert again != first and (await pending_of(store, pid))[user(1)].pseudonym == pseudonym
    assert await store.erasure_status(other_pid, theirs) == "pending"


async def test_a_user_is_renamed_everywhere_the_store_holds_them(store: StateStore, pid, other_pid):
    erased, referrer, referred = user(1), user(2), user(3)
    async with store.create_affiliate(pid, affiliate(1)):
        pass
    async with store.create_affiliate(other_pid, affiliate(1)):
        pass
    (referrer_code,) = await create_codes(store, pid, referrer)
    (own_code,) = await create_codes(store, pid, erased)
    async with store.use_code(pid, referrer_code, erased, {"signature": "0x"}):
        pass
    async with store.use_code(pid, own_code, referred, {}):
        pass
    await store.block_user(pid, erased, "chargeback")
    owed = check(pid, 1, erased)
    await store.register_claim_checks(pid, [owed])
    await store.bind_user(pid, "tracking-1", erased, 3600)
    cap = Limits(caps={"point": (CapRule(("end_user",), 10, "all_time"),)})
    assert await store.allot(pid, "d1", cap, [_ask(1, 7, erased)]) == [Grant(7, None)]

    await store.request_erasure(pid, erased)
    pseudonym = (await pending_of(store, pid))[erased].pseudonym
    await store.erase_users(pid, {erased: pseudonym})

    assert await store.get_affiliate(pid, erased) is None
    kept = await store.get_affiliate(pid, pseudonym)
    assert kept is not None and kept.id == f"evm_address:{pseudonym.identifier}" and kept.name == "Ada"
    assert await store.get_affiliate(other_pid, erased) is not None  # another project's same user is another user
    assert await store.referral_of(pid, erased) is None
    assert (await store.referral_of(pid, pseudonym)).referrer == referrer
    assert (await store.referral_of(pid, referred)).referrer == pseudonym
    assert await store.referrer_chains(pid, [referred], 3) == {referred: [pseudonym, referrer]}
    assert (await store.get_code(pid, own_code)).owner == pseudonym
    assert await store.codes_of(pid, [pseudonym]) == {pseudonym: [own_code]}
    assert [use.identifier for use in (await store.get_code(pid, referrer_code)).used_by] == [pseudonym.identifier]
    assert await store.blocklisted_among(pid, [erased, pseudonym]) == {pseudonym}
    assert (await store.get_claim_checks(pid, [owed.id]))[0].user == pseudonym
    assert await store.tracked_user(pid, "tracking-1") == pseudonym
    assert await store.tracking_ids_of(pid, [erased, pseudonym]) == {pseudonym: {"tracking-1"}}
    # The cap counted under the user counts under the pseudonym; the identifier, back, starts afresh.
    assert await store.allot(pid, "d2", cap, [_ask(2, 7, pseudonym), _ask(3, 7, erased)]) == [
        Grant(3, Rejection.CAP_EXCEEDED), Grant(7, None),
    ]  # fmt: skip


async def test_a_pseudonym_holding_data_takes_the_user_s_beside_its_own(store: StateStore, pid):
    erased = user(1)
    await store.request_erasure(pid, erased)
    pseudonym = (await pending_of(store, pid))[erased].pseudonym
    cap = Limits(caps={"point": (CapRule(("end_user",), 10, "all_time"),)})
    await store.allot(pid, "d1", cap, [_ask(1, 4, erased)])
    await store.block_user(pid, erased, None)
    async with store.create_affiliate_code(pid, erased, "12345", None, {"signature": "0xsigned"}):
        pass
    await store.erase_users(pid, {erased: pseudonym})
    await store.allot(pid, "d2", cap, [_ask(2, 3, erased)])  # back after the erasure, and erased again
    await store.block_user(pid, erased, None)
    async with store.create_affiliate_code(pid, erased, "67890", None, {}):
        pass
    await store.erase_users(pid, {erased: pseudonym})
    assert await store.blocklisted_among(pid, [erased, pseudonym]) == {pseudonym}
    # The caps' counters add up (4 + 3 of 10); a code keeps its name (a numeric one is no counter).
    assert await store.allot(pid, "d3", cap, [_ask(3, 9, pseudonym)]) == [Grant(3, Rejection.CAP_EXCEEDED)]
    assert sorted(await store.codes_of(pid, [pseudonym]) or {}) == [pseudonym]
    assert sorted((await store.codes_of(pid, [pseudonym]))[pseudonym]) == ["12345", "67890"]
    assert (await store.get_code(pid, "12345")).owner == (await store.get_code(pid, "67890")).owner == pseudonym


def _ask(n: int, units: int, who: User) -> Ask:
    return Ask(f"conversion:e{n}:0", who, "end_user", "point", units, now_ms())
