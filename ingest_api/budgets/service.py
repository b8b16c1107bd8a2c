"""A project's budgets (API.md §8) as GET /projects/budgets answers them: each budget of its configuration, what is
paid in its currency (the workers' count: rewards.ports.AllotmentStore; before the first payout since the budget was
set, what the warehouse holds paid), what of it waits in claim checks not yet claimed, and what remains."""

from dataclasses import dataclass
from decimal import Decimal

from rewards.domain.allotment import from_units
from rewards.domain.amounts import EXACT, format_amount
from rewards.ports import StateStore, Warehouse
from schemas.clickhouse.budgets import paid_in, reserved_in


@dataclass(frozen=True)
class BudgetState:
    currency: str
    amount: Decimal
    paid: Decimal
    reserved: Decimal

    @property
    def remaining(self) -> Decimal:
        """The amount less what is paid (below 0 when the budget was lowered below it)."""
        return EXACT.subtract(self.amount, self.paid)


async def budgets(state: StateStore, warehouse: Warehouse, project_id: str) -> list[BudgetState]:
    config = await state.get_config(project_id)
    currencies = [budget.currency for budget in config.budgets]
    if not currencies:
        return []
    counted = await state.budgets_paid(project_id, currencies)
    uncounted = [currency for currency in currencies if currency not in counted]  # no payout since the budget was set
    held = await paid_in(warehouse, project_id, uncounted) if uncounted else {}
    reserved = await reserved_in(warehouse, project_id, currencies)
    return [
        BudgetState(
            budget.currency,
            budget.amount,
            from_units(counted[budget.currency], budget.currency)
            if budget.currency in counted
            else held.get(budget.currency, Decimal(0)),
            reserved.get(budget.currency, Decimal(0)),
        )
        for budget in config.budgets
    ]


def budget_json(budget: BudgetState) -> dict:
    """Decimals for points, raw integers for a token (API.md §0), as strings."""
    return {
        "currency": budget.currency,
        "amount": format_amount(budget.amount),
        "paid": format_amount(budget.paid),
        "reserved": format_amount(budget.reserved),
        "remaining": format_amount(budget.remaining),
    }
