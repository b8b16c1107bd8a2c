"""The ProjectStore contract: projects, their keys, their payout configuration."""

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
