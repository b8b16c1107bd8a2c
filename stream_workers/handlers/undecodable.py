"""What could not be read as a record: set aside as a dead letter, never retried (computing would fail again)."""

from schemas import records
from stream_workers import rows
from stream_workers.handlers.base import Handler, Project, Unusable


class Undecodable(Handler):
    record_type = records.Undecodable
    reads_project = False  # it may name none, or one it does not belong to

    def refusal(self, record: records.Undecodable, project: Project | Unusable | None) -> str:
        return record.reason

    def dead_letter(self, record: records.Undecodable, reason: str, token: str, created: int) -> dict:
        return rows.set_aside_row(record.project_id, "undecodable", "", record.payload, reason, token, created)
