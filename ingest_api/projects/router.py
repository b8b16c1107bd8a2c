"""PUT/GET /projects/config (API.md §6)."""

from fastapi import APIRouter, Depends, Request

from rewards.domain.payout_config import InvalidConfig, PayoutConfig, config_from_document
from rewards.errors import bad_request, validation_messages
from rewards.http import backends_of, guard, json_body, request_body_doc
from rewards.ports import Principal

router = APIRouter(prefix="/projects", tags=["projects"])


def parse_config(document: object) -> PayoutConfig:
    """The configuration, or a 400 naming every problem."""
    try:
        return config_from_document(document)
    except InvalidConfig as exc:
        raise bad_request(validation_messages(exc.errors)) from exc


def config_json(config: PayoutConfig) -> dict:
    return config.model_dump(mode="json", exclude_none=True)


@router.put("/config", openapi_extra=request_body_doc(PayoutConfig))
async def put_config(request: Request, principal: Principal = Depends(guard("service_role"))):
    config = parse_config(json_body(await request.body()))
    await backends_of(request).state.put_config(principal.project_id, config)
    return config_json(config)


@router.get("/config")
async def get_config(request: Request, principal: Principal = Depends(guard("service_role"))):
    return config_json(await backends_of(request).state.get_config(principal.project_id))
