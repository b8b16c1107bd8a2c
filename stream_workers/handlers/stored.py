"""Records stored as they are, paying nothing: a state change (codes created, an affiliate, a claim check's new
state) or a tracking event (API.md §7: its clicks and attributions are the views' figures)."""

from rewards.adapters import dedup_archive
from schemas.entities import AFFILIATE, CLAIM_CHECK, CODES_CREATED, TRACKING_EVENT
from schemas.records import AffiliateRecord, ClaimCheckRecord, CodesCreatedRecord, TrackingEventRecord
from stream_workers import rows
from stream_workers.handlers.base import Handler, Project
from stream_workers.writes import Writes

code_rows = rows.row_of(CODES_CREATED, "code_rows")
affiliate_row = rows.row_of(AFFILIATE, "affiliate_row")
claim_check_record_row = rows.row_of(CLAIM_CHECK, "claim_check_record_row")
tracking_event_row = rows.row_of(TRACKING_EVENT, "tracking_event_row")


class Stored(Handler):
    """A record whose rows are `rows(record)` in `table`, and its `dedup_ids` row if it has a written key."""

    table: str

    def rows(self, record) -> list[dict]:
        raise NotImplementedError

    def add(self, record, project: Project, writes: Writes, created: int) -> None:
        new_rows = self.rows(record)
        written = None if self.written_key(record) is None else self.written_row(record)
        writes.rows[self.table] += new_rows
        if written is not None:
            writes.rows["dedup_ids"].append(written)


class CodesCreated(Stored):
    record_type, table = CodesCreatedRecord, CODES_CREATED.table

    def rows(self, record: CodesCreatedRecord) -> list[dict]:
        return code_rows(record)  # one per code

    def written_key(self, record: CodesCreatedRecord) -> tuple[str, str] | None:
        return (dedup_archive.CODES_CREATED, record.codes[0]) if record.codes else None


class Affiliate(Stored):
    record_type, table = AffiliateRecord, AFFILIATE.table

    def rows(self, record: AffiliateRecord) -> list[dict]:
        return [affiliate_row(record)]

    def written_key(self, record: AffiliateRecord) -> tuple[str, str]:
        return dedup_archive.AFFILIATE, record.id


class ClaimCheck(Stored):
    """Snapshots, not written once: the warehouse keeps the latest version of each check."""

    record_type, table = ClaimCheckRecord, CLAIM_CHECK.table

    def rows(self, record: ClaimCheckRecord) -> list[dict]:
        return [claim_check_record_row(record)]


class TrackingEvent(Stored):
    record_type, table = TrackingEventRecord, TRACKING_EVENT.table

    def rows(self, record: TrackingEventRecord) -> list[dict]:
        return [tracking_event_row(record)]
