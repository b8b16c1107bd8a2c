"""ProjectStore on SQLite: projects, their API keys, their payout configuration and claim signer."""

import json
import uuid
from collections.abc import Sequence

from rewards.adapters.embedded.sqlite_state.base import SqliteStateBase
from rewards.domain import keys
from rewards.domain.claim_signing import StoredSigner
from rewards.domain.payout_config import EMPTY_CONFIG, PayoutConfig
from rewards.domain.timestamps import now_ms
from rewards.ports import KeyInfo, Principal, ProjectInfo


class SqliteProjectStore(SqliteStateBase):
    """The reference adapter of rewards.ports.ProjectStore."""

    async def create_project(self, name: str) -> str:
        project_id = uuid.uuid4().hex
        await self._db.run(
            lambda c: c.execute(
                "INSERT INTO projects (id, name, created_ms) VALUES (?, ?, ?)", (project_id, name, now_ms())
            )
        )
        return project_id

    async def delete_project(self, project_id: str) -> bool:
        cursor = await self._db.run(
            lambda c: c.execute(
                "UPDATE projects SET deleted_ms = ? WHERE id = ? AND deleted_ms IS NULL", (now_ms(), project_id)
            )
        )
        return cursor.rowcount == 1

    async def project_exists(self, project_id: str) -> bool:
        row = await self._db.run(
            lambda c: c.execute("SELECT 1 FROM projects WHERE id = ? AND deleted_ms IS NULL", (project_id,)).fetchone()
        )
        return row is not None

    async def get_project(self, project_id: str) -> ProjectInfo | None:
        row = await self._db.run(
            lambda c: c.execute(
                "SELECT id, name, created_ms, deleted_ms FROM projects WHERE id = ?", (project_id,)
            ).fetchone()
        )
        return None if row is None else _project(row)

    async def list_projects(self) -> list[ProjectInfo]:
        query = "SELECT id, name, created_ms, deleted_ms FROM projects ORDER BY created_ms, id"
        rows = await self._db.run(lambda c: c.execute(query).fetchall())
        return [_project(row) for row in rows]

    async def list_keys(self, project_id: str) -> list[KeyInfo]:
        rows = await self._db.run(
            lambda c: c.execute(
                "SELECT id, scopes, created_ms, revoked_ms FROM api_keys WHERE project_id = ? ORDER BY created_ms, id",
                (project_id,),
            ).fetchall()
        )
        return [KeyInfo(r["id"], tuple(json.loads(r["scopes"])), r["created_ms"], r["revoked_ms"]) for r in rows]

    async def revoke_key_id(self, key_id: str) -> bool:
        cursor = await self._db.run(
            lambda c: c.execute(
                "UPDATE api_keys SET revoked_ms = ? WHERE id = ? AND revoked_ms IS NULL", (now_ms(), key_id)
            )
        )
        return cursor.rowcount == 1

    async def create_key(self, project_id: str, scopes: Sequence[str]) -> str:
        api_key, key_id, secret_hash = keys.new_key()
        await self._db.run(
            lambda c: c.execute(
                "INSERT INTO api_keys (id, project_id, secret_hash, scopes, created_ms) VALUES (?, ?, ?, ?, ?)",
                (key_id, project_id, secret_hash, json.dumps(sorted(set(scopes))), now_ms()),
            )
        )
        return api_key

    async def revoke_key(self, api_key: str) -> bool:
        principal = await self.resolve_key(api_key)
        if principal is None:
            return False
        await self._db.run(
            lambda c: c.execute("UPDATE api_keys SET revoked_ms = ? WHERE id = ?", (now_ms(), principal.key_id))
        )
        return True

    async def resolve_key(self, api_key: str) -> Principal | None:
        parts = keys.split_key(api_key)
        if parts is None:
            return None
        key_id, secret = parts
        row = await self._db.run(
            lambda c: c.execute(
                "SELECT k.project_id, k.secret_hash, k.scopes, p.deleted_ms FROM api_keys k "
                "JOIN projects p ON p.id = k.project_id WHERE k.id = ? AND k.revoked_ms IS NULL",
                (key_id,),
            ).fetchone()
        )
        if row is None or not keys.secret_matches(secret, row["secret_hash"]):
            return None
        return Principal(key_id, row["project_id"], frozenset(json.loads(row["scopes"])), row["deleted_ms"] is not None)

    async def get_config(self, project_id: str) -> PayoutConfig:
        row = await self._db.run(
            lambda c: c.execute("SELECT document FROM configs WHERE project_id = ?", (project_id,)).fetchone()
        )
        return EMPTY_CONFIG if row is None else PayoutConfig.model_validate_json(row["document"])

    async def put_config(self, project_id: str, config: PayoutConfig) -> None:
        document = config.model_dump_json()
        await self._db.run(
            lambda c: c.execute(
                "INSERT INTO configs (project_id, document, updated_ms) VALUES (?, ?, ?) ON CONFLICT (project_id) "
                "DO UPDATE SET document = excluded.document, updated_ms = excluded.updated_ms",
                (project_id, document, now_ms()),
            )
        )

    async def put_claim_signer(self, project_id: str, signer: StoredSigner | None) -> None:
        if signer is None:
            await self._db.run(lambda c: c.execute("DELETE FROM claim_signers WHERE project_id = ?", (project_id,)))
            return
        await self._db.run(
            lambda c: c.execute(
                "INSERT INTO claim_signers (project_id, address, sealed_key, updated_ms) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (project_id) DO UPDATE SET address = excluded.address, sealed_key = excluded.sealed_key, "
                "updated_ms = excluded.updated_ms",
                (project_id, signer.address, signer.sealed_key, now_ms()),
            )
        )

    async def get_claim_signer(self, project_id: str) -> StoredSigner | None:
        row = await self._db.run(
            lambda c: c.execute(
                "SELECT address, sealed_key FROM claim_signers WHERE project_id = ?", (project_id,)
            ).fetchone()
        )
        return None if row is None else StoredSigner(address=row["address"], sealed_key=row["sealed_key"])


def _project(row) -> ProjectInfo:
    return ProjectInfo(row["id"], row["name"], row["created_ms"], row["deleted_ms"])
