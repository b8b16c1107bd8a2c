"""The OpenAPI document: what every operation answers besides its success, derived from the routes (their guard,
their method, their own `responses=`), and the contract's error body for each of them; the key's scope each operation
needs (its security requirement and its description); and, for each body and success answer, an example (its schema's
own: rewards.web.answers assembles an answer's from its fields')."""

import copy
from http import HTTPStatus

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import GenerateJsonSchema

from rewards.domain.referrals import CODE_IN_USE
from rewards.ports import Unavailable
from rewards.settings import Settings
from rewards.web.auth import PROJECT_NOT_FOUND, UNKNOWN_KEY, scope_required
from rewards.web.errors import ErrorBody, error_body
from rewards.web.middleware import JsonContentTypeMiddleware, body_too_large
from rewards.web.protocol import TOO_LONG
from rewards.web.ratelimit import DEFAULT_LIMITS
from rewards.web.vocabulary import document_vocabulary

try:
    from fastapi.routing import iter_route_contexts
except ImportError:  # FastAPI before 0.165: app.routes holds the APIRoutes themselves

    def iter_route_contexts(routes):
        return iter(routes)


BEARER = "bearerAuth"
SERVICE_ROLE = "service_role"
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
DESCRIPTION = (
    "The API reference is docs/api.md in the service's repository: scopes, errors, limits and every operation, in "
    "the HTTP contract's sections (§0-§11). Every request carries `Authorization: Bearer <API_KEY>`; bodies are JSON "
    "(`Content-Type: application/json`). Every 4xx/5xx answers the error body `ErrorBody`; invalid "
    "parameters or bodies answer 400, never 422 (422 means only an unavailable referral code)."
)
PROJECT_DELETED = "Project not found: the key's project has been deleted"
# For the `responses=` of operations that publish to the event log.
LOG_UNAVAILABLE = {503: {"description": "Service Unavailable: the event log did not take the write; nothing changed"}}
# The events endpoints also ask the dedup archive (the warehouse) past the state store's hot window.
INTAKE_UNAVAILABLE = {
    503: {
        "description": "Service Unavailable: the event log did not take the write, or the dedup archive (the "
        "warehouse) did not answer; nothing changed (the message says which)"
    }
}
RETRY_AFTER = {"description": "Seconds to wait before retrying", "schema": {"type": "integer"}}
RATE_HEADERS = {
    name: {"description": description, "schema": {"type": "integer"}}
    for name, description in (
        ("X-RateLimit-Limit", "Calls this key may make to this operation in a sliding minute"),
        ("X-RateLimit-Remaining", "Calls left in the current window"),
    )
}


# Each error status's example answer in the docs: the message the service answers with it (Swagger shows one per
# status), from where each is written.
ERROR_EXAMPLES = {
    400: "quantity must be between 1 and 50",
    401: UNKNOWN_KEY,
    403: scope_required("service_role"),
    404: PROJECT_NOT_FOUND,
    409: CODE_IN_USE,
    413: body_too_large(Settings.model_fields["max_body_bytes"].default),
    414: TOO_LONG,
    415: JsonContentTypeMiddleware.MESSAGE,
    429: "Too Many Requests",
    503: Unavailable.answer,
}


def success(model, description: str, status: int = 200) -> dict:
    """`responses=` documenting an operation's success answer with `model` (rewards.web.answers). Documentation only:
    never a `response_model`, which would re-serialize the handler's answer (exact decimals, as numbers or strings, are
    written by the handler, rewards.web.numbers)."""
    return {status: {"model": model, "description": description}}


def request_body_doc(model: type[BaseModel], *, required: bool = True, query: bool = False) -> dict:
    """`openapi_extra` for a JSON body the handler reads and validates with `model` itself (FastAPI cannot
    see it). `query`: the same fields are read from the query string when the request has no body."""
    schema = model.model_json_schema()
    extra: dict = {"requestBody": {"required": required, "content": {"application/json": {"schema": schema}}}}
    if query:
        extra["parameters"] = [
            {"name": name, "in": "query", "required": False, "schema": _without_null(field),
             "description": "Read only when the request has no body"}
            for name, field in schema["properties"].items()
        ]  # fmt: skip
    return extra


def _without_null(schema: dict) -> dict:
    """A query parameter is never JSON null: `X | None` is documented as X."""
    options = [option for option in schema.get("anyOf", ()) if option != {"type": "null"}]
    rest = {key: value for key, value in schema.items() if key != "anyOf" and (key, value) != ("default", None)}
    if not options:
        return rest
    return {**rest, **options[0]} if len(options) == 1 else {**rest, "anyOf": options}


def openapi_of(app: FastAPI) -> dict:
    if app.openapi_schema is None:
        app.openapi_schema = _document(app)
    return app.openapi_schema


def _document(app: FastAPI) -> dict:
    doc = copy.deepcopy(  # parts of it may be the routes' own `openapi_extra`, shared by every app
        get_openapi(
            title=app.title,
            version=app.version,
            openapi_version=app.openapi_version,
            description=app.description,
            routes=app.routes,
            tags=app.openapi_tags,
            servers=app.servers,
            separate_input_output_schemas=app.separate_input_output_schemas,
        )
    )
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas["ErrorBody"] = ErrorBody.model_json_schema()
    components["securitySchemes"] = {
        BEARER: {"type": "http", "scheme": "bearer", "description": "An API key (`rewards key create`)"}
    }
    for route in iter_route_contexts(app.routes):  # each route as included (prefix, router's responses)
        if isinstance(getattr(route, "original_route", route), APIRoute) and route.include_in_schema:
            _restore_examples(route.responses, schemas)
            for method in route.methods:
                _document_operation(doc["paths"][route.path_format][method.lower()], route, method, schemas)
    doc = _local_refs_to_components(doc)
    for name in ("HTTPValidationError", "ValidationError"):  # FastAPI's 422 body: every error is ErrorBody
        doc["components"]["schemas"].pop(name, None)
    for methods in doc["paths"].values():
        for operation in methods.values():
            document_vocabulary(operation, doc["components"]["schemas"])
            _add_examples(operation, doc["components"]["schemas"])
    return doc


def _document_operation(operation: dict, route, method: str, schemas: dict) -> None:
    declared = {int(status) for status in route.responses if str(status).isdigit()}
    responses: dict = operation["responses"]
    if 422 not in declared:
        responses.pop("422", None)
    _hoist_defs(operation, schemas)
    errors: dict[int, str] = {}
    if operation.get("parameters") or "requestBody" in operation:
        errors[400] = "Bad Request: a parameter or the body is invalid (`message` lists every problem)"
    if operation.get("parameters"):
        errors[414] = "URI Too Long: the request line (path and query string) is over 64 KiB"
    guarded = _guard_of(route.dependant)
    if guarded is not None:
        scope, limited = guarded
        operation["security"] = [{BEARER: list(names)} for names in _scope_alternatives(scope)]
        operation["description"] = _with_key_notes(operation.get("description"), scope, limited)
        errors[401] = "Unauthorized: no bearer key, a malformed Authorization header, an unknown or revoked key"
        if scope is not None:
            errors[403] = (
                "Forbidden: the key lacks the service_role scope"
                if scope == SERVICE_ROLE
                else f"Forbidden: the key has neither the {scope} scope nor service_role"
            )
        errors[404] = PROJECT_DELETED
        if limited is not None:
            errors[429] = (
                f"Too Many Requests: over this key's limit for the operation ({DEFAULT_LIMITS[limited]} unless "
                "the operator set another); retry after Retry-After seconds"
            )
            _rate_headers(responses)
    if (public := _public_of(route.dependant)) is not None:
        operation["security"] = []  # no key (API.md §9)
        errors[429] = (
            f"Too Many Requests: over this client address's limit ({DEFAULT_LIMITS[public]} unless the operator set "
            "another); retry after Retry-After seconds"
        )
        _rate_headers(responses)
    if method in BODY_METHODS:
        errors[413] = "Payload Too Large: the body is over the service's size limit"
        errors[415] = "Unsupported Media Type: a body whose Content-Type is not application/json"
    for status, description in errors.items():
        own = responses.get(str(status))
        responses[str(status)] = {"description": f"{own['description']}; or {description}" if own else description}
    for status, response in responses.items():
        if int(status) >= 400:
            example = error_body(int(status), ERROR_EXAMPLES.get(int(status), HTTPStatus(int(status)).phrase))
            response["content"] = {
                "application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}, "example": example}
            }
        if status == "429":
            response["headers"] = {"Retry-After": {**RETRY_AFTER, "required": True}, **RATE_HEADERS}
        elif status == "503" and guarded is not None:
            response["headers"] = {"Retry-After": RETRY_AFTER}
    operation["responses"] = dict(sorted(responses.items()))


class _InDeclaredOrder(GenerateJsonSchema):
    def sort(self, value, parent_key=None):
        return value  # an example's keys as its model declares them, not sorted


def _restore_examples(responses: dict, schemas: dict) -> None:
    """FastAPI writes its document without nulls (`exclude_none`), those inside examples too (`"hash": null`): the
    examples of the answers' models, and of their fields, are put back as pydantic writes them (keys in the order
    of the fields)."""
    for response in responses.values():
        model = response.get("model")
        if model is None:
            continue
        generated = TypeAdapter(model).json_schema(
            mode="serialization", ref_template="#/components/schemas/{model}", schema_generator=_InDeclaredOrder
        )
        definitions = {**generated.pop("$defs", {}), generated.get("title"): generated}
        for name, definition in definitions.items():
            shown = schemas.get(name)
            if shown is None:
                continue
            if "examples" in definition:
                shown["examples"] = definition["examples"]
            for field, field_schema in definition.get("properties", {}).items():
                if "examples" in field_schema and field in shown.get("properties", {}):
                    shown["properties"][field]["examples"] = field_schema["examples"]


def _scope_alternatives(scope: str | None) -> list[tuple[str, ...]]:
    """The security requirement's alternatives: any key (no scope), or the scope, or service_role (API.md §0: it is
    accepted wherever another scope is required)."""
    if scope is None:
        return [()]
    return [(name,) for name in dict.fromkeys((scope, SERVICE_ROLE))]


def _with_key_notes(description: str | None, scope: str | None, limited: str | None) -> str:
    if scope is None:
        notes = ["**Key:** any key of the project."]
    elif scope == SERVICE_ROLE:
        notes = [f"**Key:** a key with the `{SERVICE_ROLE}` scope."]
    else:
        notes = [f"**Key:** a key with the `{scope}` scope, or `{SERVICE_ROLE}`."]
    if limited is not None:
        count, _, period = DEFAULT_LIMITS[limited].partition("/")
        notes.append(f"**Rate limit:** {count} calls a {period} per key, unless the operator set another.")
    return "\n\n".join([description, *notes] if description else notes)


def _add_examples(operation: dict, schemas: dict) -> None:
    """The request body's and each success answer's example, from their schemas (Swagger UI shows it, and fills it
    in for "Try it out")."""
    media = [operation.get("requestBody", {}).get("content", {}).get("application/json")]
    media += [
        r.get("content", {}).get("application/json") for s, r in operation["responses"].items() if s.startswith("2")
    ]
    for content in media:
        if content and content.get("schema") and "example" not in content:
            example = example_in(content["schema"], schemas)
            if example is not NO_EXAMPLE:
                content["example"] = example


NO_EXAMPLE = object()


def example_in(schema: dict, schemas: dict) -> object:
    """The first example a schema gives: its own, its reference's, an array of its items', its first option's."""
    if schema.get("examples"):
        return schema["examples"][0]
    if "$ref" in schema:
        return example_in(schemas[schema["$ref"].removeprefix("#/components/schemas/")], schemas)
    if schema.get("type") == "array" and "items" in schema:
        item = example_in(schema["items"], schemas)
        return NO_EXAMPLE if item is NO_EXAMPLE else [item]
    for option in schema.get("anyOf", ()):
        if (example := example_in(option, schemas)) is not NO_EXAMPLE:
            return example
    return NO_EXAMPLE


def _rate_headers(responses: dict) -> None:
    """The success answers of a limited operation carry X-RateLimit-Limit and X-RateLimit-Remaining."""
    for status, response in responses.items():
        if status.startswith("2"):
            response["headers"] = {name: {**header, "required": True} for name, header in RATE_HEADERS.items()}


def _public_of(dependant: Dependant) -> str | None:
    """The operation limited per client address of a route answered without a key (rewards.web.auth.per_address)."""
    for dependency in dependant.dependencies:
        found = getattr(dependency.call, "public", None) or _public_of(dependency)
        if found is not None:
            return found
    return None


def _guard_of(dependant: Dependant) -> tuple[str | None, str | None] | None:
    for dependency in dependant.dependencies:
        found = getattr(dependency.call, "guarded", None) or _guard_of(dependency)
        if found is not None:
            return found
    return None


def _hoist_defs(operation: dict, schemas: dict) -> None:
    """A body's or an answer's schema from `model_json_schema()` keeps its models in `$defs`, whose `#/$defs/...` refs
    would point at the document's root: they move to the document's components."""
    contents = [operation.get("requestBody", {}).get("content", {})]
    contents += [response.get("content", {}) for response in operation["responses"].values()]
    for media in (media for content in contents for media in content.values()):
        for name, schema in media.get("schema", {}).pop("$defs", {}).items():
            if schemas.setdefault(name, schema) != schema:
                raise ValueError(f"two different schemas named {name} in the OpenAPI document")


def _local_refs_to_components(node):
    if isinstance(node, dict):
        return {
            key: "#/components/schemas/" + value.removeprefix("#/$defs/")
            if key == "$ref" and isinstance(value, str) and value.startswith("#/$defs/")
            else _local_refs_to_components(value)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_local_refs_to_components(item) for item in node]
    return node
