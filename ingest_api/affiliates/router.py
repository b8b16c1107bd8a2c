"""POST /affiliates (API.md §4): HTTP to ingest_api.affiliates.service (a user registered as an affiliate); and the
published client's affiliate-code writes (API.md §7): `createAffiliateCode` on the same path (told apart by its
fields), `updateAffiliateCode` (POST /affiliates/{user}) and `updateRebateRate` (POST /affiliates/{user}/rebate-rate).
The client maps their errors by message: a message array is its ValidationError, "Code in use" and "Address in use"
its own errors."""

from decimal import Decimal
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ValidationError

from ingest_api.affiliates import service
from ingest_api.affiliates.schemas import (
    CLIENT_FORM_FIELDS,
    AffiliateCodeAnswer,
    CreateAffiliate,
    CreateAffiliateCode,
    RebateRateAnswer,
    UpdateAffiliateCode,
    UpdateRebateRate,
    affiliate_code_json,
)
from rewards.domain.affiliates import affiliate_json
from rewards.domain.codes import affiliate_code_problem
from rewards.domain.identifiers import InvalidIdentifier, canonical_identifier
from rewards.domain.limits import LimitError
from rewards.domain.payouts import User
from rewards.domain.referrals import json_number, parse_rebate_rate
from rewards.ports import EventLog, StateStore
from rewards.web.answers import AffiliateAnswer
from rewards.web.dependencies import AffiliateFiguresDep, EventLogDep, ServiceCaller, StateDep
from rewards.web.errors import ApiError, bad_request, validation_messages
from rewards.web.numbers import ExactJSONResponse
from rewards.web.openapi import LOG_UNAVAILABLE, request_body_doc, success
from rewards.web.requests import json_body, parse_user, request_fields

router = APIRouter(prefix="/affiliates", tags=["affiliates"])


def _create_body_doc() -> dict:
    """Either form's body (the document's request body: one of the two schemas)."""
    extra = request_body_doc(CreateAffiliate)
    media = extra["requestBody"]["content"]["application/json"]
    media["schema"] = {"anyOf": [media["schema"], CreateAffiliateCode.model_json_schema()]}
    return extra


def _invalid(messages: list[str]) -> ApiError:
    """A 400 whose message is always an array: the client's ValidationError (a single string would be a plain Error)."""
    return ApiError(400, messages)


def _user(identifier: str, identifier_type: str, field: str) -> User:
    try:
        return User(canonical_identifier(identifier, identifier_type), identifier_type)
    except InvalidIdentifier as exc:
        # named as this form names its fields (the identifier's type is `identifier_type` in each)
        message = str(exc).replace("user_identifier_type", "identifier_type").replace("user_identifier", field)
        raise _invalid([message]) from exc


def _code(text: str) -> str:
    if problem := affiliate_code_problem(text):
        raise _invalid([problem])
    return text


def _rate(value: object, field: str) -> Decimal:
    try:
        return parse_rebate_rate(value)
    except LimitError as exc:
        raise _invalid([f"{field} {exc}"]) from exc


async def _client_fields(request: Request, model: type[BaseModel]) -> Any:
    try:
        return await request_fields(request, model)
    except ApiError as exc:
        raise _invalid(exc.message if isinstance(exc.message, list) else [exc.message]) from exc


CODE_WRITES = {
    **success(AffiliateCodeAnswer, "The affiliate and its code under the new name"),
    404: {"description": "The user has no affiliate code (or not that one)"},
    409: {"description": "Code in use: another code has or had this name"},
    **LOG_UNAVAILABLE,
}


@router.post(
    "",
    status_code=201,
    openapi_extra=_create_body_doc(),
    responses={
        **success(
            AffiliateAnswer | AffiliateCodeAnswer,
            "Created: the affiliate (API.md §4's form), or its affiliate code (createAffiliateCode's form)",
            201,
        ),
        409: {
            "description": "Affiliate already exists: the user is registered (API.md §4 form); Code in use, or Address "
            "in use (the user has an affiliate code: createAffiliateCode's form)"
        },
        **LOG_UNAVAILABLE,
    },
)
async def create_affiliate(
    request: Request, principal: ServiceCaller, state: StateDep, log: EventLogDep, figures: AffiliateFiguresDep
):
    raw = json_body(await request.body())
    if isinstance(raw, dict) and "user_identifier" not in raw and CLIENT_FORM_FIELDS & raw.keys():
        return await _create_affiliate_code(state, log, principal.project_id, raw)
    try:
        fields = CreateAffiliate.model_validate(raw)
    except ValidationError as exc:
        raise bad_request(validation_messages(exc)) from exc
    user = parse_user(fields.user_identifier, fields.user_identifier_type)
    registered = await service.register(
        state, log, figures, principal.project_id, user,
        **fields.model_dump(exclude={"user_identifier", "user_identifier_type"}),
    )  # fmt: skip
    body = affiliate_json(registered.affiliate, registered.config, registered.codes, registered.figures)
    return ExactJSONResponse(body, status_code=201)


async def _create_affiliate_code(state: StateStore, log: EventLog, project_id: str, raw: dict) -> ExactJSONResponse:
    """API.md §7 `createAffiliateCode`: the code, and the user's registration as an affiliate if it is not one."""
    try:
        fields = CreateAffiliateCode.model_validate(raw)
    except ValidationError as exc:
        raise _invalid(validation_messages(exc)) from exc
    user = _user(fields.address, fields.identifier_type, "address")
    code = _code(fields.code)
    rate = None if fields.user_rebate_rate is None else _rate(fields.user_rebate_rate, "user_rebate_rate")
    made = await service.create_affiliate_code(state, log, project_id, user, code, fields.name, rate, fields.proof())
    return ExactJSONResponse(affiliate_code_json(made), status_code=201)


# The user is one path segment (the client sends it raw; an identifier holding `/` cannot be named here).
@router.post(
    "/{user_identifier}/rebate-rate",
    openapi_extra=request_body_doc(UpdateRebateRate),
    responses={
        **success(RebateRateAnswer, "The code's new rate"),
        404: {"description": "The code is not one of the user's"},
    },
)
async def update_rebate_rate(request: Request, principal: ServiceCaller, state: StateDep, user_identifier: str):
    """API.md §7 `updateRebateRate`: the share (0 to 1) of each level-1 commission through the code that goes to the
    referred user, for conversions processed from now on."""
    fields: UpdateRebateRate = await _client_fields(request, UpdateRebateRate)
    user = _user(user_identifier, fields.identifier_type, "user_identifier")
    rate = _rate(fields.rebate_rate, "rebate_rate")
    record = await service.set_rebate_rate(state, principal.project_id, user, fields.code, rate, fields.proof())
    return ExactJSONResponse({"code": record.code, "rebate_rate": json_number(record.rebate_rate)})


@router.post("/{user_identifier}", openapi_extra=request_body_doc(UpdateAffiliateCode), responses=CODE_WRITES)
async def update_affiliate_code(
    request: Request, principal: ServiceCaller, state: StateDep, log: EventLogDep, user_identifier: str
):
    """API.md §7 `updateAffiliateCode`: the user's affiliate code takes the new name. It stays the same code: its uses,
    referrals, rebate rate and figures go with it, and its former names stay its own (links with them still work)."""
    fields: UpdateAffiliateCode = await _client_fields(request, UpdateAffiliateCode)
    user = _user(user_identifier, fields.identifier_type, "user_identifier")
    code = _code(fields.code)
    renamed = await service.rename_affiliate_code(state, log, principal.project_id, user, code, fields.proof())
    return ExactJSONResponse(affiliate_code_json(renamed))
