"""The state copy's frame (runtime.moving.state): every table of the embedded state has its copy, or is named as not
copied with why; secrets the production settings cannot open stop the move before anything is written, and those the
embedded server kept unencrypted are encrypted with production's key."""

import pytest
from cryptography.fernet import Fernet

from rewards.adapters.embedded.sqlite_db import SqliteDatabase
from rewards.adapters.embedded.sqlite_state import SqliteStateStore
from rewards.adapters.production.redis_client import open_redis
from rewards.adapters.production.redis_keys import ProjectKeys
from rewards.domain import sealing
from rewards.domain.claim_signing import StoredSigner
from rewards.settings import Settings
from runtime.moving import MoveRefused
from runtime.moving.state import NOT_COPIED, check, copies, copy_state, open_source, state_tables
from tests.contract.support import redis_url  # noqa: F401 (fixture)


async def test_every_state_table_is_copied_or_said_not_to_be(tmp_path):
    await SqliteDatabase(tmp_path / "state.sqlite3").close()
    source = await open_source(tmp_path / "state.sqlite3")
    try:
        tables = set(state_tables(source))
    finally:
        source.close()
    copied = [table for table_copy in copies() for table in table_copy.tables]
    assert len(copied) == len(set(copied))  # none twice
    assert tables == set(copied) | NOT_COPIED
    assert [c.tables[0] for c in copies()][-2:] == ["api_keys", "projects"]  # last: a failed move may run again


async def test_a_claim_signer_sealed_by_another_key_is_refused_before_anything_is_written(tmp_path, redis_url):  # noqa: F811
    key = Fernet.generate_key().decode()
    store = SqliteStateStore(SqliteDatabase(tmp_path / "state.sqlite3"))
    project = await store.create_project("sealed")
    await store.put_claim_signer(project, StoredSigner("0x" + "ab" * 20, sealing.seal(b"\x01" * 32, [key])))
    await store.close()
    redis = await open_redis(redis_url, decode_responses=True)
    try:
        for settings in (Settings(), Settings(secrets_key=Fernet.generate_key().decode())):
            with pytest.raises(MoveRefused, match=f"the claim signer of project {project}"):
                await check(tmp_path / "state.sqlite3", redis, settings)
        assert [key async for key in redis.scan_iter(match=f"rw:{{{project}}}:*")] == []
        await check(tmp_path / "state.sqlite3", redis, Settings(secrets_key=f"{Fernet.generate_key().decode()},{key}"))
    finally:
        await redis.aclose()


async def test_secrets_kept_unencrypted_are_encrypted_with_productions_key(tmp_path, redis_url):  # noqa: F811
    store = SqliteStateStore(SqliteDatabase(tmp_path / "state.sqlite3"))  # (no REWARDS_SECRETS_KEY: kept plain)
    project = await store.create_project("plain")
    await store.put_claim_signer(project, StoredSigner("0x" + "ab" * 20, sealing.seal(b"\x01" * 32, [])))
    await store.close()
    key = Fernet.generate_key().decode()
    redis = await open_redis(redis_url, decode_responses=True)
    try:
        await copy_state(tmp_path / "state.sqlite3", redis, Settings(secrets_key=key))
        sealed = await redis.hget(ProjectKeys(project).claim_signer(), "sealed_key")
        assert sealing.is_encrypted(sealed) and sealing.unseal(sealed, [key]) == b"\x01" * 32
    finally:
        await redis.aclose()
