"""PUT/DELETE /projects/blocklist/{user_identifier} and GET /projects/blocklist (API.md §8): HTTP to
ingest_api.blocklist.service."""

from fastapi import APIRouter, Request
from pydantic import ValidationError

from ingest_api.blocklist import service
from ingest_api.blocklist.schemas import BlockBody, BlockedUserAnswer, BlocklistPage, UnblockedAnswer
from rewards.domain.payouts import User
from rewards.web.dependencies import ServiceCaller, StateDep
from rewards.web.errors import bad_request, not_found, validation_messages
from rewards.web.openapi import request_body_doc, success
from rewards.web.requests import PageParams, json_body, parse_user

router = APIRouter(prefix="/projects/blocklist", tags=["projects"])
NOT_BLOCKED = "User is not blocklisted"


# An email may hold a `/` (sent as %2F): rewards.web.requests.AnyText, as GET /payouts/totals/{user} reads it.
@router.put(
    "/{user_identifier:any_text}",
    openapi_extra=request_body_doc(BlockBody, required=False),
    responses=success(BlockedUserAnswer, "The user, blocked (again: its reason replaced, its time kept)"),
)
async def block(
    request: Request,
    user_identifier: str,
    principal: ServiceCaller,
    state: StateDep,
    identifier_type: str | None = None,
):
    """Block a user: it earns nothing, in any role, from everything processed after this (API.md §8), and its codes
    and code uses are refused (403). Idempotent."""
    user = _user(user_identifier, identifier_type)
    body = await request.body()
    reason = _reason(json_body(body)) if body.strip() else None
    return service.blocked_json(await service.block(state, principal.project_id, user, reason))


@router.delete(
    "/{user_identifier:any_text}",
    responses={**success(UnblockedAnswer, "The user, no longer blocked"), 404: {"description": NOT_BLOCKED}},
)
async def unblock(user_identifier: str, principal: ServiceCaller, state: StateDep, identifier_type: str | None = None):
    """Unblock a user: what is processed after this pays it again (what was rejected stays rejected)."""
    user = _user(user_identifier, identifier_type)
    if not await service.unblock(state, principal.project_id, user):
        raise not_found(NOT_BLOCKED)
    return {"user_identifier": user.identifier, "user_identifier_type": user.identifier_type, "blocked": False}


@router.get("", responses=success(BlocklistPage, "A page of the project's blocklist"))
async def blocklist(principal: ServiceCaller, state: StateDep, page=PageParams):
    """The project's blocked users, the latest blocked first."""
    blocked, total = await service.page(state, principal.project_id, page.offset, page.size)
    return {
        "results": [service.blocked_json(b) for b in blocked],
        "total_count": total,
        "next_page": page.next_page(total),
    }


def _user(identifier: str, identifier_type: str | None) -> User:
    if not identifier_type:
        raise bad_request("identifier_type is required")
    return parse_user(identifier, identifier_type)


def _reason(document: object) -> str | None:
    try:
        return BlockBody.model_validate(document).reason
    except ValidationError as exc:
        raise bad_request(validation_messages(exc.errors())) from exc
