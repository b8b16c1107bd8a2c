"""GET /claimable-rewards (API.md §9): the one operation answered without a key, for landing pages: a user's claimable
amounts per currency, over the projects that allow it, limited per client address."""

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from query_api.claimable import service
from query_api.claimable.schemas import ClaimableReward
from rewards.web.auth import per_address
from rewards.web.dependencies import StateDep, WarehouseDep
from rewards.web.openapi import success
from rewards.web.requests import parse_user

router = APIRouter(tags=["claim checks"])


@router.get(
    "/claimable-rewards",
    responses=success(list[ClaimableReward], "The user's claimable amounts per currency"),
)
async def claimable_rewards(
    _: Annotated[None, Depends(per_address("claimable_rewards"))],
    warehouse: WarehouseDep,
    state: StateDep,
    user_identifier: str | None = None,
    user_identifier_type: str | None = None,
    project_id: str | None = Query(None, max_length=64, description="Only this project's (if it allows it)"),
):
    """**No key**: the user's claimable amounts (closed, unexpired claim checks) per currency, summed over every
    project whose configuration allows it (`public_claimable_rewards`, default true). Nothing else of a project is
    answered without a key."""
    user = parse_user(user_identifier, user_identifier_type)
    found = await service.claimable(warehouse, state, user, project_id)
    return [{**row.__dict__, "amount": str(row.amount)} for row in found]
