"""`rewards backup` and `rewards restore`: the embedded default's data dir copied while it serves, and made again from
a copy (runtime/backups.py). With a `rewards serve` running on the data dir, the serving process takes the backup (it
holds the warehouse's folder), asked through a request file; without one, the command takes it itself."""

import asyncio
import time
from pathlib import Path
from typing import Annotated

import typer

from runtime.commands.common import DEFAULT_DATA_DIR, DataDir, emit, fail

app = typer.Typer()
WAIT_S = 3600  # a backup of the largest data dirs measured takes seconds; an hour means the server is stuck
TAKEN_WITHIN_S = 30  # the server looks for requests every half second


@app.command()
def backup(
    out: Annotated[Path, typer.Option("--out", metavar="DIR", help="A new folder to write the backup into.")],
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Back up the embedded default's data dir into --out (a new folder), while `rewards serve` serves or not: its
    warehouse (ClickHouse's BACKUP) and its state (SQLite's online backup), consistent with each other. Prints what
    was written."""
    from runtime import backups
    from runtime.data_dir import DataDirInUse, lock_data_dir

    if not backups.state_files(data_dir):
        fail(f"no data in {data_dir.resolve()}: pass the folder `rewards serve` uses (--data-dir or REWARDS_DATA_DIR)")
    out = out.resolve()
    try:
        backups.check_target(out)
        lock = lock_data_dir(data_dir)
    except backups.BackupError as exc:
        fail(str(exc))
    except DataDirInUse:
        emit(_ask_the_server(data_dir, out))
        return
    with lock:
        try:
            emit(asyncio.run(_backup_here(data_dir, out)))
        except backups.BackupError as exc:
            fail(str(exc))


async def _backup_here(data_dir: Path, out: Path) -> dict:
    from rewards.adapters.embedded.chdb_warehouse import ChdbWarehouse
    from runtime import backups

    warehouse = ChdbWarehouse(data_dir / backups.WAREHOUSE)
    try:
        return await backups.write_backup(warehouse, data_dir, out, asyncio.Lock())
    finally:
        await warehouse.close()


def _ask_the_server(data_dir: Path, out: Path) -> dict:
    """Write a request for the serving process and follow its progress (the bytes written so far, against the data
    dir's size) until it answers."""
    from tqdm import tqdm

    from runtime import backups

    request = backups.Request.make(data_dir, out)
    expected = sum(backups.folder_bytes(p) if p.is_dir() else p.stat().st_size
                   for p in [data_dir / backups.WAREHOUSE, *backups.state_files(data_dir)])  # fmt: skip
    asked = time.monotonic()
    try:
        with tqdm(total=expected, unit="B", unit_scale=True, disable=None) as bar:
            while (status := request.status() or {}).get("status") not in ("done", "failed"):
                _check_the_server(data_dir, request, asked)
                bar.n = min(expected, backups.folder_bytes(backups.partial(out)))
                bar.refresh()
                time.sleep(0.2)
            bar.n = expected
    finally:  # answered, failed or interrupted: the request is not left for a later server to find
        request.path.unlink(missing_ok=True)
        request.status_path.unlink(missing_ok=True)
    if status["status"] == "failed":
        fail(status["error"])
    return {key: value for key, value in status.items() if key != "status"}


def _check_the_server(data_dir: Path, request, asked: float) -> None:
    from runtime.data_dir import DataDirInUse, lock_data_dir

    waited = time.monotonic() - asked
    if waited > TAKEN_WITHIN_S and request.path.exists():
        fail(f"the server running on {data_dir.resolve()} did not take the request in {TAKEN_WITHIN_S} s (a server"
             " of an older version, or one that cannot read its requests folder: see its log)")  # fmt: skip
    if waited > WAIT_S:
        fail(f"the server has not answered in {WAIT_S} s")
    try:  # a free lock: no server any more
        lock_data_dir(data_dir).close()
    except DataDirInUse:
        return
    fail("`rewards serve` stopped before the backup was written")


@app.command()
def restore(
    source: Annotated[Path, typer.Option("--from", metavar="DIR", help="A folder `rewards backup` wrote.")],
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Make a new data dir (or fill an empty one) from a backup; then `rewards serve --data-dir` it (an older backup
    is migrated forward as the server starts)."""
    from runtime import backups
    from runtime.data_dir import DataDirInUse, lock_data_dir

    try:
        backups.read_manifest(source)
        with lock_data_dir(data_dir):
            emit(asyncio.run(backups.restore_backup(source.resolve(), data_dir.resolve())))
    except (backups.BackupError, DataDirInUse) as exc:
        fail(str(exc))
