"""A process's index among the live ingest processes of one instance on this machine: a lock file each,
`flock`ed for the process's life (the kernel releases it however the process dies), so a restarted process takes
its dead predecessor's index, and with it its Kafka transactional ids (rewards.adapters.production.kafka_log).

The files live in REWARDS_RUNTIME_DIR, else systemd's RUNTIME_DIRECTORY (`RuntimeDirectory=`), else the temp dir.
A temp dir is cleaned by age (systemd-tmpfiles: files untouched for 10 days), and a lock on a removed file guards
nothing: a new process would create the path again and take the same index. So a held file is touched every
KEEP_S, and if it was removed all the same, created and locked again (or, if another process took it meanwhile,
reported: `rewards_process_index_lost_total`, an error log).
"""

import fcntl
import os
import re
import tempfile
from dataclasses import dataclass

import structlog
from prometheus_client import Counter

log = structlog.get_logger(__name__)

KEEP_S = 600.0  # how often a held lock file is touched and checked
MAX_INDEX = 4096

LOST = Counter(
    "rewards_process_index_lost_total",
    "Process index lock files removed and taken by another process: two live processes share transactional ids",
)


def lock_dir() -> str:
    from rewards.settings import Settings

    configured = Settings().runtime_dir
    return str(configured) if configured else os.environ.get("RUNTIME_DIRECTORY") or tempfile.gettempdir()


@dataclass
class ProcessIndex:
    index: int
    path: str
    fd: int

    @classmethod
    def claim(cls, instance: str, directory: str | None = None) -> "ProcessIndex":
        """The lowest index no live process of `instance` holds in `directory`."""
        directory = directory or lock_dir()
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", instance)
        for index in range(MAX_INDEX):
            path = os.path.join(directory, f"rewards-ingest-{name}-{index}.lock")
            fd = _lock(path)
            if fd is not None:
                return cls(index, path, fd)
        raise RuntimeError(f"no free process index for ingest instance {instance!r} in {directory}")

    def keep(self) -> bool:
        """Touch the file (age-based cleaners pass it by) and make sure the path is still the file this process
        holds; False if it was removed and another process now holds the path."""
        os.utime(self.fd)
        if _same_file(self.path, self.fd):
            return True
        fd = _lock(self.path)
        if fd is None:
            LOST.inc()
            log.error("process index lock file removed and taken by another process", path=self.path)
            return False
        os.close(self.fd)
        self.fd = fd
        log.warning("process index lock file was removed: created and locked again", path=self.path)
        return True

    def release(self) -> None:
        os.close(self.fd)


def _lock(path: str) -> int | None:
    """A descriptor of `path` locked by this process, or None if another process holds it (or it is not ours)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o666)
    except OSError:
        return None  # e.g. another user's file: not ours to take
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)  # held by a live process
        return None
    if not _same_file(path, fd):  # removed (and maybe created again) between our open and our lock
        os.close(fd)
        return _lock(path)
    return fd


def _same_file(path: str, fd: int) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False
