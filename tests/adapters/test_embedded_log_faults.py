"""The embedded default's event log, the SQLite outbox, refusing writes: every endpoint that publishes
answers 503 and changes nothing, then the same requests succeed (tests/runtime/test_production_faults.py does
the same with the Kafka broker stopped).

The fault is the engine's own: a trigger makes SQLite abort every outbox insert of the test's project
(as a full disk or an I/O error would abort them), in the running `rewards serve`."""

import contextlib
import sqlite3
import uuid

import pytest

from runtime.wiring import state_path
from tests.conftest import SERVICE, event, evm
from tests.runtime.test_production_faults import CONFIG, Publishing, summary
from tests.support.harness import Admin, Api


@pytest.fixture
def api(embedded_server):
    admin = Admin(embedded_server)
    project = admin.project()
    with Api(embedded_server, admin.key(project, SERVICE), project) as client:
        yield client


@contextlib.contextmanager
def outbox_refusing(data_dir, project_id: str):
    """Every insert into the outbox for `project_id` fails in SQLite itself, until the block ends."""
    trigger = f"refuse_outbox_{uuid.uuid4().hex}"
    literal = project_id.replace("'", "''")
    with contextlib.closing(sqlite3.connect(state_path(data_dir), timeout=30, isolation_level=None)) as db:
        db.execute(
            f"CREATE TRIGGER {trigger} BEFORE INSERT ON outbox WHEN NEW.project_id = '{literal}' "
            "BEGIN SELECT RAISE(ABORT, 'the outbox refuses writes (test)'); END"
        )
        try:
            yield
        finally:
            db.execute(f"DROP TRIGGER {trigger}")


def test_outbox_refusing_every_publishing_endpoint_answers_503_changes_nothing_then_succeeds(api, embedded_server):
    api.put("/projects/config", json=CONFIG)
    events = [event(f"refused-{i}", user=evm(i)) for i in range(10)]
    publishing = Publishing(api, embedded_server)
    with outbox_refusing(embedded_server.data_dir, api.project_id):
        publishing.fail_and_change_nothing(events=lambda: api.post("/events/batch", json={"events": events}))
        assert api.get("/events/status", params={"dedup_id": "refused-0"}).json()["status"] == "not_found"
    assert api.post("/events/batch", json={"events": events}).json() == {"ingested_events": 10}
    publishing.succeed()
    api.wait_processed(*(e["dedup_id"] for e in events))
    assert summary(api) == "70"
