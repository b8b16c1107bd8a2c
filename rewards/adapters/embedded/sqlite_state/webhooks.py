"""WebhookStore on SQLite: a row per endpoint (its document, the secret sealed inside)."""

import json
import sqlite3

from rewards.adapters.embedded.sqlite_state.base import SqliteStateBase
from rewards.domain import webhooks
from rewards.domain.webhooks import MAX_ENDPOINTS, Endpoint, TooManyEndpoints


class SqliteWebhookStore(SqliteStateBase):
    async def create_webhook(self, project_id: str, endpoint: Endpoint) -> None:
        def create(c: sqlite3.Connection) -> None:
            count = c.execute("SELECT count(*) FROM webhook_endpoints WHERE project_id = ?", (project_id,)).fetchone()
            if count[0] >= MAX_ENDPOINTS:
                raise TooManyEndpoints()
            c.execute(
                "INSERT INTO webhook_endpoints (project_id, id, document, created_ms) VALUES (?, ?, ?, ?)",
                (project_id, endpoint.id, json.dumps(webhooks.to_json(endpoint)), endpoint.created_ms),
            )

        async with self._db.transaction():
            await self._db.run(create)

    async def list_webhooks(self, project_id: str) -> list[Endpoint]:
        rows = await self._db.run(
            lambda c: c.execute(
                "SELECT document FROM webhook_endpoints WHERE project_id = ? ORDER BY created_ms, id", (project_id,)
            ).fetchall()
        )
        return [webhooks.from_json(json.loads(row[0])) for row in rows]

    async def get_webhook(self, project_id: str, endpoint_id: str) -> Endpoint | None:
        row = await self._db.run(
            lambda c: c.execute(
                "SELECT document FROM webhook_endpoints WHERE project_id = ? AND id = ?", (project_id, endpoint_id)
            ).fetchone()
        )
        return None if row is None else webhooks.from_json(json.loads(row[0]))

    async def put_webhook(self, project_id: str, endpoint: Endpoint) -> bool:
        document = json.dumps(webhooks.to_json(endpoint))
        cursor = await self._db.run(
            lambda c: c.execute(
                "UPDATE webhook_endpoints SET document = ? WHERE project_id = ? AND id = ?",
                (document, project_id, endpoint.id),
            )
        )
        return cursor.rowcount == 1

    async def delete_webhook(self, project_id: str, endpoint_id: str) -> bool:
        cursor = await self._db.run(
            lambda c: c.execute(
                "DELETE FROM webhook_endpoints WHERE project_id = ? AND id = ?", (project_id, endpoint_id)
            )
        )
        return cursor.rowcount == 1
