"""Exact decimal amounts (API.md §0): parsing and the wire format. Never floats."""

from decimal import ROUND_DOWN, Context, Decimal, InvalidOperation

POINT_PLACES = 18
_POINT_QUANTUM = Decimal(1).scaleb(-POINT_PLACES)
# Wide enough that no product of a rate and an amount is ever rounded before we choose to.
EXACT = Context(prec=120)


class InvalidAmount(ValueError):
    pass


def parse_decimal(value: object) -> Decimal:
    """A decimal from a JSON string or number; bools and floats' binary noise are refused."""
    if isinstance(value, bool) or value is None:
        raise InvalidAmount("must be a decimal string")
    text = str(value).strip() if isinstance(value, (str, int, float)) else None
    if text is None or text == "":
        raise InvalidAmount("must be a decimal string")
    try:
        result = Decimal(text)
    except InvalidOperation as exc:
        raise InvalidAmount("must be a decimal string") from exc
    if not result.is_finite():
        raise InvalidAmount("must be a finite decimal")
    return result


def format_amount(value: Decimal) -> str:
    """`"0"`, `"1500"`, `"12.5"`: no exponent, no trailing zeros."""
    if value == 0:
        return "0"
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


# The context is passed to each operation rather than entered with localcontext(): the same arithmetic,
# without copying a context per call (a hot path of the workers: several operations per payout).
def multiply(a: Decimal, b: Decimal) -> Decimal:
    return EXACT.multiply(a, b)


def to_points(value: Decimal) -> Decimal:
    """Round down to the 18 fractional digits points carry."""
    return value.quantize(_POINT_QUANTUM, rounding=ROUND_DOWN, context=EXACT)


def to_raw_token_units(value: Decimal, decimals: int) -> Decimal:
    """A token amount in whole tokens to the raw integer of its smallest unit, rounded down."""
    return value.scaleb(decimals, context=EXACT).to_integral_value(rounding=ROUND_DOWN, context=EXACT)
