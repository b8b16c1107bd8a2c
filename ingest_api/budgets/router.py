"""GET /projects/budgets (API.md §8): HTTP to ingest_api.budgets.service."""

from fastapi import APIRouter

from ingest_api.budgets import service
from ingest_api.budgets.schemas import BudgetAnswer
from rewards.web.dependencies import ServiceCaller, StateDep, WarehouseDep
from rewards.web.openapi import success

router = APIRouter(prefix="/projects", tags=["projects"])


@router.get("/budgets", responses=success(list[BudgetAnswer], "Each budget of the configuration, in its order"))
async def budgets(principal: ServiceCaller, state: StateDep, warehouse: WarehouseDep):
    """What each budget allows, what is paid in its currency, what of it waits in unclaimed claim checks, and what
    remains. Raising a budget applies to payouts processed afterwards; rejected payouts are not retried."""
    found = await service.budgets(state, warehouse, principal.project_id)
    return [service.budget_json(budget) for budget in found]
