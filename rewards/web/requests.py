"""Reading a request: its JSON body and query string through a model, a user's identifier (in a path too: the
`any_text` convertor), a page."""

import orjson
from fastapi import Depends, Query, Request
from pydantic import AliasChoices, BaseModel, ValidationError
from starlette.convertors import StringConvertor, register_url_convertor

from rewards.domain.identifiers import InvalidIdentifier, canonical_identifier
from rewards.domain.payouts import User
from rewards.web.errors import bad_request, validation_messages


class AnyText(StringConvertor):
    """A path parameter that may hold `/` and any character (`{user_identifier:any_text}`: an email may hold a `/`,
    sent as %2F). Starlette's `path` convertor is `.*`, which stops before a newline, and its route patterns end in
    `$`, which matches before a final one: `0x…%0A` would then be read as `0x…`, another identifier. Registered here,
    where every router that names it imports from, so no import order can leave it unknown."""

    regex = r"[\s\S]+"


register_url_convertor("any_text", AnyText())


async def request_fields(request: Request, model: type[BaseModel], *, query: bool = True) -> BaseModel:
    """The request's fields, validated by `model`, or a 400 naming every problem: its JSON body's, over those of the
    query string when `query` (API.md §7: the published client sends a user in the query string and the rest in the
    body; either alone works too). Query parameters the model does not name are ignored (§0)."""
    body = await request.body()
    raw = json_body(body) if body.strip() else {}
    if not isinstance(raw, dict):
        raise bad_request("body must be a JSON object")
    if query:
        names = _input_names(model)
        raw = {**{k: v for k, v in request.query_params.items() if k in names}, **raw}
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise bad_request(validation_messages(exc)) from exc


def _input_names(model: type[BaseModel]) -> set[str]:
    """Every name a field of `model` is read under: its own, and its validation aliases."""
    names = set()
    for name, info in model.model_fields.items():
        names.add(name)
        alias = info.validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
        names.update(choice for choice in choices if isinstance(choice, str))
    return names


def json_body(body: bytes) -> object:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise bad_request("body must be valid JSON") from exc


def parse_user(identifier: str | None, identifier_type: str | None, field: str = "user_identifier") -> User:
    missing = [name for name, value in ((field, identifier), (f"{field}_type", identifier_type)) if not value]
    if missing:
        raise bad_request([f"{name} is required" for name in missing])
    try:
        return User(canonical_identifier(identifier, identifier_type), identifier_type)
    except InvalidIdentifier as exc:
        raise bad_request(str(exc)) from exc


# Pages past this are refused rather than read: any offset they make stays far inside every engine's
# integers (SQLite's and ClickHouse's 64 bits; 2^60 × 16 would wrap to 0), and no listing is that long.
MAX_PAGE = 2**31 - 1


class Page:
    """`page` 1–MAX_PAGE and `page_size` 1–100 (API.md §0)."""

    def __init__(self, page: int = Query(1, ge=1, le=MAX_PAGE), page_size: int = Query(25, ge=1, le=100)):
        self.page = page
        self.size = page_size

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.size

    def next_page(self, total: int) -> int | None:
        return self.page + 1 if self.page * self.size < total else None


PageParams = Depends(Page)
