"""The AffiliateStore contract."""

import pytest

from rewards.ports import AffiliateStore
from schemas.records import load_records
from tests.contract.support import Boom, affiliate, assert_implements, user


def test_has_the_port(store: AffiliateStore):
    assert_implements(type(store), AffiliateStore)


async def test_affiliates(store: AffiliateStore, pid: str):
    first = affiliate(1)
    async with store.create_affiliate(pid, first) as created:
        assert created.value is True
        [record] = load_records(created.payload)
        assert (record.type, record.project_id, record.id, record.name) == ("affiliate", pid, first.id, "Ada")
    assert await store.get_affiliate(pid, user(1)) == first
    async with store.create_affiliate(pid, affiliate(1, name="Other")) as created:
        assert (created.value, created.payload) == (False, None)
    assert await store.get_affiliate(pid, user(1)) == first
    assert await store.get_affiliate(pid, user(2)) is None
    assert await store.affiliates_among(pid, [user(2), user(1), user(1)]) == {user(1): first}
    assert await store.affiliates_among(pid, []) == {}


async def test_affiliate_undone_when_block_raises(store: AffiliateStore, pid: str):
    with pytest.raises(Boom):
        async with store.create_affiliate(pid, affiliate(3)) as created:
            assert created.value
            raise Boom
    assert await store.get_affiliate(pid, user(3)) is None
    async with store.create_affiliate(pid, affiliate(3, name=None, tier="gold")) as created:
        assert created.value
    assert (await store.get_affiliate(pid, user(3))).tier == "gold"
