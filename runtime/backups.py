"""Backups of the embedded default (`rewards backup`, `rewards restore`): ClickHouse's own BACKUP of the warehouse and
SQLite's online backup of each state file, taken while `rewards serve` serves.

The serving process holds chdb's folder, so it takes the backup itself, asked through a request file in the data
dir (`requests/`; writing there needs the rights that reading the data needs anyway, so no network surface is
added). It holds its worker still for the moment of the copy: the warehouse first, then the state files, so that
every event the warehouse lacks is still in the state's outbox, and one accepted meanwhile is in the outbox too.
"""

import asyncio
import contextlib
import json
import os
import re
import shutil
import sqlite3
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import structlog

from rewards.adapters.embedded.chdb_warehouse import ChdbWarehouse
from runtime.data_dir import LOCK_FILE
from runtime.wiring import state_path

log = structlog.get_logger(__name__)

FORMAT = "rewards-embedded-backup/1"
MANIFEST = "manifest.json"
WAREHOUSE = "warehouse"  # the chdb folder's name, in a data dir and in a backup
REQUESTS = "requests"
WATCH_EVERY_S = 0.5
STATUS_KEPT_S = 86_400  # an answer nobody read is removed after a day
_FILE_NAME = re.compile(r"[A-Za-z0-9_.-]+\.sqlite3")
RETRY_WAIT_S = 60  # how long a backup waits for the worker to write a delivery it tries again


class BackupError(ValueError):
    pass


def state_files(data_dir: Path) -> list[Path]:
    """The embedded state's SQLite files (the state store with its outbox; the worker plans where present)."""
    return sorted(data_dir.glob("*.sqlite3"))


def partial(out: Path) -> Path:
    return out.with_name(out.name + ".partial")


def check_target(out: Path) -> None:
    if out.exists():
        raise BackupError(f"{out} already exists: name a new folder")
    if partial(out).exists():
        raise BackupError(f"{partial(out)} is left from a backup that did not finish: remove it, or name a new folder")
    if not out.parent.is_dir():
        raise BackupError(f"{out.parent} is not a folder")


async def write_backup(
    warehouse: ChdbWarehouse, data_dir: Path, out: Path, paused: asyncio.Lock, wait_s: float = 0
) -> dict:
    """Copy the warehouse, then the state files, into `out` (written as `out.partial`, renamed once whole), once no
    delivery is half-written (waiting up to `wait_s` for the worker to write one it is trying again)."""
    check_target(out)
    work = partial(out)
    work.mkdir()
    try:
        started = time.monotonic()
        await _hold_still(paused, data_dir, wait_s)  # the worker neither writes nor reads the outbox meanwhile
        try:
            await warehouse.backup_to(work / WAREHOUSE)
            files = [await asyncio.to_thread(_copy_sqlite, path, work / path.name) for path in state_files(data_dir)]
        finally:
            paused.release()
        manifest = {"format": FORMAT, "created_at": datetime.now(UTC).isoformat(), "state_files": files,
                    "seconds": round(time.monotonic() - started, 3)}  # fmt: skip
        (work / MANIFEST).write_text(json.dumps(manifest, indent=2))
        work.rename(out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return {"backup": str(out), "bytes": folder_bytes(out), **manifest}


async def _hold_still(paused: asyncio.Lock, data_dir: Path, wait_s: float) -> None:
    """Acquire `paused` at a moment no delivery is planned: a planned one (read, not committed) may be half-written
    (a delivery's tables are inserted one after the other), and ClickHouse's BACKUP keeps no insert tokens, so after
    a restore its tables written already would be written again. The caller releases it."""
    deadline = time.monotonic() + wait_s
    while True:
        await paused.acquire()
        if not await asyncio.to_thread(_delivery_planned, data_dir):
            return
        paused.release()
        if time.monotonic() >= deadline:
            raise BackupError(
                "a delivery read from the outbox is not written yet (the worker tries a failed one again: see the"
                " server's log; without a server, start `rewards serve` on the data dir to write it): back up after"
            )
        await asyncio.sleep(0.5)


def _delivery_planned(data_dir: Path) -> bool:
    read_only = f"{state_path(data_dir).resolve().as_uri()}?mode=ro"
    with contextlib.closing(sqlite3.connect(read_only, uri=True, timeout=30)) as db:
        try:
            return db.execute("SELECT count(*) FROM outbox_plan").fetchone()[0] > 0
        except sqlite3.OperationalError:  # a state older than the outbox: nothing planned
            return False


def _copy_sqlite(source: Path, target: Path) -> str:
    """SQLite's online backup: one consistent copy of the file, while other connections (and processes) write."""
    with (
        contextlib.closing(sqlite3.connect(source, timeout=30)) as src,
        contextlib.closing(sqlite3.connect(target)) as dst,
    ):
        src.backup(dst)
    return source.name


async def restore_backup(backup: Path, data_dir: Path) -> dict:
    """Make `data_dir` (new or empty) from `backup`; `rewards serve` migrates it forward if it is older."""
    manifest = read_manifest(backup)
    if data_dir.exists() and any(path.name != LOCK_FILE for path in data_dir.iterdir()):
        raise BackupError(f"{data_dir} is not empty: restore into a new folder")
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        for name in manifest["state_files"]:
            shutil.copyfile(backup / name, data_dir / name)
        warehouse = ChdbWarehouse(data_dir / WAREHOUSE)
        try:
            await warehouse.restore_from(backup / WAREHOUSE)
        finally:
            await warehouse.close()
    except BaseException:  # a state without its warehouse would serve as if everything were written: leave nothing
        for path in data_dir.iterdir():
            if path.is_dir():
                shutil.rmtree(path)
            elif path.name != LOCK_FILE:
                path.unlink()
        raise
    return {"data_dir": str(data_dir), "restored_from": str(backup), "created_at": manifest["created_at"]}


def read_manifest(backup: Path) -> dict:
    try:
        manifest = json.loads((backup / MANIFEST).read_text())
    except (OSError, ValueError):
        raise BackupError(f"{backup} is not a backup of `rewards backup` (no readable {MANIFEST})") from None
    if manifest.get("format") != FORMAT:
        raise BackupError(f"{backup} is a backup of another format ({manifest.get('format')!r}, not {FORMAT!r})")
    names = manifest.get("state_files")
    if not isinstance(names, list) or not all(isinstance(n, str) and _FILE_NAME.fullmatch(n) for n in names):
        raise BackupError(f"{backup}/{MANIFEST} names state files that are not files of a data dir")  # no ../ path
    return manifest


def folder_bytes(folder: Path) -> int:
    """The bytes of the files in `folder` (a backup being written: its files come and go as it is walked)."""
    total = 0
    for root, _, names in os.walk(folder):
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                total += os.stat(os.path.join(root, name)).st_size
    return total


# -- asking the serving process -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    path: Path

    @property
    def status_path(self) -> Path:
        return self.path.with_suffix(".status")

    @classmethod
    def make(cls, data_dir: Path, out: Path) -> "Request":
        folder = data_dir / REQUESTS
        folder.mkdir(exist_ok=True)
        request = cls(folder / f"backup-{uuid.uuid4().hex}.json")
        _write_atomically(request.path, {"kind": "backup", "out": str(out)})
        return request

    def status(self) -> dict | None:
        try:
            return json.loads(self.status_path.read_text())
        except (OSError, ValueError):
            return None

    def answer(self, status: dict) -> None:
        _write_atomically(self.status_path, status)


def _write_atomically(path: Path, value: dict) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(value))
    os.replace(temporary, path)


async def serve_requests(warehouse: ChdbWarehouse, data_dir: Path, paused: asyncio.Lock) -> None:
    """`rewards serve`'s task: takes each backup request written into `requests/` and answers it beside it."""
    folder = data_dir / REQUESTS
    while True:
        try:
            for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
                await _serve(Request(path), warehouse, data_dir, paused)
            _forget_old_answers(folder)
        except Exception:  # (a folder or file it may not write: logged, and the task goes on)
            log.exception("serving backup requests failed")
        await asyncio.sleep(WATCH_EVERY_S)


async def _serve(request: Request, warehouse: ChdbWarehouse, data_dir: Path, paused: asyncio.Lock) -> None:
    request.path.rename(taken := request.path.with_suffix(".taken"))  # once, even if answering fails below
    try:
        out = Path(json.loads(taken.read_text())["out"])
        if not out.is_absolute():  # relative to which folder? The command line resolves it against its own
            raise BackupError(f"{out} is not an absolute path")
        request.answer({"status": "running"})
        done = await write_backup(warehouse, data_dir, out, paused, RETRY_WAIT_S)
        request.answer({"status": "done", **done})
        log.info("backup written", backup=done["backup"], bytes=done["bytes"], seconds=done["seconds"])
    except Exception as exc:  # answered, never raised: one bad request must not stop the watcher
        log.exception("backup failed")
        request.answer({"status": "failed", "error": str(exc) or type(exc).__name__})
    finally:
        taken.unlink(missing_ok=True)


def _forget_old_answers(folder: Path) -> None:
    cutoff = time.time() - STATUS_KEPT_S
    for path in [*folder.glob("*.status"), *folder.glob("*.taken")] if folder.is_dir() else []:
        with contextlib.suppress(OSError):
            if path.stat().st_mtime < cutoff:
                path.unlink()
