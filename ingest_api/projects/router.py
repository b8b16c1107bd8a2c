"""PUT/GET /projects/config (API.md §6, and §7's claim signer): HTTP to ingest_api.projects.service."""

from fastapi import APIRouter, Request

from ingest_api.projects import service
from ingest_api.projects.schemas import NO_SIGNER, SIGNER_ADDRESS, SIGNER_KEY, ConfigDocument, config_answer_schema
from rewards.domain.claim_signing import InvalidSignerKey, SignerKey, parse_signer_key
from rewards.domain.payout_config import InvalidConfig, PayoutConfig
from rewards.web.dependencies import ServiceCaller, SettingsDep, StateDep, WarehouseDep
from rewards.web.errors import bad_request, conflict, validation_messages
from rewards.web.openapi import request_body_doc
from rewards.web.requests import json_body

router = APIRouter(prefix="/projects", tags=["projects"])


def _config_answer(description: str) -> dict:
    return {200: {"description": description, "content": {"application/json": {"schema": config_answer_schema()}}}}


def parse_document(document: object) -> tuple[PayoutConfig, SignerKey | object | None]:
    """The configuration and the signer the body names (NO_SIGNER when it names none), or a 400 naming every problem;
    no message ever holds the key."""
    problems, signer = [], NO_SIGNER
    if isinstance(document, dict) and (SIGNER_KEY in document or SIGNER_ADDRESS in document):
        document = dict(document)
        document.pop(SIGNER_ADDRESS, None)  # what GET answers may be sent back as it is
        if SIGNER_KEY in document:
            value = document.pop(SIGNER_KEY)
            try:
                signer = None if value is None else parse_signer_key(value)
            except InvalidSignerKey as exc:
                problems.append(str(exc))
    try:
        config = service.parse_config(document)
    except InvalidConfig as exc:
        problems = validation_messages(exc.errors) + problems
    if problems:
        raise bad_request(problems)
    return config, signer


@router.put(
    "/config",
    openapi_extra=request_body_doc(ConfigDocument),
    responses={
        **_config_answer("The configuration now in force"),
        409: {"description": "volume_currency changed while the project has conversions: nothing is changed"},
    },
)
async def put_config(
    request: Request, principal: ServiceCaller, state: StateDep, warehouse: WarehouseDep, settings: SettingsDep
):
    config, signer = parse_document(json_body(await request.body()))
    try:
        await service.put_config(state, warehouse, principal.project_id, config)
    except service.VolumeCurrencyFixed as exc:
        raise conflict(str(exc)) from exc
    if signer is not NO_SIGNER:
        await service.put_claim_signer(state, principal.project_id, signer, settings.secrets_keys)
    return service.config_json(config, await service.signer_address(state, principal.project_id))


@router.get("/config", responses=_config_answer("The project's payout configuration"))
async def get_config(principal: ServiceCaller, state: StateDep):
    config = await service.get_config(state, principal.project_id)
    return service.config_json(config, await service.signer_address(state, principal.project_id))
