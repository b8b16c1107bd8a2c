"""Conversion events as clients send them (API.md §3): the shape of a request's body. The ingest edge validates
them (ingest_api.events.validation) into the records of schemas.records."""

from pydantic import BaseModel, ConfigDict, Field

MAX_EVENTS_PER_BATCH = 100
MAX_EVENT_BYTES = 16 * 1024


class NestedUser(BaseModel):
    model_config = ConfigDict(extra="forbid")
    identifier: str
    identifier_type: str


class EventIn(BaseModel):
    """One conversion event. Any other top-level field is refused."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(min_length=1, max_length=128)
    dedup_id: str = Field(min_length=1, max_length=255)
    user_identifier: str | None = None
    user_identifier_type: str | None = None
    user: NestedUser | None = None
    timestamp: str | int | None = None
    args: dict | None = None
    metadata: dict | None = None


class BatchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    events: list[EventIn] = Field(min_length=1, max_length=MAX_EVENTS_PER_BATCH)
