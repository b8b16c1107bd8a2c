"""The events the ingest edge accepts, as validation leaves them (API.md §3), and the error that names what is wrong
with the others."""

from dataclasses import dataclass


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
