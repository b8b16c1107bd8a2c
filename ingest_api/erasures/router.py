"""POST /users/erasures and GET /users/erasures/{erasure_id} (API.md §11): a user's right to be forgotten. The
identifier comes in the body, so that no URL or request log carries it; stream_workers.erasures carries it out."""

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rewards.ports import Principal
from rewards.web.answers import ALICE, Answer, text
from rewards.web.auth import guard
from rewards.web.dependencies import StateDep
from rewards.web.errors import bad_request, not_found, validation_messages
from rewards.web.openapi import request_body_doc, success
from rewards.web.requests import json_body, parse_user

router = APIRouter(prefix="/users/erasures", tags=["data rights"])
Requester = Annotated[Principal, Depends(guard("service_role", "erasures"))]
Reader = Annotated[Principal, Depends(guard("service_role"))]
UNKNOWN = "Erasure not found"


class ErasureBody(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"user_identifier": ALICE, "user_identifier_type": "evm_address"}]},
    )

    user_identifier: str = Field(max_length=400, description="The user to forget")
    user_identifier_type: str = Field(max_length=64, description="Its type")


class ErasureAccepted(Answer):
    erasure_id: str = text("The request's id, to follow it by", "er_4f1c2a9d0b7e4c3a8f6d5e2b1a0c9d8e")


class ErasureStatus(Answer):
    status: str = text(
        "`pending` until the identifier is replaced everywhere by its pseudonym, then `done` (within a minute on an "
        "idle embedded default; 24 hours at most)",
        "done",
    )


@router.post(
    "",
    status_code=202,
    openapi_extra=request_body_doc(ErasureBody),
    responses=success(ErasureAccepted, "Accepted: the user will be erased (the same id while one is pending)", 202),
)
async def request_erasure(request: Request, principal: Requester, state: StateDep):
    """Erase a user: their identifier is replaced by a stable pseudonym (`erased:<hash>`) in every table, view,
    record and log line of the project, so that totals, summaries and other users' figures stay exact."""
    try:
        body = ErasureBody.model_validate(json_body(await request.body()))
    except ValidationError as exc:
        raise bad_request(validation_messages(exc.errors())) from exc
    user = parse_user(body.user_identifier, body.user_identifier_type)
    return {"erasure_id": await state.request_erasure(principal.project_id, user)}


@router.get(
    "/{erasure_id}",
    responses={**success(ErasureStatus, "Where the erasure is"), 404: {"description": UNKNOWN}},
)
async def erasure_status(erasure_id: str, principal: Reader, state: StateDep):
    """An erasure's status (kept 35 days after it is done)."""
    found = await state.erasure_status(principal.project_id, erasure_id) if len(erasure_id) <= 64 else None
    if found is None:
        raise not_found(UNKNOWN)
    return {"status": found}
