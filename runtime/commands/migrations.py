"""The warehouse's migrations (`migrate`) and the one-off `bound-redis-keys`."""

import asyncio
import sys
from pathlib import Path
from typing import Annotated

import typer

from runtime.commands.common import DEFAULT_DATA_DIR, DataDir, emit, fail

app = typer.Typer()


def _migration_warehouse(data_dir: Path):
    """What `migrate --status` and `--to` work on: the ClickHouse server of CLICKHOUSE_URL when set, else the
    embedded warehouse of `data_dir` (not while `rewards serve` runs on it: chdb holds its directory)."""
    from rewards.settings import Settings
    from runtime.wiring import open_warehouse

    settings = Settings()
    if settings.clickhouse_url:
        return "clickhouse", lambda: open_warehouse(settings.clickhouse_url, settings, with_nodes=True)
    path = data_dir / "warehouse"
    if not path.is_dir():
        fail(f"no embedded warehouse at {path} (set CLICKHOUSE_URL for the production shape's)")

    async def open_embedded():
        from rewards.adapters.migrations import MigrationError

        try:
            return await open_warehouse(f"chdb:///{path}", settings)
        except RuntimeError as exc:  # chdb's: most likely a `rewards serve` holds the directory
            raise MigrationError(f"cannot open the embedded warehouse at {path} (is `rewards serve` running on it?): "
                                 f"{exc}") from exc  # fmt: skip

    return "embedded", open_embedded


@app.command()
def migrate(
    status: Annotated[
        bool, typer.Option("--status", help="Print the applied and pending migrations; change nothing.")
    ] = False,
    to: Annotated[
        int | None,
        typer.Option(
            "--to",
            min=0,
            metavar="VERSION",
            help="Go up or down to this version (down only where migrations have down steps).",
        ),
    ] = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Create the events topic and bring the ClickHouse tables and views to the latest migration (idempotent).

    --status and --to work on the warehouse alone: CLICKHOUSE_URL's, else the embedded one of --data-dir."""
    from rewards.adapters import migrations
    from rewards.adapters.production.migrate import migrate as run_migrate
    from rewards.settings import Settings

    if status and to is not None:
        fail("--status and --to go alone")
    if not status and to is None:
        try:
            emit(asyncio.run(run_migrate(Settings())))
        except migrations.MigrationError as exc:
            fail(str(exc))
        return
    kind, open_warehouse = _migration_warehouse(data_dir)

    async def run():
        warehouse = await open_warehouse()
        try:
            if status:
                return await migrations.status(warehouse)
            return (await migrations.migrate(warehouse, target=to, progress=True)).summary()
        finally:
            await warehouse.close()

    try:
        emit({"warehouse": kind, **asyncio.run(run())})
    except migrations.MigrationError as exc:
        fail(str(exc))


@app.command("bound-redis-keys")
def bound_redis_keys() -> None:
    """Give a TTL to the dedup keys and event-name sets an install made before the dedup windows (production
    shape, REDIS_URL): a one-off after upgrading, safe beside running services (docs/operations.md, "Windows")."""
    from tqdm import tqdm

    from rewards.settings import Settings
    from runtime.wiring import open_state

    settings = Settings()
    if not settings.redis_url:
        fail("bound-redis-keys works on the production shape's Redis: set REDIS_URL")

    async def run() -> int:
        state = await open_state(settings.redis_url, settings)
        try:
            with tqdm(total=await state.key_count(), desc="scanning", unit="key", file=sys.stderr) as bar:
                return await state.bound_unexpiring_keys(scanned=bar.update)
        finally:
            await state.close()

    emit({"bounded": asyncio.run(run())})
