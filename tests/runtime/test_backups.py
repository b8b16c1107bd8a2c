"""`rewards backup` / `rewards restore` of the embedded default (issue 33 §4, docs/operations.md "Backups"): a backup
taken while batches keep coming holds every event accepted before it was asked for, each paid once; a restored data
dir serves the same figures and still knows every dedup id."""

import contextlib
import json
import shutil
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from tests.conftest import event, evm
from tests.support.cli import rewards
from tests.support.harness import Admin, Api, Server, eventually

CONFIG = {
    "default_tier": None,
    "tiers": [],
    "conversions": [{"event_name": "purchase", "base": {"fixed": "7"}, "end_user_reward": {"rate": "1"}}],
}
FAST = {"REWARDS_RATE_LIMITS": json.dumps({"events_batch": "100000/minute"})}
BATCH = 50


def rewards_process(*args: str) -> subprocess.CompletedProcess:
    """The command in a process of its own: it opens the warehouse's engine, one per process (chdb)."""
    return subprocess.run([sys.executable, "-m", "rewards", *args], capture_output=True, text=True, timeout=120)


def post_all(api: Api, dedup_ids: list[str]) -> int:
    """Post these events again, 100 a batch (the most a batch holds): how many the server did not know."""
    ingested = 0
    for start in range(0, len(dedup_ids), 100):
        events = [event(d, user=evm(0)) for d in dedup_ids[start : start + 100]]
        answer = api.post("/events/batch", json={"events": events})
        assert answer.status_code == 200, answer.text
        ingested += answer.json()["ingested_events"]
    return ingested


class Load:
    """Batches of new events posted one after the other until stopped; remembers when each was answered 200."""

    def __init__(self, api: Api):
        self.api, self.accepted, self.stop = api, [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        while not self.stop.is_set():
            events = [event(f"load-{n}-{i}", user=evm(i)) for i in range(BATCH)]
            answer = self.api.post("/events/batch", json={"events": events})
            assert answer.status_code == 200, answer.text
            self.accepted.append((time.monotonic(), [e["dedup_id"] for e in events]))
            n += 1

    def accepted_before(self, moment: float) -> list[str]:
        return [dedup_id for at, ids in list(self.accepted) if at < moment for dedup_id in ids]

    def all(self) -> list[str]:
        return [dedup_id for _, ids in self.accepted for dedup_id in ids]


@pytest.fixture(scope="module")
def backed_up(tmp_path_factory):
    """A server under load, backed up mid-way by the command line; the ids accepted before the backup was asked."""
    root = tmp_path_factory.mktemp("backups")
    server = Server(root / "data", FAST).start()
    try:
        admin = Admin(server)
        project = admin.project()
        key = admin.key(project, "service_role")
        with Api(server, key, project) as api:
            api.put("/projects/config", json=CONFIG)
            load = Load(api)
            load.thread.start()
            eventually(lambda: load.accepted[9], timeout_s=30)  # ten batches in
            asked = time.monotonic()
            done = rewards("backup", "--out", str(root / "backup"), data_dir=server.data_dir)
            time.sleep(0.5)  # batches keep coming after it too
            load.stop.set()
            load.thread.join(timeout=30)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    return root, project, key, load.accepted_before(asked), load.all(), json.loads(done.stdout)


def test_a_backup_taken_under_load_restores_every_accepted_event_paid_once(backed_up):
    root, project, key, before, everything, written = backed_up
    assert written["backup"] == str(root / "backup") and written["bytes"] > 0
    assert sorted(p.name for p in (root / "backup").iterdir()) == ["manifest.json", "state.sqlite3", "warehouse"]
    restored = rewards_process("restore", "--from", str(root / "backup"), "--data-dir", str(root / "restored"))
    assert restored.returncode == 0, restored.stderr
    assert json.loads(restored.stdout)["restored_from"] == str(root / "backup")

    server = Server(root / "restored", FAST).start()
    try:
        with Api(server, key, project) as api:
            api.settle()  # what the backup's warehouse lacked was in its outbox: written now, in the outbox's order
            paid = api.get("/payouts/summary", params={"currency": "point"}).json()["total_payouts"]
            assert post_all(api, before) == 0  # every event accepted before the backup was asked: known
            unknown = post_all(api, everything)  # (and from here on accepted anew)
            assert paid == str(7 * (len(everything) - unknown))  # each known one paid once
    finally:
        server.stop()
    assert len(before) >= 10 * BATCH


def test_a_backup_is_written_without_a_server_too_and_never_over_a_folder(backed_up):
    root = backed_up[0]
    offline = rewards_process("backup", "--out", str(root / "offline"), "--data-dir", str(root / "data"))
    assert offline.returncode == 0, offline.stderr
    assert json.loads(offline.stdout)["backup"] == str(root / "offline")

    again = rewards("backup", "--out", str(root / "offline"), data_dir=root / "data")
    assert again.returncode == 1
    assert json.loads(again.stderr) == {"error": f"{root / 'offline'} already exists: name a new folder"}


def test_restore_refuses_a_folder_in_use_or_not_a_backup(backed_up):
    root = backed_up[0]
    (root / "used").mkdir()
    (root / "used" / "state.sqlite3").write_bytes(b"")
    into_used = rewards_process("restore", "--from", str(root / "backup"), "--data-dir", str(root / "used"))
    assert into_used.returncode == 1
    assert json.loads(into_used.stderr) == {"error": f"{root / 'used'} is not empty: restore into a new folder"}

    not_one = rewards_process("restore", "--from", str(root / "used"), "--data-dir", str(root / "new"))
    assert not_one.returncode == 1
    assert "is not a backup of `rewards backup`" in json.loads(not_one.stderr)["error"]
    assert not (root / "new").exists()

    crafted = root / "crafted"
    shutil.copytree(root / "backup", crafted)
    manifest = json.loads((crafted / "manifest.json").read_text())
    (crafted / "manifest.json").write_text(json.dumps({**manifest, "state_files": ["../outside.sqlite3"]}))
    (root / "outside.sqlite3").write_bytes(b"copied out of the data dir")  # what the crafted name would copy
    refused = rewards_process("restore", "--from", str(crafted), "--data-dir", str(root / "deep" / "new"))
    assert refused.returncode == 1, refused.stdout
    assert "names state files that are not files of a data dir" in json.loads(refused.stderr)["error"]
    assert not (root / "deep").exists()  # (deep/new/../outside.sqlite3 is outside the data dir)


def test_a_delivery_read_and_not_written_is_never_backed_up_half(backed_up):
    """A delivery's tables are inserted one after the other, and ClickHouse's BACKUP keeps no insert tokens: a copy
    of a half-written delivery would be written again after a restore. Without a server, such a data dir is refused
    (a server writes the delivery first; with one, the backup waits for it)."""
    root = backed_up[0]
    shutil.copytree(root / "data", root / "planned")
    with contextlib.closing(sqlite3.connect(root / "planned" / "state.sqlite3")) as db:
        db.execute("INSERT INTO outbox_plan (id, first_id, last_id) VALUES (1, 1, 1)")
        db.commit()
    refused = rewards_process("backup", "--out", str(root / "half"), "--data-dir", str(root / "planned"))
    assert refused.returncode == 1, refused.stdout
    assert "a delivery read from the outbox is not written yet" in json.loads(refused.stderr)["error"]
    assert not (root / "half").exists() and not (root / "half.partial").exists()


def test_backup_of_a_folder_without_data_says_so(tmp_path):
    answer = rewards("backup", "--out", str(tmp_path / "b"), data_dir=tmp_path / "nothing")
    assert answer.returncode == 1
    assert "no data in" in json.loads(answer.stderr)["error"]
