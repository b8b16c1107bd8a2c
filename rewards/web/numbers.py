"""Answers whose exact decimals are JSON numbers: where the published client declares an amount `number` (API.md §7),
the decimal is written as a number literal digit for digit (a float would round it to 17 significant digits)."""

from decimal import Decimal

import orjson
from fastapi.responses import JSONResponse

from rewards.domain.amounts import format_amount


def _exact_number(value: object) -> orjson.Fragment:
    if isinstance(value, Decimal):
        return orjson.Fragment(format_amount(value))  # no exponent, no trailing zeros: valid JSON number text
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


class ExactJSONResponse(JSONResponse):
    """A JSON answer in which every Decimal is an exact JSON number (amounts the client declares `string` are
    formatted to text before they get here)."""

    def render(self, content: object) -> bytes:
        return orjson.dumps(content, default=_exact_number)
