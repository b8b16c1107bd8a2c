"""GET /payouts/terms-by-tier and GET /conversions (API.md §7): the project's payout configuration (§6) as the published
client's getIncentivesByTier and getConversions read it. GET /conversions is also what the client's getIncentives
(out of scope, deprecated) calls: it gets the same answer."""

from fastapi import APIRouter, Query

from query_api.incentives import schemas, service
from rewards.web.dependencies import Caller, StateDep
from rewards.web.errors import bad_request
from rewards.web.numbers import ExactJSONResponse
from rewards.web.openapi import success

router = APIRouter(tags=["payout terms"])


@router.get("/payouts/terms-by-tier", responses=success(schemas.TermsByTier, "The terms of each rule per tier"))
async def terms_by_tier(
    principal: Caller,
    state: StateDep,
    tier_ids: str | None = Query(
        None, description="Comma-separated tier ids of the configuration; `null` names the default bucket"
    ),
):
    """The terms of each conversion rule per tier: the default bucket (`tier_id` null: affiliates without a tier of
    their own, at the rates of the configuration's `default_tier`) then every tier by rank, or those of `tier_ids`."""
    wanted = None if tier_ids is None else [i.strip() for i in tier_ids.split(",") if i.strip()] or None
    config = await service.project_config(state, principal.project_id)
    try:
        return ExactJSONResponse(schemas.terms_by_tier(config, wanted))
    except schemas.UnknownTiers as exc:
        raise bad_request(str(exc)) from exc


@router.get("/conversions", responses=success(list[schemas.ConversionAnswer], "The configuration's conversion rules"))
async def conversions(principal: Caller, state: StateDep):
    """The conversion rules of the configuration in the client's `Conversion` shape (the query the client may send,
    `user_identifier` and `identifier_type`, is ignored, as its docs say)."""
    return ExactJSONResponse(schemas.conversions(await service.project_config(state, principal.project_id)))
