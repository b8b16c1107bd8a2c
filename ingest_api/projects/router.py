"""PUT/GET /projects/config (API.md §6, and §7's claim signer): HTTP to ingest_api.projects.service."""

from fastapi import APIRouter, Depends, Request
from pydantic import Field

from ingest_api.projects import service
from rewards.domain.claim_signing import InvalidSignerKey, SignerKey, parse_signer_key
from rewards.domain.payout_config import InvalidConfig, PayoutConfig
from rewards.ports import Principal
from rewards.web.auth import guard
from rewards.web.backends import backends_of
from rewards.web.errors import bad_request, validation_messages
from rewards.web.openapi import request_body_doc
from rewards.web.requests import json_body

router = APIRouter(prefix="/projects", tags=["projects"])

SIGNER_KEY, SIGNER_ADDRESS = "claim_signer_key", "claim_signer_address"
NO_SIGNER = object()  # the body does not name the signer: it stays as it is


class ConfigDocument(PayoutConfig):
    """The body of PUT /projects/config: the configuration, and the project's claim signer key (write-only)."""

    claim_signer_key: str | None = Field(
        None,
        pattern=r"^(0x)?[0-9a-fA-F]{64}$",
        json_schema_extra={"writeOnly": True},
        description="Write-only: the secp256k1 private key that signs claim checks (API.md §7), kept apart from the "
        "configuration and never answered (GET shows `claim_signer_address`). Absent: the signer stays as it is; "
        "null: removed. `claim_signer_address`, as GET answers it, is read-only and ignored here.",
    )


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


@router.put("/config", openapi_extra=request_body_doc(ConfigDocument))
async def put_config(request: Request, principal: Principal = Depends(guard("service_role"))):
    config, signer = parse_document(json_body(await request.body()))
    backends = backends_of(request)
    await service.put_config(backends.state, principal.project_id, config)
    if signer is not NO_SIGNER:
        await service.put_claim_signer(backends.state, principal.project_id, signer, backends.settings.secrets_keys)
    return service.config_json(config, await service.signer_address(backends.state, principal.project_id))


@router.get("/config")
async def get_config(request: Request, principal: Principal = Depends(guard("service_role"))):
    state = backends_of(request).state
    config = await service.get_config(state, principal.project_id)
    return service.config_json(config, await service.signer_address(state, principal.project_id))
