"""The ProjectStore contract: projects, their keys, their payout configuration."""

from rewards.domain import keys
from rewards.domain.claim_signing import StoredSigner
from rewards.domain.payout_config import EMPTY_CONFIG, PayoutConfig
from rewards.ports import ProjectStore
from tests.contract.support import assert_implements


def test_has_the_port(store: ProjectStore):
    assert_implements(type(store), ProjectStore)


async def test_keys_resolve_and_revoke(store: ProjectStore, pid: str):
    key = await store.create_key(pid, ["service_role", "SendTrackingEvent", "service_role"])
    principal = await store.resolve_key(key)
    assert principal.project_id == pid and not principal.project_deleted
    assert principal.scopes == frozenset({"service_role", "SendTrackingEvent"})
    assert key.startswith(f"rk_{principal.key_id}_")
    assert await store.resolve_key(key[:-1] + ("A" if key[-1] != "A" else "B")) is None
    for malformed in ("", "rk_", "xx_abc_def", f"rk_{principal.key_id}_", "rk_ffffffffffffffff_secret"):
        assert await store.resolve_key(malformed) is None
    assert await store.revoke_key(key) is True
    assert await store.resolve_key(key) is None
    assert await store.revoke_key(key) is False


async def test_deleted_project(store: ProjectStore, pid: str):
    key = await store.create_key(pid, [])
    assert await store.project_exists(pid)
    assert await store.delete_project(pid) is True
    assert await store.delete_project(pid) is False
    assert not await store.project_exists(pid)
    principal = await store.resolve_key(key)
    assert principal.project_deleted and principal.scopes == frozenset()
    assert await store.delete_project("0" * 32) is False
    assert not await store.project_exists("0" * 32)


async def test_config_round_trip(store: ProjectStore, pid: str):
    assert await store.get_config(pid) == EMPTY_CONFIG
    config = PayoutConfig.model_validate(
        {
            "default_tier": "gold",
            "tiers": [{"id": "gold", "name": "Gold", "rank": 1, "rates": {"r1": 0.1, "r2": 0.05, "r3": 0, "r4": 0}}],
            "conversions": [{"event_name": "purchase", "base": {"rate_of": "value", "rate": "0.5"}}],
        }
    )
    await store.put_config(pid, config)
    assert await store.get_config(pid) == config
    await store.put_config(pid, EMPTY_CONFIG)
    assert await store.get_config(pid) == EMPTY_CONFIG


async def test_claim_signer_round_trip_apart_from_the_config(store: ProjectStore, pid: str, other_pid: str):
    assert await store.get_claim_signer(pid) is None
    signer = StoredSigner(address="0x" + "ab" * 20, sealed_key="fernet:gAAAAB-sealed")
    await store.put_claim_signer(pid, signer)
    assert await store.get_claim_signer(pid) == signer
    assert await store.get_claim_signer(other_pid) is None
    await store.put_config(pid, EMPTY_CONFIG)  # the configuration is replaced whole: the signer stays
    assert await store.get_claim_signer(pid) == signer
    replaced = StoredSigner(address="0x" + "cd" * 20, sealed_key="plain:" + "11" * 32)
    await store.put_claim_signer(pid, replaced)
    assert await store.get_claim_signer(pid) == replaced
    await store.put_claim_signer(pid, None)
    assert await store.get_claim_signer(pid) is None
    await store.put_claim_signer(pid, None)  # removing none: a no-op


async def test_projects_listed_with_their_names_deleted_ones_too(store: ProjectStore):
    first = await store.create_project("Shop one")
    second = await store.create_project("Shop — two ✓")
    await store.delete_project(second)
    listed = {p.project_id: p for p in await store.list_projects()}
    assert listed[first].name == "Shop one" and listed[first].deleted_ms is None
    assert listed[second].name == "Shop — two ✓" and listed[second].deleted_ms >= listed[second].created_ms
    ordered = [(p.created_ms, p.project_id) for p in await store.list_projects()]
    assert ordered == sorted(ordered)  # oldest first
    assert await store.get_project(first) == listed[first]
    assert await store.get_project(second) == listed[second]
    assert await store.get_project("0" * 32) is None


async def test_keys_listed_by_id_never_by_secret_and_revoked_by_id(store: ProjectStore, pid: str, other_pid: str):
    standard = await store.create_key(pid, [])
    service = await store.create_key(pid, ["service_role"])
    await store.create_key(other_pid, ["service_role"])
    standard_id, service_id = (keys.split_key(k)[0] for k in (standard, service))
    listed = await store.list_keys(pid)
    assert {(k.key_id, k.scopes, k.revoked_ms) for k in listed} == {
        (standard_id, (), None),
        (service_id, ("service_role",), None),
    }
    assert [(k.created_ms, k.key_id) for k in listed] == sorted((k.created_ms, k.key_id) for k in listed)
    assert all(k.created_ms > 0 and keys.split_key(standard)[1] not in repr(k) for k in listed)
    assert await store.revoke_key_id(service_id) is True
    assert await store.revoke_key_id(service_id) is False
    assert await store.revoke_key_id("ffffffffffffffff") is False
    assert await store.resolve_key(service) is None and await store.resolve_key(standard) is not None
    assert {k.key_id: k.revoked_ms is not None for k in await store.list_keys(pid)} == {
        standard_id: False,
        service_id: True,
    }
    assert await store.list_keys("0" * 32) == []
