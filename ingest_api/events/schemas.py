"""The events the ingest edge accepts, as validation leaves them (API.md §3), the error that names what is wrong
with the others, and the answers (documented: rewards.web.answers)."""

from dataclasses import dataclass
from typing import Literal

from rewards.web.answers import Answer, text


@dataclass(frozen=True)
class ValidEvent:
    name: str
    dedup_id: str
    user_identifier: str
    user_identifier_type: str
    timestamp_ms: int | None
    args: dict
    metadata: dict


class InvalidEvents(ValueError):
    def __init__(self, messages: list[str]):
        super().__init__("; ".join(messages))
        self.messages = messages


class EventsIngested(Answer):
    ingested_events: int = text("The events accepted: duplicates (by dedup_id) are not counted", 95)


class OneEventIngested(Answer):
    ingested_events: Literal[0, 1] = text("1: the event stored (or a §3 event accepted); 0: an exact repeat", 1)


class EventStatus(Answer):
    """The state of the event of a dedup_id."""

    dedup_id: str = text("The dedup_id asked about", "order-1042")
    status: Literal["accepted", "processed", "failed", "not_found", "reversed", "partially_reversed"] = text(
        "`accepted` (durable, not yet processed), `processed` (its payouts are queryable), `failed`, `not_found`; "
        "`reversed` / `partially_reversed` once reversals of it are accepted (POST /events/reversals)",
        "processed",
    )


class UserEventStatus(Answer):
    """Whether a user has an event of a name."""

    created: bool = text("Whether the user has an event of this name", True)
    paid: bool = text(
        "Whether the payout configuration names it (an event of a name it does not name pays nothing)", True
    )
