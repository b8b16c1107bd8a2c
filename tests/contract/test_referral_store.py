"""The ReferralStore contract: referral codes, their uses, and the referral graph they make."""

import asyncio
from decimal import Decimal

import pytest

from rewards.domain.payouts import User
from rewards.domain.referrals import (
    AddressInUse,
    AffiliateCodeNotFound,
    AlreadyReferred,
    CodeInUse,
    CodeNotFound,
    CodeUnavailable,
    InvalidReferral,
    MaxUsesBelowCurrent,
    ReferralNotFound,
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
    [other] = await create_codes(store, pid, user(1), 1, 5)
    for n in (3, 4):
        async with store.use_code(pid, other, user(n), {}):
            pass
    with pytest.raises(MaxUsesBelowCurrent, match=r"current_uses \(2\)"):
        await store.set_max_uses(pid, other, 1)
    with pytest.raises(CodeNotFound):
        await store.set_max_uses(pid, "NOPE000", 3)
    assert (await store.get_code(pid, code)).max_uses == 1
    disabled = await store.set_max_uses(pid, code, 0)  # 0 disables a code, used or not (the client's "disable")
    assert (disabled.max_uses, disabled.current_uses, disabled.remaining_uses, disabled.available) == (0, 1, 0, False)


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


# -- affiliate codes (API.md §7) -------------------------------------------------------------------------------


async def affiliate_code(store: ReferralStore, pid: str, owner: User, code: str, rate: str | None = None):
    async with store.create_affiliate_code(pid, owner, code, None if rate is None else Decimal(rate), {}) as created:
        return created.value


async def rename(store: ReferralStore, pid: str, owner: User, code: str):
    async with store.rename_affiliate_code(pid, owner, code, {"signature": "0xsig"}) as renamed:
        return renamed


async def test_affiliate_code_create(store: ReferralStore, pid: str):
    proof = {"signature": "0x" + "5" * 130, "signature_public_key": "0xkey", "account_chain_id": 8453}
    async with store.create_affiliate_code(pid, user(1), "Ada_Lovelace-1", Decimal("0.15"), proof) as created:
        record = created.value
        [published] = load_records(created.payload)
    assert (record.code, record.owner, record.chosen, record.rebate_rate) == ("ADA_LOVELACE-1", user(1), True,
                                                                           Decimal("0.15"))  # fmt: skip
    assert (record.max_uses, record.current_uses, record.available, record.names) == (None, 0, True, ())
    assert (published.type, published.codes, published.owner_identifier) == (
        "codes_created", ["ADA_LOVELACE-1"], user(1).identifier)  # fmt: skip
    assert await store.get_code(pid, "ada_lovelace-1") == record
    [generated] = await create_codes(store, pid, user(1))
    page, count = await store.list_codes(pid, user(1), 0, 10)
    assert count == 2 and [r.code for r in page] == [generated, record.code]
    assert (await store.codes_of(pid, [user(1)]))[user(1)] == [generated, record.code]
    for owner, name in ((user(2), "ada_LOVELACE-1"), (user(2), generated.lower())):  # any code's name, any case
        with pytest.raises(CodeInUse, match=r"^Code in use$"):
            await affiliate_code(store, pid, owner, name)
    with pytest.raises(AddressInUse, match=r"^Address in use$"):  # one affiliate code per user
        await affiliate_code(store, pid, user(1), "another")
    assert await store.get_code(pid, "another") is None
    mine = await affiliate_code(store, pid, user(2), "ada")  # another user, another name: fine
    assert (mine.code, mine.rebate_rate) == ("ADA", None)


async def test_affiliate_code_undone_when_block_raises(store: ReferralStore, pid: str):
    with pytest.raises(Boom):
        async with store.create_affiliate_code(pid, user(1), "undone", None, {}):
            raise Boom
    assert await store.get_code(pid, "undone") is None and await store.codes_of(pid, [user(1)]) == {}
    assert (await affiliate_code(store, pid, user(1), "undone")).code == "UNDONE"  # neither name nor user taken


async def test_rename_keeps_the_code_and_its_names(store: ReferralStore, pid: str):
    with pytest.raises(AffiliateCodeNotFound):
        await rename(store, pid, user(1), "nothing")
    first = await affiliate_code(store, pid, user(1), "first", "0.5")
    async with store.use_code(pid, "first", user(2), {}):
        pass
    renamed = await rename(store, pid, user(1), "Second")
    [published] = load_records(renamed.payload)
    record = renamed.value
    assert (published.type, published.codes) == ("codes_created", ["SECOND"])  # the listing searches the new name
    assert (record.code, record.names, record.current_uses, record.rebate_rate) == ("SECOND", ("FIRST",), 1,
                                                                                    Decimal("0.5"))  # fmt: skip
    assert [u.identifier for u in record.used_by] == [
        user(2).identifier
    ] and record.created_at_ms == first.created_at_ms
    assert record.updated_at_ms is not None
    assert await store.get_code(pid, "first") == await store.get_code(pid, "second") == record  # the old name finds it
    assert (await store.referral_of(pid, user(2))).code == "SECOND"
    assert [r.code for r in (await store.list_codes(pid, user(1), 0, 10))[0]] == ["SECOND"]
    with pytest.raises(CodeInUse):  # a former name stays the code's
        await affiliate_code(store, pid, user(3), "FIRST")
    async with store.use_code(pid, "first", user(3), {}):  # and is usable: it is the code
        pass
    assert (await store.get_code(pid, "second")).current_uses == 2
    unchanged = await rename(store, pid, user(1), "second")
    assert unchanged.payload is None and unchanged.value.code == "SECOND"
    back = (await rename(store, pid, user(1), "first")).value  # its own former name: it may take it again
    assert (back.code, back.names, back.current_uses) == ("FIRST", ("SECOND",), 2)
    other = await affiliate_code(store, pid, user(4), "other")
    with pytest.raises(CodeInUse):
        await rename(store, pid, user(1), "OTHER")
    with pytest.raises(CodeInUse):
        await rename(store, pid, user(4), "second")
    assert await store.get_code(pid, "other") == other


async def test_rename_undone_when_block_raises(store: ReferralStore, pid: str):
    await affiliate_code(store, pid, user(1), "one")
    await rename(store, pid, user(1), "two")
    async with store.use_code(pid, "two", user(2), {}):
        pass
    before = await store.get_code(pid, "two")
    with pytest.raises(Boom):
        async with store.rename_affiliate_code(pid, user(1), "three", {}) as renamed:
            assert renamed.value.code == "THREE"
            raise Boom
    assert await store.get_code(pid, "three") is None
    assert await store.get_code(pid, "two") == await store.get_code(pid, "one") == before
    assert (await rename(store, pid, user(1), "three")).value.names == ("ONE", "TWO")


async def test_set_rebate_rate(store: ReferralStore, pid: str):
    await affiliate_code(store, pid, user(1), "rebated")
    [generated] = await create_codes(store, pid, user(1))
    record = await store.set_rebate_rate(pid, user(1), "REBATED", Decimal("0.25"), {"signature": "0xsig"})
    assert (record.code, record.rebate_rate) == ("REBATED", Decimal("0.25")) and record.updated_at_ms is not None
    assert (await store.set_rebate_rate(pid, user(1), generated.lower(), Decimal("1"), {})).rebate_rate == 1
    with pytest.raises(AffiliateCodeNotFound):  # not the user's
        await store.set_rebate_rate(pid, user(2), "rebated", Decimal("0.1"), {})
    with pytest.raises(AffiliateCodeNotFound):
        await store.set_rebate_rate(pid, user(1), "NOPE000", Decimal("0.1"), {})
    await rename(store, pid, user(1), "renamed")
    assert (await store.set_rebate_rate(pid, user(1), "rebated", None, {})).rebate_rate is None  # by a former name
    assert await store.rebate_rates(pid, ["RENAMED", generated, "NOPE000"]) == {generated: Decimal(1)}


# -- referrals removed (API.md §7 deleteReferral) -----------------------------------------------------------------


async def test_remove_referral(store: ReferralStore, pid: str):
    [code] = await create_codes(store, pid, user(1), 1, 1)
    async with store.use_code(pid, code, user(2), {}) as used:
        use = used.value[1]
    [other] = await create_codes(store, pid, user(3))
    for wrong_code, wrong_referrer in ((other, user(1)), (code, user(3)), ("NOPE000", user(1))):
        with pytest.raises(ReferralNotFound):
            async with store.remove_referral(pid, user(2), wrong_code, wrong_referrer):
                pass
    with pytest.raises(ReferralNotFound):  # user 1 is nobody's referral
        async with store.remove_referral(pid, user(1), code, user(3)):
            pass
    async with store.remove_referral(pid, user(2), code.lower(), user(1)) as removed:
        [record] = load_records(removed.payload)
        assert (removed.value.code, removed.value.referrer, removed.value.referred_at_ms) == (
            code,
            user(1),
            use.used_at_ms,
        )
    assert (record.type, record.use_id, record.code, record.referrer_identifier, record.user_identifier) == (
        "referral_removed", use.use_id, code, user(1).identifier, user(2).identifier)  # fmt: skip
    assert record.referred_at_ms == use.used_at_ms and record.removed_at_ms >= use.used_at_ms and record.id
    assert await store.referral_of(pid, user(2)) is None
    assert await store.referrer_chains(pid, [user(2)], 4) == {user(2): []}
    kept = await store.get_code(pid, code)  # the use stays counted: max_uses caps uses
    assert (kept.current_uses, kept.available, [u.identifier for u in kept.used_by]) == (1, False, [user(2).identifier])
    async with store.use_code(pid, other, user(2), {}):  # referred again, by another
        pass
    assert (await store.referral_of(pid, user(2))).referrer == user(3)


async def test_remove_referral_through_a_renamed_code(store: ReferralStore, pid: str):
    await affiliate_code(store, pid, user(1), "before")
    async with store.use_code(pid, "before", user(2), {}):
        pass
    await rename(store, pid, user(1), "after")
    async with store.remove_referral(pid, user(2), "BEFORE", user(1)) as removed:  # any name of the code
        assert removed.value.code == "AFTER"
    assert await store.referral_of(pid, user(2)) is None


async def test_remove_referral_undone_when_block_raises(store: ReferralStore, pid: str):
    [code] = await create_codes(store, pid, user(1))
    async with store.use_code(pid, code, user(2), {}):
        pass
    with pytest.raises(Boom):
        async with store.remove_referral(pid, user(2), code, user(1)):
            raise Boom
    assert (await store.referral_of(pid, user(2))).referrer == user(1)


async def test_referrals_among(store: ReferralStore, pid: str):
    await affiliate_code(store, pid, user(1), "among", "0.2")
    [code] = await create_codes(store, pid, user(3))
    for name, n in (("among", 2), (code, 4)):
        async with store.use_code(pid, name, user(n), {}):
            pass
    await rename(store, pid, user(1), "among_too")
    found = await store.referrals_among(pid, [user(2), user(4), user(5), user(2)])
    assert {u: (r.code, r.referrer) for u, r in found.items()} == {user(2): ("AMONG_TOO", user(1)),
                                                                   user(4): (code, user(3))}  # fmt: skip
    assert found[user(2)] == await store.referral_of(pid, user(2))
    assert await store.referrals_among(pid, []) == {}
    assert await store.rebate_rates(pid, [r.code for r in found.values()]) == {"AMONG_TOO": Decimal("0.2")}
    assert await store.rebate_rates(pid, []) == {}
