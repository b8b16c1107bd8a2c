"""The contract's error body (API.md §0), the shape NestJS produces and `@fuul/sdk` parses."""

from http import HTTPStatus

from pydantic import BaseModel, ConfigDict, ValidationError


class ErrorBody(BaseModel):
    """The body of every 4xx/5xx answer; `message` is a list when several fields are wrong (OpenAPI only:
    `error_body` builds the same shape as a plain dict)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"statusCode": 400, "error": "Bad Request", "message": "quantity must be between 1 and 50"}]
        }
    )
    statusCode: int
    error: str
    message: str | list[str]


class ApiError(Exception):
    def __init__(self, status: int, message: str | list[str], headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def bad_request(message: str | list[str]) -> ApiError:
    if isinstance(message, list) and len(message) == 1:
        message = message[0]
    return ApiError(400, message)


def not_found(message: str = "Not Found") -> ApiError:
    return ApiError(404, message)


def conflict(message: str) -> ApiError:
    return ApiError(409, message)


# Seconds a client should wait before retrying a 503: the engines' own waits are bounded by a few seconds
# (e.g. rewards.adapters.production.kafka_log.PUBLISH_TIMEOUT_S), and a retry of the same request is safe.
RETRY_AFTER_S = 1


def unavailable(message: str) -> ApiError:
    """503 with Retry-After: nothing was changed, the same request may be sent again."""
    return ApiError(503, message, headers={"Retry-After": str(RETRY_AFTER_S)})


def error_body(status: int, message: str | list[str]) -> dict:
    return {"statusCode": status, "error": HTTPStatus(status).phrase, "message": message}


def field_path(loc: tuple, prefix: str = "") -> str:
    path = prefix
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def validation_messages(errors: ValidationError | list[dict], prefix: str = "") -> list[str]:
    if isinstance(errors, ValidationError):
        errors = errors.errors()
    return [_message(field_path(error["loc"], prefix), error) for error in errors]


def _message(field: str, error: dict) -> str:
    kind, ctx = error["type"], error.get("ctx", {})
    match kind:
        case "missing":
            return f"{field} is required"
        case "extra_forbidden":
            return f"property {field} should not exist"
        case "string_type":
            return f"{field} must be a string"
        case "int_type" | "int_parsing" | "int_from_float":
            return f"{field} must be an integer"
        case "int_parsing_size":
            return f"{field} is too large"
        case "bool_type" | "bool_parsing":
            return f"{field} must be a boolean"
        case "dict_type" | "model_type" | "model_attributes_type":
            return f"{field} must be an object"
        case "list_type":
            return f"{field} must be an array"
        case "string_too_short":
            return f"{field} must be at least {ctx.get('min_length')} characters"
        case "string_too_long":
            return f"{field} must be at most {ctx.get('max_length')} characters"
        case "too_short":
            return f"{field} must contain at least {_elements(ctx.get('min_length'))}"
        case "too_long":
            return f"{field} must contain at most {_elements(ctx.get('max_length'))}"
        case "greater_than_equal":
            return f"{field} must not be less than {ctx.get('ge')}"
        case "greater_than":
            return f"{field} must be greater than {ctx.get('gt')}"
        case "less_than_equal":
            return f"{field} must not be greater than {ctx.get('le')}"
        case "literal_error" | "enum":
            return f"{field} must be one of: {ctx.get('expected')}"
        case "value_error" | "assertion_error":
            reason = str(ctx.get("error", error["msg"]))
            return f"{field} {reason}" if field else reason
    return f"{field}: {error['msg']}" if field else error["msg"]


def _elements(count: object) -> str:
    return f"{count} element" if count == 1 else f"{count} elements"
