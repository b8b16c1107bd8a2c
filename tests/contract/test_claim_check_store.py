"""The ClaimCheckStore contract: the checks the workers open, and their changes, all or none."""

from dataclasses import replace
from functools import partial

import pytest

from rewards.domain import claim_checks as cc
from rewards.ports import ClaimCheckStore
from schemas.records import load_records
from tests.contract.support import Boom, assert_implements, check, user


def test_has_the_port(store: ClaimCheckStore):
    assert_implements(type(store), ClaimCheckStore)


async def current(store: ClaimCheckStore, pid: str, ids: list[str]) -> list[cc.ClaimCheck]:
    async with store.update_claim_checks(pid, ids, lambda c: c, None) as checks:
        return checks.value


async def test_claim_checks_register_and_update(store: ClaimCheckStore, pid: str):
    a, b = check(pid, 1, user(1)), check(pid, 2, user(1))
    await store.register_claim_checks(pid, [a, b])
    await store.register_claim_checks(pid, [])
    assert await current(store, pid, [a.id, b.id]) == [a, b]
    async with store.update_claim_checks(pid, [a.id, b.id], cc.close, user(1)) as closed:
        assert [(c.status, c.version) for c in closed.value] == [(cc.CLOSED, 2)] * 2
        assert load_records(closed.payload) == [cc.to_record(pid, c) for c in closed.value]
    await store.register_claim_checks(pid, [a, check(pid, 3, user(2))])  # a known check is left as it is
    assert (await current(store, pid, [a.id]))[0].status == cc.CLOSED
    claim = partial(cc.claim, tx_hash="0xabc", claimed_ms=1_800_000_000_000)
    async with store.update_claim_checks(pid, [a.id], claim, None) as change:
        claimed = change.value
        assert (claimed[0].status, claimed[0].hash, claimed[0].claimed_ms, claimed[0].version) == (
            cc.CLAIMED, "0xabc", 1_800_000_000_000, 3,
        )  # fmt: skip
    async with store.update_claim_checks(pid, [a.id], claim, None) as again:
        assert again.value == claimed
    assert await current(store, pid, []) == []


async def test_claim_checks_all_or_none(store: ClaimCheckStore, pid: str, other_pid: str):
    a, b, theirs = check(pid, 1, user(1)), check(pid, 2, user(1)), check(pid, 3, user(2))
    await store.register_claim_checks(pid, [a, b, theirs])
    with pytest.raises(cc.ClaimCheckNotFound, match="cc_missing"):
        async with store.update_claim_checks(pid, [a.id, "cc_missing"], cc.close, user(1)):
            pass
    with pytest.raises(cc.ClaimCheckNotFound, match=theirs.id):
        async with store.update_claim_checks(pid, [a.id, theirs.id], cc.close, user(1)):
            pass
    with pytest.raises(cc.ClaimCheckConflict, match="only closed"):
        async with store.update_claim_checks(pid, [a.id, b.id], partial(cc.claim, tx_hash="0x1", claimed_ms=1), None):
            pass
    assert await current(store, pid, [a.id, b.id, theirs.id]) == [a, b, theirs]
    with pytest.raises(cc.ClaimCheckNotFound):
        await current(store, other_pid, [a.id])


async def test_claim_checks_undone_when_block_raises(store: ClaimCheckStore, pid: str):
    a, b = check(pid, 1, user(1)), check(pid, 2, user(1))
    await store.register_claim_checks(pid, [a, b])
    async with store.update_claim_checks(pid, [b.id], cc.close, None):
        pass
    with pytest.raises(Boom):
        async with store.update_claim_checks(pid, [a.id, b.id], cc.close, user(1)) as closed:
            assert [c.status for c in closed.value] == [cc.CLOSED, cc.CLOSED]
            raise Boom
    assert await current(store, pid, [a.id, b.id]) == [a, replace(b, status=cc.CLOSED, version=2)]


async def test_claim_checks_read_by_id(store: ClaimCheckStore, pid: str, other_pid: str):
    a, b = check(pid, 1, user(1)), check(pid, 2, user(2))
    await store.register_claim_checks(pid, [a, b])
    assert await store.get_claim_checks(pid, []) == []
    assert await store.get_claim_checks(pid, [b.id, "cc_missing", a.id, b.id]) == [b, a]  # their order, once each
    async with store.update_claim_checks(pid, [a.id], cc.close, user(1)):
        pass
    assert await store.get_claim_checks(pid, [a.id]) == [replace(a, status=cc.CLOSED, version=2)]
    assert await store.get_claim_checks(other_pid, [a.id, b.id]) == []
