"""The body and answer of POST /events/reversals (API.md §9), and the reading of the body (every wrong field named)."""

from pydantic import BaseModel, ConfigDict, Field

from rewards.domain.limits import LimitError
from rewards.domain.reversals import MAX_REASON_LENGTH, Reversal, parse_fraction, parse_reason
from rewards.web.answers import Answer, text

MAX_REVERSALS = 100  # per request, like a batch's events
MAX_DEDUP_ID = 255


class ReversalIn(BaseModel):
    """One reversal: a share of an event's payouts taken back."""

    model_config = ConfigDict(extra="forbid")

    dedup_id: str = Field(min_length=1, max_length=MAX_DEDUP_ID, description="The event's dedup_id")
    reason: str = Field(min_length=1, max_length=MAX_REASON_LENGTH, description="Why (`refund`, `chargeback`, …)")
    fraction: str = Field(
        "1", description="The share of the event reversed, a decimal string: 0 < fraction ≤ 1, at most 18 places"
    )


class ReversalsIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"reversals": [{"dedup_id": "order-1042", "reason": "refund"}]}]},
    )

    reversals: list[ReversalIn] = Field(min_length=1, max_length=MAX_REVERSALS)


class ReversalsApplied(Answer):
    reversed: int = text("The reversals newly applied (one sent again counts 0)", 1)


class InvalidReversals(ValueError):
    def __init__(self, messages: list[str]):
        super().__init__("; ".join(messages))
        self.messages = messages


def read_reversals(document: object) -> list[Reversal]:
    """The body's reversals, or InvalidReversals naming every wrong field (`reversals[3].fraction ...`)."""
    if not isinstance(document, dict) or set(document) - {"reversals"}:
        raise InvalidReversals(["body must be an object with one field, reversals"])
    items = document.get("reversals")
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_REVERSALS:
        raise InvalidReversals([f"reversals must be a list of 1 to {MAX_REVERSALS} reversals"])
    messages: list[str] = []
    found = [_read(item, f"reversals[{index}]", messages) for index, item in enumerate(items)]
    if messages:
        raise InvalidReversals(messages)
    return found


def _read(item: object, where: str, messages: list[str]) -> Reversal | None:
    if not isinstance(item, dict):
        messages.append(f"{where} must be an object")
        return None
    before = len(messages)
    messages += [f"{where}.{name} is not a field of a reversal" for name in item if name not in _FIELDS]
    dedup_id = item.get("dedup_id")
    if not isinstance(dedup_id, str) or not 1 <= len(dedup_id) <= MAX_DEDUP_ID:
        messages.append(f"{where}.dedup_id must be a string of 1 to {MAX_DEDUP_ID} characters")
    reason = _field(parse_reason, item.get("reason"), f"{where}.reason", messages)
    fraction = _field(parse_fraction, item.get("fraction", "1"), f"{where}.fraction", messages)
    return None if len(messages) > before else Reversal(dedup_id, reason, fraction)


_FIELDS = set(ReversalIn.model_fields)


def _field(parse, value, where: str, messages: list[str]):
    try:
        return parse(value)
    except LimitError as exc:
        messages.append(f"{where} {exc}")
        return None
