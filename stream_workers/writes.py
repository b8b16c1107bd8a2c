"""What a delivery writes: each table's rows, then what the state store learns once they are written."""

from collections import defaultdict
from dataclasses import dataclass, field

from rewards.domain.claim_checks import ClaimCheck
from stream_workers.rows import SourceRows


@dataclass
class Writes:
    rows: dict[str, list[dict]] = field(default_factory=lambda: defaultdict(list))
    processed: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    failed: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # conversions set aside
    new_checks: dict[str, list[ClaimCheck]] = field(default_factory=lambda: defaultdict(list))
    payouts: int = 0

    def add_payouts(self, project_id: str, source: SourceRows) -> None:
        """A record's payouts: those paid, the claim checks (with their rows) of those in an on-chain currency, and
        those rejected."""
        self.rows["payouts"] += source.paid
        self.rows["rejected_payouts"] += source.rejected
        self.payouts += len(source.paid)
        for check, check_row in source.checks:
            self.rows["claim_checks"].append(check_row)
            self.new_checks[project_id].append(check)
