"""Exact decimal amounts (API.md §0): arithmetic and the wire format. Never floats.
Parsing, with the limits of what is accepted, is rewards.domain.limits.parse_amount."""

from collections.abc import Iterable
from decimal import ROUND_DOWN, Context, Decimal

POINT_PLACES = 18
_POINT_QUANTUM = Decimal(1).scaleb(-POINT_PLACES)
# Wide enough that no product of a rate and an amount is ever rounded before we choose to.
EXACT = Context(prec=120)


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


def exact_sum(values: Iterable[Decimal]) -> Decimal:
    """A sum that is never rounded (built-in sum() rounds to the default context's 28 digits)."""
    total = Decimal(0)
    for value in values:
        total = EXACT.add(total, value)
    return total


def to_points(value: Decimal) -> Decimal:
    """Round down to the 18 fractional digits points carry."""
    return value.quantize(_POINT_QUANTUM, rounding=ROUND_DOWN, context=EXACT)


def to_raw_token_units(value: Decimal, decimals: int) -> Decimal:
    """A token amount in whole tokens to the raw integer of its smallest unit, rounded down."""
    return value.scaleb(decimals, context=EXACT).to_integral_value(rounding=ROUND_DOWN, context=EXACT)
