"""The embedded default's data dir is held by one process at a time: `rewards serve`, or a command working on the
engines' files while no server runs (`rewards backup`, `rewards restore`)."""

import fcntl
from pathlib import Path

LOCK_FILE = "serve.lock"


class DataDirInUse(RuntimeError):
    pass


def lock_data_dir(data_dir: Path):
    """Hold the data directory for this process (released when it exits, however it exits, or when the returned file
    is closed): a second server on it would fail deep inside chdb with a traceback; this says it in one line, before
    anything starts."""
    data_dir.mkdir(parents=True, exist_ok=True)
    lock = open(data_dir / LOCK_FILE, "a")  # noqa: SIM115  # held open for the life of the process
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise DataDirInUse(f"another `rewards serve` is running on {data_dir.resolve()}") from None
    return lock
