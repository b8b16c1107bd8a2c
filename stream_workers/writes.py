"""What a delivery writes: each table's rows, then what the state store learns once they are written."""

from collections import defaultdict
from dataclasses import dataclass, field, replace
from decimal import Decimal

from rewards.domain import claim_checks
from rewards.domain.allotment import Limits, Tally
from rewards.domain.amounts import EXACT, format_amount
from rewards.domain.claim_checks import ClaimCheck
from rewards.domain.integrity import Rejection
from rewards.domain.payouts import Payout
from rewards.domain.reversals import TakeBack
from stream_workers import rows
from stream_workers.capped import Pending
from stream_workers.rows import PayoutSource, SourceRows


@dataclass
class Writes:
    rows: dict[str, list[dict]] = field(default_factory=lambda: defaultdict(list))
    processed: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    failed: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # conversions set aside
    new_checks: dict[str, list[ClaimCheck]] = field(default_factory=lambda: defaultdict(list))
    capped: dict[str, Pending] = field(default_factory=lambda: defaultdict(Pending))  # waiting for the allot step
    allotted: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # tokens whose grants are kept
    reversed: dict[str, dict[str, Decimal]] = field(default_factory=lambda: defaultdict(dict))  # event → share written
    # What reversals give back to caps and budgets, per project: one tally per user, side and currency (API.md §9).
    given_back: dict[str, dict[tuple, Tally]] = field(default_factory=lambda: defaultdict(dict))
    # Payouts held for an operator's approval, per project (their pending_payouts rows): the state store holds them.
    held: dict[str, list[dict]] = field(default_factory=lambda: defaultdict(list))
    # Reversals' token parts, per project: each with its reversing row (the claim check and the debt they touch).
    take_backs: dict[str, list[tuple[TakeBack, dict]]] = field(default_factory=lambda: defaultdict(list))
    payouts: int = 0

    def add_source(
        self,
        source: PayoutSource,
        payouts: list[Payout],
        created_ms: int,
        verdicts: list[Rejection | None] | None,
        limits: Limits,
        check_status: str = claim_checks.OPEN,
    ) -> None:
        """A record's payouts as rows, as if each were paid whole; those a cap or budget governs are tallied for the
        allot step (`capped`), which cuts their rows if it must (`cut_payouts`). `check_status`: of the claim checks
        its token payouts open (pending_acceptance where the project requires acceptance)."""
        self.add_payouts(source.project_id, rows.source_rows(source, payouts, created_ms, verdicts, check_status))
        if limits:
            self.capped[source.project_id].tally(payouts, verdicts, source.happened_at_ms, limits)

    def add_payouts(self, project_id: str, source: SourceRows) -> None:
        """A record's payout rows: those paid, the claim checks (with their rows) of those in an on-chain currency, and
        those rejected."""
        self.rows["payouts"] += source.paid
        self.rows["rejected_payouts"] += source.rejected
        if source.held:
            self.rows["pending_payouts"] += source.held
            self.held[project_id] += source.held
        self.payouts += len(source.paid)
        for check, check_row in source.checks:
            self.rows["claim_checks"].append(check_row)
            self.new_checks[project_id].append(check)

    def settle_checks(self, project_id: str, settled: list[int], created_ms: int) -> None:
        """The new checks' amounts less what each settled of its recipient's debt (API.md §9; in the order of
        `new_checks`): a check settled whole is not opened; each settled part is a `debts` row taking it off."""
        opened, changed = [], {}
        for check, units in zip(self.new_checks[project_id], settled, strict=True):
            if units:
                self.rows["debts"].append(rows.debt_row(project_id, check.user, check.currency, -units, check.id,
                                                        created_ms))  # fmt: skip
                check = changed[check.id] = replace(check, amount=check.amount - units)
            if check.amount:
                opened.append(check)
        self.new_checks[project_id] = opened
        if changed:
            kept = [row for row in self.rows["claim_checks"] if row["id"] not in changed]
            now = [rows.claim_check_row(project_id, check) for check in changed.values() if check.amount]
            self.rows["claim_checks"] = kept + now

    def cut_payouts(self, project_id: str, cuts: dict[int, tuple[Decimal, Rejection]]) -> None:
        """Cut paid rows (by their place in `rows["payouts"]`) to the part granted: a rejected row for the rest under
        the same id (API.md §8), the paid row kept for the part (dropped for none), its claim check alike. (Rare: a
        pass over the delivery's payout rows.)"""
        paid, checks = [], {}
        for place, row in enumerate(self.rows["payouts"]):
            if (cut := cuts.get(place)) is None:
                paid.append(row)
                continue
            part, rule = cut
            rest = EXACT.subtract(Decimal(row["amount"]), part)
            self.rows["rejected_payouts"].append({**row, "amount": format_amount(rest), "reason": rule})
            if part > 0:
                paid.append({**row, "amount": format_amount(part)})
            checks[claim_checks.check_id(project_id, row["payout_id"])] = part
        self.payouts -= len(self.rows["payouts"]) - len(paid)
        self.rows["payouts"] = paid
        opened = []
        for check in self.new_checks[project_id]:
            if (part := checks.get(check.id)) is None:
                opened.append(check)
            elif part > 0:
                opened.append(replace(check, amount=int(part)))
        self.new_checks[project_id] = opened
        self.rows["claim_checks"] = [row for row in self.rows["claim_checks"] if row["id"] not in checks]
        self.rows["claim_checks"] += [rows.claim_check_row(project_id, c) for c in opened if c.id in checks]
