"""The ReferralStore contract: referral codes, their uses, and the referral graph they make."""

import asyncio

import pytest

from rewards.domain.payouts import User
from rewards.domain.referrals import (
    AlreadyReferred,
    CodeNotFound,
    CodeUnavailable,
    InvalidReferral,
    MaxUsesBelowCurrent,
)
from rewards.ports import ReferralStore
from schemas.records import load_records
from tests.contract.support import Boom, assert_implements, create_codes, user


def test_has_the_port(store: ReferralStore):
    assert_implements(type(store), ReferralStore)


async def test_codes_create_list_get(store: ReferralStore, pid: str):
    async with store.create_codes(pid, user(1), 3, 2) as created:
        records = created.value
        assert len({r.code for r in records}) == 3
        [record] = load_records(created.payload)
        assert (record.type, record.codes, record.owner_identifier) == ("codes_created", [r.code for r in records],
                                                                        user(1).identifier)  # fmt: skip
        assert all(r.owner == user(1) and r.max_uses == 2 and r.current_uses == 0 and r.used_by == [] for r in records)
    later = await create_codes(store, pid, user(1), 2)
    codes = [r.code for r in records] + later
    page, count = await store.list_codes(pid, user(1), 0, 10)
    assert count == 5 and [r.code for r in page] == codes[::-1]
    assert page[0].max_uses is None and page[-1].max_uses == 2
    page, count = await store.list_codes(pid, user(1), 1, 2)
    assert count == 5 and [r.code for r in page] == codes[::-1][1:3]
    assert await store.list_codes(pid, user(1), 10, 10) == ([], 5)
    assert await store.list_codes(pid, user(2), 0, 10) == ([], 0)
    record = await store.get_code(pid, codes[0].lower())  # case-insensitive (ASCII), nothing else changed
    assert record == records[0]
    assert await store.get_code(pid, f" {codes[0]}") is None and await store.get_code(pid, f"{codes[0]}\n") is None
    assert await store.get_code(pid, "NOPE000") is None


async def test_codes_of(store: ReferralStore, pid: str):
    mine = await create_codes(store, pid, user(1), 2)
    theirs = await create_codes(store, pid, user(2), 1)
    found = await store.codes_of(pid, [user(1), user(3), user(2), user(1)])
    assert found == {user(1): mine[::-1], user(2): theirs}
    assert await store.codes_of(pid, []) == {}


async def test_set_max_uses(store: ReferralStore, pid: str):
    [code] = await create_codes(store, pid, user(1), 1, 5)
    async with store.use_code(pid, code, user(2), {}) as used:
        pass
    assert used.value[1].max_uses == 5 and load_records(used.payload)[0].max_uses == 5  # the workers hold uses to it
    assert (await store.set_max_uses(pid, code.lower(), None)).max_uses is None
    record = await store.set_max_uses(pid, code, 1)
    assert (record.max_uses, record.current_uses, record.available) == (1, 1, False)
    assert [u.identifier for u in record.used_by] == [user(2).identifier]
    with pytest.raises(MaxUsesBelowCurrent, match=r"current_uses \(1\)"):
        await store.set_max_uses(pid, code, 0)
    with pytest.raises(CodeNotFound):
        await store.set_max_uses(pid, "NOPE000", 3)
    assert (await store.get_code(pid, code)).max_uses == 1


async def test_codes_undone_when_block_raises(store: ReferralStore, pid: str):
    with pytest.raises(Boom):
        async with store.create_codes(pid, user(1), 3, None) as created:
            codes = [r.code for r in created.value]
            raise Boom
    assert [await store.get_code(pid, code) for code in codes] == [None] * 3
    assert await store.list_codes(pid, user(1), 0, 10) == ([], 0)
    assert await store.codes_of(pid, [user(1)]) == {}


async def test_use_code(store: ReferralStore, pid: str):
    [code] = await create_codes(store, pid, user(1), 1, 2)
    async with store.use_code(pid, code.lower(), user(2), {"signature": "0xsig", "chain_id": 1}) as used:
        record, use = used.value
        assert load_records(used.payload) == [use]
        assert (record.code, record.current_uses, record.remaining_uses) == (code, 1, 1)
        assert [(u.identifier, u.identifier_type) for u in record.used_by] == [(user(2).identifier, "evm_address")]
        assert (use.code, use.owner_identifier, use.user_identifier) == (code, user(1).identifier, user(2).identifier)
        assert use.project_id == pid and use.used_at_ms == record.used_by[0].used_at_ms
    referral = await store.referral_of(pid, user(2))
    assert (referral.code, referral.referrer, referral.referred_at_ms) == (code, user(1), use.used_at_ms)
    assert await store.referral_of(pid, user(1)) is None
    assert await store.get_code(pid, code) == record


async def test_use_code_errors(store: ReferralStore, pid: str):
    [code] = await create_codes(store, pid, user(1), 1, 1)
    with pytest.raises(CodeNotFound):
        async with store.use_code(pid, "NOPE000", user(2), {}):
            pass
    with pytest.raises(InvalidReferral, match="own"):
        async with store.use_code(pid, code, user(1), {}):
            pass
    async with store.use_code(pid, code, user(2), {}):
        pass
    with pytest.raises(CodeUnavailable):
        async with store.use_code(pid, code, user(3), {}):
            pass
    [other] = await create_codes(store, pid, user(4))
    with pytest.raises(AlreadyReferred):
        async with store.use_code(pid, other, user(2), {}):
            pass
    [of_two] = await create_codes(store, pid, user(2))
    with pytest.raises(InvalidReferral, match="cycle"):  # 2 was referred by 1: 1 may not be referred by 2
        async with store.use_code(pid, of_two, user(1), {}):
            pass
    assert (await store.get_code(pid, of_two)).current_uses == 0
    assert await store.referral_of(pid, user(1)) is None


async def test_use_code_undone_when_block_raises(store: ReferralStore, pid: str):
    [code] = await create_codes(store, pid, user(1), 1, 1)
    with pytest.raises(Boom):
        async with store.use_code(pid, code, user(2), {}) as used:
            assert used.value[0].current_uses == 1
            raise Boom
    record = await store.get_code(pid, code)
    assert (record.current_uses, record.used_by, record.available) == (0, [], True)
    assert await store.referral_of(pid, user(2)) is None
    async with store.use_code(pid, code, user(3), {}) as used:
        assert [u.identifier for u in used.value[0].used_by] == [user(3).identifier]


async def test_concurrent_uses_never_exceed_max_uses(store: ReferralStore, pid: str):
    [code] = await create_codes(store, pid, user(1), 1, 3)

    async def use(n: int) -> bool:
        try:
            async with store.use_code(pid, code, user(n), {}):
                await asyncio.sleep(0)
        except CodeUnavailable:
            return False
        return True

    results = await asyncio.gather(*(use(n) for n in range(10, 22)))
    assert sum(results) == 3
    record = await store.get_code(pid, code)
    assert record.current_uses == 3 and len(record.used_by) == 3


async def test_crossing_uses_make_no_cycle(store: ReferralStore, pid: str):
    [of_one], [of_two] = await create_codes(store, pid, user(1)), await create_codes(store, pid, user(2))

    async def use(code: str, n: int) -> str:
        try:
            async with store.use_code(pid, code, user(n), {}):
                return "used"
        except InvalidReferral as exc:
            return str(exc)

    results = await asyncio.gather(use(of_one, 2), use(of_two, 1))
    assert sorted(results) == ["Using this code would create a referral cycle", "used"]


async def refer(store: ReferralStore, pid: str, referrer: User, referred: User) -> None:
    [code] = await create_codes(store, pid, referrer)
    async with store.use_code(pid, code, referred, {}):
        pass


async def chain(store: ReferralStore, pid: str, of: User, depth: int) -> list[User]:
    return (await store.referrer_chains(pid, [of], depth))[of]


async def test_referrer_chain(store: ReferralStore, pid: str):
    for n in range(1, 6):  # 1 referred 2, 2 referred 3, … 5 referred 6
        await refer(store, pid, user(n), user(n + 1))
    assert await chain(store, pid, user(6), 4) == [user(5), user(4), user(3), user(2)]
    assert await chain(store, pid, user(6), 10) == [user(n) for n in range(5, 0, -1)]
    assert await chain(store, pid, user(3), 4) == [user(2), user(1)]
    assert await chain(store, pid, user(6), 0) == []
    assert await chain(store, pid, user(1), 4) == []
    assert await chain(store, pid, user(99), 4) == []
    many = await store.referrer_chains(pid, [user(6), user(3), user(99), user(3)], 2)
    assert many == {user(6): [user(5), user(4)], user(3): [user(2), user(1)], user(99): []}
    assert await store.referrer_chains(pid, [], 4) == {}
    [top_code] = await create_codes(store, pid, user(6))
    with pytest.raises(InvalidReferral, match="cycle"):  # 1 is 5 levels above 6
        async with store.use_code(pid, top_code, user(1), {}):
            pass
    await refer(store, pid, user(6), user(7))  # a new user below stays allowed
    assert await chain(store, pid, user(7), 2) == [user(6), user(5)]
