"""What a delivery writes: each table's rows, then what the state store learns once they are written."""

from collections import defaultdict
from dataclasses import dataclass, field

from rewards.domain.allotment import Limits
from rewards.domain.claim_checks import ClaimCheck
from rewards.domain.integrity import Rejection
from rewards.domain.payouts import Payout
from stream_workers import rows
from stream_workers.rows import PayoutSource, SourceRows


@dataclass(frozen=True)
class Capped:
    """A source's payouts waiting for caps and budgets to allot them (stream_workers.allot) before they become rows."""

    source: PayoutSource
    payouts: list[Payout]
    verdicts: list[Rejection | None] | None
    created_ms: int


@dataclass
class Writes:
    rows: dict[str, list[dict]] = field(default_factory=lambda: defaultdict(list))
    processed: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    failed: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # conversions set aside
    new_checks: dict[str, list[ClaimCheck]] = field(default_factory=lambda: defaultdict(list))
    capped: dict[str, list[Capped]] = field(default_factory=lambda: defaultdict(list))
    allotted: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # tokens whose grants are kept
    payouts: int = 0

    def add_source(
        self,
        source: PayoutSource,
        payouts: list[Payout],
        created_ms: int,
        verdicts: list[Rejection | None] | None,
        limits: Limits,
    ) -> None:
        """A record's payouts: their rows now, or, if caps or budgets govern one of their currencies, once allotted."""
        if limits and any(limits.key_if_governed(payout.currency) is not None for payout in payouts):
            self.capped[source.project_id].append(Capped(source, payouts, verdicts, created_ms))
        else:
            self.add_payouts(source.project_id, rows.source_rows(source, payouts, created_ms, verdicts))

    def add_payouts(self, project_id: str, source: SourceRows) -> None:
        """A record's payout rows: those paid, the claim checks (with their rows) of those in an on-chain currency, and
        those rejected."""
        self.rows["payouts"] += source.paid
        self.rows["rejected_payouts"] += source.rejected
        self.payouts += len(source.paid)
        for check, check_row in source.checks:
            self.rows["claim_checks"].append(check_row)
            self.new_checks[project_id].append(check)
