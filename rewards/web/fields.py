"""Field types of request models: what pydantic's lax mode would read as something else.

Lax mode is what lets `?quantity=5` (a text) be the integer 5, and the query string and the body are read by one
model (rewards.web.requests.request_fields). It also reads the JSON `true` as 1 and `false` as 0: a boolean is never an
integer, a time or an amount here (API.md §0: wrong types are 400), so the integer fields of every request model are
`Integer`, which refuses it before the coercion."""

from typing import Annotated

from pydantic import BeforeValidator
from pydantic_core import PydanticCustomError


def _not_a_boolean(value: object) -> object:
    if isinstance(value, bool):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


Integer = Annotated[int, BeforeValidator(_not_a_boolean)]
