"""Conversion events as clients send them (API.md §3), and the published client's tracking events (§7): the shape
of a request's body. The ingest edge validates them (ingest_api.events.validation) into the records of
schemas.records."""

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_EVENTS_PER_BATCH = 100
MAX_EVENT_BYTES = 16 * 1024

# Examples of the OpenAPI document (documentation only): Bob, referred by Alice, buys for 200.
PURCHASE = {
    "name": "purchase",
    "user_identifier": "bob@example.com",
    "user_identifier_type": "email",
    "dedup_id": "order-1042",
    "timestamp": "2026-11-22T09:12:03.123Z",
    "args": {"value": {"amount": "200", "currency": {"name": "USD"}}, "revenue": {"amount": "12.5"}},
    "metadata": {"referrer_code": "Q7K2M9X"},
}
PAGEVIEW = {
    "name": "pageview",
    "args": {"page": "/pricing", "locationOrigin": "https://shop.example.com"},
    "metadata": {"tracking_id": "V1StGXR8_Z5jdHi6B-myT", "affiliate_id": "Q7K2M9X", "referrer": "Q7K2M9X"},
}


class NestedUser(BaseModel):
    model_config = ConfigDict(extra="forbid")
    identifier: str
    identifier_type: str


class EventIn(BaseModel):
    """One conversion event. Any other top-level field is refused."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [PURCHASE]})

    name: str = Field(min_length=1, max_length=128)
    dedup_id: str = Field(min_length=1, max_length=255)
    user_identifier: str | None = None
    user_identifier_type: str | None = None
    user: NestedUser | None = None
    timestamp: str | int | None = None
    args: dict | None = None
    metadata: dict | None = None


class BatchIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"events": [PURCHASE]}]})
    events: list[EventIn] = Field(min_length=1, max_length=MAX_EVENTS_PER_BATCH)


# -- tracking events of the published client (API.md §7) ------------------------------------------------------------
#
# `sendPageview`, `identifyUser` and `sendEvent` of @fuul/sdk 7.41.0 post a `FuulEvent` to POST /events without a
# dedup_id (docs/fuul-sdk-7.41.0-surface.md, G2). The same bounds as an event's (16 KiB, 32 levels of nesting) hold.

MAX_TRACKING_ID = 255
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class FuulEventMetadata(BaseModel):
    """The client's `FuulEventMetadata`: its fields typed, any other kept as sent (metadata is free-form)."""

    model_config = ConfigDict(extra="allow", strict=True)

    tracking_id: str = Field(min_length=1, max_length=MAX_TRACKING_ID)
    affiliate_id: str | None = Field(None, max_length=255)
    referrer: str | None = Field(None, max_length=255)
    referrer_url: str | None = Field(None, max_length=4096)
    project_id: str | None = Field(None, max_length=255)
    source: str | None = Field(None, max_length=1024)
    category: str | None = Field(None, max_length=1024)
    title: str | None = Field(None, max_length=1024)
    tag: str | None = Field(None, max_length=1024)

    @field_validator("tracking_id")
    @classmethod
    def _printable(cls, tracking_id: str) -> str:
        if _CONTROL.search(tracking_id):
            raise ValueError("must not contain control characters")
        return tracking_id


class FuulEvent(BaseModel):
    """A tracking event as the client sends it (no dedup_id). Its user: `user`, or §3's `user_identifier` and
    `user_identifier_type`, or `user_address` (an EVM address); none for a pageview or `sendEvent`."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [PAGEVIEW]})

    name: str = Field(min_length=1, max_length=128)
    user: NestedUser | None = None
    user_identifier: str | None = None
    user_identifier_type: str | None = None
    user_address: str | None = Field(None, max_length=255)
    signature: str | None = Field(None, max_length=1024)
    signature_message: str | None = Field(None, max_length=4096)
    signature_public_key: str | None = Field(None, max_length=1024)
    account_chain_id: int | None = Field(None, ge=0, le=2**63 - 1)
    args: dict | None = None
    metadata: FuulEventMetadata
    project_id: str | None = Field(None, max_length=255)  # the multi-project form: must be the key's project
