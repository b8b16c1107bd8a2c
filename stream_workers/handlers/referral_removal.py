"""A referral removed (API.md §7 deleteReferral): stored; its user may be referred again, in this delivery too."""

from rewards.adapters import dedup_archive
from rewards.domain.payouts import User
from schemas.entities import REFERRAL_REMOVAL
from schemas.records import ReferralRemovedRecord
from stream_workers import rows
from stream_workers.handlers.base import Project
from stream_workers.handlers.stored import Stored
from stream_workers.writes import Writes

referral_removal_row = rows.row_of(REFERRAL_REMOVAL, "referral_removal_row")


class ReferralRemoved(Stored):
    record_type, table = ReferralRemovedRecord, REFERRAL_REMOVAL.table

    def rows(self, record: ReferralRemovedRecord) -> list[dict]:
        return [referral_removal_row(record)]

    def written_key(self, record: ReferralRemovedRecord) -> tuple[str, str]:
        return dedup_archive.REFERRAL_REMOVED, record.id

    def add(self, record: ReferralRemovedRecord, project: Project, writes: Writes, created: int) -> None:
        super().add(record, project, writes, created)
        # A use of the same user later in the delivery is not refused for the referral removed (it is not one).
        project.referrals.referred.discard(User(record.user_identifier, record.user_identifier_type))
