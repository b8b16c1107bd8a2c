"""`rewards move-to-production`: an embedded data dir copied into the production engines (runtime/moving)."""

import asyncio
import sys

import typer

from runtime.commands.common import DEFAULT_DATA_DIR, DataDir, emit, fail

app = typer.Typer()


@app.command("move-to-production")
def move_to_production(data_dir: DataDir = DEFAULT_DATA_DIR) -> None:
    """Copy the embedded default's data dir into the production engines: its warehouse into CLICKHOUSE_URL's server
    and its state into REDIS_URL's Redis, after `rewards migrate` (KAFKA_BOOTSTRAP_SERVERS' topic empty, the tables
    empty, the Redis holding none of its projects). Run it with `rewards serve` stopped and its log drained
    (docs/operations.md, "Moving to production"). Prints the rows copied per table."""
    from tqdm import tqdm

    from rewards.settings import Settings
    from runtime.data_dir import DataDirInUse, lock_data_dir
    from runtime.moving import MoveRefused
    from runtime.moving import move_to_production as move
    from runtime.wiring import state_path

    settings = Settings(data_dir=data_dir)
    if not state_path(data_dir).exists():  # (before the lock, which would make the folder)
        fail(f"no embedded data at {data_dir.resolve()}: pass the folder `rewards serve` uses")
    try:
        lock = lock_data_dir(data_dir)
    except DataDirInUse:
        fail(f"`rewards serve` is running on {data_dir.resolve()}: stop it first (a move copies a data dir at rest)")
    with lock, tqdm(desc="moving", unit=" rows", unit_scale=True, file=sys.stderr, disable=None) as bar:

        def moved(part: str, table: str, rows: int) -> None:
            bar.set_postfix_str(f"{part}: {table}")
            bar.update(rows)

        try:
            emit(asyncio.run(move(data_dir, settings, moved)))
        except MoveRefused as exc:
            fail(str(exc))
