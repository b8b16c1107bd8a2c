"""PUT/GET /projects/config (API.md §6): HTTP to ingest_api.projects.service."""

from fastapi import APIRouter, Depends, Request

from ingest_api.projects import service
from rewards.domain.payout_config import InvalidConfig, PayoutConfig
from rewards.ports import Principal
from rewards.web.errors import bad_request, validation_messages
from rewards.web.http import backends_of, guard, json_body, request_body_doc

router = APIRouter(prefix="/projects", tags=["projects"])


def parse_config(document: object) -> PayoutConfig:
    """The configuration, or a 400 naming every problem."""
    try:
        return service.parse_config(document)
    except InvalidConfig as exc:
        raise bad_request(validation_messages(exc.errors)) from exc


@router.put("/config", openapi_extra=request_body_doc(PayoutConfig))
async def put_config(request: Request, principal: Principal = Depends(guard("service_role"))):
    config = parse_config(json_body(await request.body()))
    await service.put_config(backends_of(request).state, principal.project_id, config)
    return service.config_json(config)


@router.get("/config")
async def get_config(request: Request, principal: Principal = Depends(guard("service_role"))):
    return service.config_json(await service.get_config(backends_of(request).state, principal.project_id))
