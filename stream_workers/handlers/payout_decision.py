"""An operator's decision on a payout held for approval (API.md §9): approved, it is paid as if its event had just
been processed (its row at the event's time, counted by caps and budgets, its claim check opened); rejected, it is
refused (`rejected_by_operator`). Either way the pending_payouts row takes the decision (version 2).

A reversal processed while the payout was held took nothing from it (it reads what was paid): an approved payout
whose event is reversed since is paid with a reversing movement of the share reversed so far (its claim check opened
for the rest), so that a later reversal takes back exactly its own share (rewards.domain.reversals.taken_back)."""

from dataclasses import replace
from decimal import Decimal

from rewards.adapters import dedup_archive
from rewards.domain import claim_checks
from rewards.domain.amounts import format_amount
from rewards.domain.approvals import APPROVED
from rewards.domain.claim_checks import OPEN, PENDING_ACCEPTANCE
from rewards.domain.integrity import Rejection
from rewards.domain.payout_config import TokenCurrency
from rewards.domain.payouts import Payout, User
from rewards.domain.reversals import reversing_payout_id, taken_back
from rewards.ports import StateStore, Warehouse
from schemas.entities import PAYOUT_DECISION
from schemas.records import PayoutDecisionRecord
from stream_workers import rows
from stream_workers.handlers.base import Handler, Project
from stream_workers.handlers.reversal import give_back_rows
from stream_workers.rows import SourceRows
from stream_workers.writes import Writes

decision_row = rows.row_of(PAYOUT_DECISION, "decision_row")
_STATUS_COLUMNS = ("status", "version")


class PayoutDecision(Handler):
    record_type = PayoutDecisionRecord

    def written_key(self, record: PayoutDecisionRecord) -> tuple[str, str]:
        return dedup_archive.PAYOUT_DECISION, record.payout_id  # one decision per payout

    async def plan(
        self, project_id: str, project: Project, records: list, state: StateStore, warehouse: Warehouse
    ) -> None:
        """The share of each approved payout's event reversed so far."""
        events = [r.payout["source_id"] for r in records if r.decision == APPROVED and _of_event(r.payout)]
        if events:
            project.reversed_before_approval = await state.reversed_shares(project_id, events)

    def add(self, record: PayoutDecisionRecord, project: Project, writes: Writes, created: int) -> None:
        held = record.payout
        row = {name: value for name, value in held.items() if name not in _STATUS_COLUMNS}
        decided = {**held, "status": record.decision, "version": 2}
        if record.decision == APPROVED:
            share = project.reversed_before_approval.get(row["source_id"], Decimal(0)) if _of_event(row) else 0
            self._pay(record.project_id, {**row, "created_at": rows.ch_datetime(created)}, share, project, writes)
        else:
            writes.rows["rejected_payouts"].append({**row, "reason": Rejection.REJECTED_BY_OPERATOR})
        writes.rows["pending_payouts"].append(decided)
        writes.rows["payout_decisions"].append(decision_row(record))
        writes.rows["dedup_ids"].append(self.written_row(record))

    @staticmethod
    def _pay(project_id: str, row: dict, share: Decimal, project: Project, writes: Writes) -> None:
        payout = _payout(row)
        at_ms = rows.ms_of(row["happened_at"])
        back = taken_back(payout.amount, Decimal(0), share, payout.currency == "point") if share else Decimal(0)
        checks = []
        if isinstance(payout.currency, TokenCurrency):
            status = PENDING_ACCEPTANCE if project.rules.config.require_acceptance else OPEN
            owed = replace(payout, amount=payout.amount - back)
            check = claim_checks.opened(project_id, row["payout_id"], row["source_id"], owed, at_ms, status)
            if check.amount:
                checks.append((check, rows.claim_check_row(project_id, check)))
        writes.add_payouts(project_id, SourceRows([row], checks, []))
        if project.limits:
            writes.capped[project_id].tally([payout], None, at_ms, project.limits)
        if back:  # the share reversed while it was held: taken back at once, and given back to caps and budgets
            reversing = {**row, "payout_id": reversing_payout_id(row["payout_id"], "approval"),
                         "amount": format_amount(-back), "reversal": "approval"}  # fmt: skip
            writes.rows["payouts"].append(reversing)
            if project.limits:
                give_back_rows([reversing], at_ms, project.limits, writes.given_back[project_id])


def _of_event(row: dict) -> bool:
    return row["source_type"] == "conversion"


def _payout(row: dict) -> Payout:
    recipient = User(row["recipient_identifier"], row["recipient_identifier_type"])
    return Payout(row["kind"], row["role"], int(row["level"]), recipient, Decimal(row["amount"]), rows.currency_of(row))
