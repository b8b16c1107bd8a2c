"""The bearer key of every API request (API.md §0): authenticated, its scope checked, its call counted against
the key's limit; the principal it resolves to is what handlers act for."""

from collections.abc import Callable

from fastapi import Request

from rewards.domain.keys import SCOPES
from rewards.ports import Principal
from rewards.web.backends import backends_of
from rewards.web.errors import ApiError


def guard(scope: str | None, operation: str | None = None) -> Callable:
    """Authenticate the bearer key, check its scope, then count the call against the key's limit."""
    if scope is not None and scope not in SCOPES:
        raise ValueError(f"unknown scope {scope}")

    async def dependency(request: Request) -> Principal:
        principal = await _authenticate(request)
        request.scope.setdefault("state", {})["project_id"] = principal.project_id  # for the request's log line
        if scope is not None and "service_role" not in principal.scopes and scope not in principal.scopes:
            raise ApiError(403, scope_required(scope))
        if operation is not None:
            backends = backends_of(request)
            headers = await backends.limiter.hit(operation, principal.key_id)
            request.scope.setdefault("state", {})["extra_headers"] = headers
        return principal

    dependency.guarded = (scope, operation)  # read by the OpenAPI document: 401, 403, 429, bearer auth
    return dependency


def per_address(operation: str) -> Callable:
    """The limit of an operation answered without a key (API.md §9: GET /claimable-rewards), counted per client
    address (behind a proxy, the address it forwards: uvicorn's FORWARDED_ALLOW_IPS names the proxies trusted)."""

    async def dependency(request: Request) -> None:
        address = request.client.host if request.client is not None else "unknown"
        headers = await backends_of(request).limiter.hit(operation, f"address:{address}")
        request.scope.setdefault("state", {})["extra_headers"] = headers

    dependency.public = operation  # read by the OpenAPI document: 429, no key
    return dependency


MISSING_KEY = "Missing Authorization header: send 'Authorization: Bearer <API key>'"
NOT_BEARER = "The Authorization header must be 'Bearer <API key>'"
UNKNOWN_KEY = "Unknown or revoked API key"
PROJECT_NOT_FOUND = "Project not found"


def scope_required(scope: str) -> str:
    return f"This operation requires the {scope} scope"


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, message, headers={"WWW-Authenticate": "Bearer"})


async def _authenticate(request: Request) -> Principal:
    """The key's principal, or a 401 that says which of the three things is wrong (never echoing the key)."""
    header = request.headers.get("authorization", "").strip()
    if not header:
        raise _unauthorized(MISSING_KEY)
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise _unauthorized(NOT_BEARER)
    principal = await backends_of(request).state.resolve_key(token.strip())
    if principal is None:
        raise _unauthorized(UNKNOWN_KEY)
    if principal.project_deleted:
        raise ApiError(404, PROJECT_NOT_FOUND)
    return principal
