"""What a handler of one record type does for a delivery, and what it is given: its project's state, read once per
delivery, and the delivery's writes to add to."""

from dataclasses import dataclass, field
from decimal import Decimal

from rewards.adapters import dedup_archive
from rewards.domain import payouts as engine
from rewards.domain.allotment import Limits
from rewards.domain.payout_config import EMPTY_CONFIG
from rewards.domain.payouts import User
from rewards.domain.timestamps import now_ms
from rewards.ports import StateStore, Warehouse
from schemas.clickhouse.values import ch_datetime
from stream_workers import rows
from stream_workers.writes import Writes


@dataclass
class Referrals:
    """What the warehouse holds of a project's referrals for a delivery's code uses (counted on as uses are added)."""

    uses: dict[str, int] = field(default_factory=dict)  # uses of each code used in the delivery
    referred: set[User] = field(default_factory=set)  # users of the delivery already referred


@dataclass
class Project:
    """What a delivery's records need of their project's state, read once per delivery (each handler's `plan`)."""

    rules: engine.Rules  # the project's configuration, looked up once per delivery
    # The conversions' (handlers/conversion.py):
    chains: dict[User, list[User]] = field(default_factory=dict)  # the referrers of the users whose conversions pay
    tiers: dict[User, str | None] = field(default_factory=dict)  # the tier of each level-1 referrer among them
    codes: dict[User, str] = field(default_factory=dict)  # the code each referred user among them was referred through
    rebates: dict[str, Decimal] = field(default_factory=dict)  # the rebate rates of those codes that have one
    # The code uses' (handlers/code_use.py), which a referral removed changes too:
    referrals: Referrals = field(default_factory=Referrals)
    # API.md §8, for both: the users whose payouts the delivery computes (each handler's plan adds its own), and
    # those of them on the blocklist (read once they are all known: stream_workers.projects).
    screened: set[User] = field(default_factory=set)
    blocklisted: set[User] = field(default_factory=set)
    # The tracking ids of the referred users and their referrers among them (the self-referral signal).
    tracking: dict[User, set[str]] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)  # its caps and budgets (API.md §8)
    # The reversals' (handlers/reversal.py): what each reversed event paid, by dedup_id, and the events set aside.
    reversing: dict = field(default_factory=dict)
    set_aside_events: set[str] = field(default_factory=set)
    # The decisions' (handlers/payout_decision.py): the reversed share of each approved payout's event.
    reversed_before_approval: dict[str, Decimal] = field(default_factory=dict)


class Waiting(Exception):
    """A record that needs another partition's record written first (a reversal whose event, spread by user, is
    accepted but not yet written: schemas.topics): its delivery is written again shortly, after the others'
    (stream_workers.faust_app), never set aside."""


@dataclass(frozen=True)
class Unusable:
    """A project whose stored configuration cannot be read (stored before today's checks)."""

    reason: str


def usable(project: Project | Unusable) -> Project:
    """The project's state; a project whose configuration cannot be read pays nothing."""
    return project if isinstance(project, Project) else Project(engine.Rules(EMPTY_CONFIG))


class Handler:
    """What the worker does with the records of one type: the table `stream_workers.handlers.HANDLERS`."""

    record_type: type
    pays = False  # paid under the project's configuration: set aside when that cannot be read
    reads_project = True  # its project's state is read for it

    def written_key(self, record) -> tuple[str, str] | None:
        """(kind, id) of a record that must be written once, as `dedup_ids` holds it; None: not such a record."""
        return None

    def written_at(self, record) -> int:
        """The time of its `dedup_ids` row (its window)."""
        return now_ms()

    def key(self, record) -> tuple[str, str] | None:
        """What `dedup_ids` holds of the record once written: its `written_key`; a record replayed from the dead
        letters (schemas.records.REPLAY) is written once under its replay instead (its own key may be there already,
        as set aside)."""
        key = self.written_key(record)
        if key is None or not record.replay:
            return key
        return dedup_archive.REPLAY, f"{key[0]}:{key[1]}:{record.replay}"

    def written_row(self, record, failed: bool = False) -> dict:
        """The record's `dedup_ids` row: what tells a later delivery that it was written (a replay's is dated when it
        is written: its window starts then)."""
        kind, key = self.key(record)
        at = now_ms() if record.replay else self.written_at(record)
        return dedup_archive.row(record.project_id, kind, key, ch_datetime(at), failed)

    async def plan(
        self, project_id: str, project: Project, records: list, state: StateStore, warehouse: Warehouse
    ) -> None:
        """Read into `project` what `records` (this type's of the project, maybe none) need of its state."""

    def refusal(self, record, project: Project | Unusable | None) -> str | None:
        """Why the record is set aside before it is computed; None: it is computed."""
        return project.reason if self.pays and isinstance(project, Unusable) else None

    def add(self, record, project: Project, writes: Writes, created: int) -> None:
        """Add the record's rows. Every row is computed first (that may raise), then added (that cannot): a record
        that fails leaves nothing behind, and is set aside whole."""
        raise NotImplementedError

    def dead_letter(self, record, reason: str, token: str, created: int) -> dict:
        return rows.dead_letter_row(record, reason, token, created)

    def set_aside(self, record, writes: Writes) -> None:
        """What else a record set aside writes besides its dead letter."""
