"""Which amounts of an event's args the volume and revenue figures count (API.md §6, `volume_currency`).

Events name the currency of `args.value` and `args.revenue` freely (`{"name": "USD"}`, a token's
`{"identifier": "0x…", "chain_identifier": 1}`, nothing at all), and this service converts none into another: a figure
that added them would add dollars to euros. Every volume and revenue figure (leaderboards without a currency, the
affiliate portal, the console) counts the amounts in the project's volume currency, and those that name no currency
(a project that never names one keeps its figures); the rest count 0 there. The workers write each conversion's
counted amounts beside its args (`counted_volume`, `counted_revenue`), under the configuration of the moment it is
processed, as its payouts are; migration 012 holds the same rule, in SQL, for the conversions written before it."""

from decimal import Decimal

from rewards.domain.limits import LimitError, parse_amount
from rewards.domain.payout_config import VolumeCurrency

ZERO = Decimal(0)


def counted(arg: object, currency: VolumeCurrency) -> Decimal:
    """`args.value` or `args.revenue` as the figures count it: its amount when it is in `currency` or names no
    currency, else 0 (as is an amount that is missing or not a decimal within the limits)."""
    if not isinstance(arg, dict) or not in_currency(arg.get("currency"), currency):
        return ZERO
    try:
        return parse_amount(arg.get("amount"))
    except LimitError:
        return ZERO


def in_currency(named: object, currency: VolumeCurrency) -> bool:
    """Whether an amount whose currency is `named` counts in `currency`: it names none (absent, null, or an object
    with neither name nor identifier), or it names the same one (a bare text being a name)."""
    if named is None:
        return True
    if isinstance(named, str):
        return not named or (currency.name is not None and named.lower() == currency.name.lower())
    if not isinstance(named, dict):
        return False
    name, identifier = _text(named.get("name")), _text(named.get("identifier"))
    if not name and not identifier:
        return True
    if currency.identifier is not None:
        return identifier.lower() == currency.identifier.lower()
    return name.lower() == currency.name.lower()


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
