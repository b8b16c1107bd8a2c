"""The bodies and answers of the webhook endpoints API (API.md §10)."""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rewards.domain.webhook_events import RETAIN_MS, RETAIN_PER_ENDPOINT
from rewards.domain.webhooks import EVENT_TYPES, MAX_DESCRIPTION_LENGTH, MAX_URL_LENGTH
from rewards.web.answers import Answer, text, timestamp

URL = "https://hooks.example.com/rewards"


class EndpointIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"url": URL, "events": ["reward.earned"], "description": "our backend"}]},
    )

    url: str = Field(min_length=1, max_length=MAX_URL_LENGTH, description="https:// to a public address")
    events: list[str] = Field(min_length=1, max_length=len(EVENT_TYPES), description=f"Of {', '.join(EVENT_TYPES)}")
    description: str | None = Field(None, max_length=MAX_DESCRIPTION_LENGTH)


class EndpointChange(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"enabled": False}]})

    url: str | None = Field(None, min_length=1, max_length=MAX_URL_LENGTH)
    events: list[str] | None = Field(None, min_length=1, max_length=len(EVENT_TYPES))
    description: str | None = Field(None, max_length=MAX_DESCRIPTION_LENGTH)
    enabled: bool | None = None


class EndpointAnswer(Answer):
    id: str = text("The endpoint's id", "wh_3f2c9d1e6b7a4c5d8e9f0a1b")
    url: str = text("Where messages go", URL)
    events: list[str] = text("The event types sent to it", ["reward.earned"])
    description: str | None = text("Its description", "our backend")
    enabled: bool = text("Whether messages go to it", True)
    created_at: str = timestamp("When it was created")


class EndpointsPage(Answer):
    results: list[EndpointAnswer] = Field(description="The page's endpoints, oldest first")
    total_count: int = text("How many endpoints the project has (at most 20)", 1)
    next_page: int | None = text("The next page, null on the last", None)


class EndpointWithSecret(EndpointAnswer):
    secret: str = text(
        "Its signing secret (Standard Webhooks), answered only at creation and rotation", "whsec_" + "A" * 43 + "="
    )


class TestAttempt(Answer):
    webhook_id: str = text("The message's webhook-id", "msg_6f1c0d2e9a7b4c3d8e5f60718293a4b5")
    delivered: bool = text("Whether the endpoint answered 2xx within 10 s", True)
    status_code: int | None = text("What it answered (null: no answer)", 204)
    error: str | None = text("Why not delivered (null when delivered)", None)
    duration_ms: int = text("How long the call took", 87)


class DeliveryAnswer(Answer):
    id: str = text(
        "Its webhook-id, the same at every attempt and redelivery (what a receiver dedups by)",
        "msg_8d2f6a1c0b9e4d7f3a5c6e8b1d0f2a4c",
    )
    event_type: str = text("The event it carries", "reward.earned")
    status: Literal["pending", "succeeded", "failed"] = text(
        "pending (to be tried, or being tried), succeeded (answered 2xx), or failed (retried for 3 days, or "
        "answered 410): redeliverable by hand",
        "failed",
    )
    attempts: int = text("How many times it was sent", 7)
    last_status_code: int | None = text("What the endpoint last answered (null: no answer, or not tried yet)", 503)
    last_error: str | None = text("Why the last attempt failed (null: not tried yet, or succeeded)", "answered 503")
    next_attempt_at: str | None = timestamp("When it is tried next (null unless pending)", None)
    created_at: str = timestamp("When its event was met")


class DeliveriesPage(Answer):
    results: list[DeliveryAnswer] = Field(
        description=f"The page's deliveries, newest first. Finished ones are kept {RETAIN_MS // 86_400_000} days, "
        f"and at most the newest {RETAIN_PER_ENDPOINT:,} of the endpoint"
    )
    total_count: int = text("How many deliveries the endpoint holds", 1)
    next_page: int | None = text("The next page, null on the last", None)


class Deleted(Answer):
    id: str = text("The endpoint deleted", "wh_3f2c9d1e6b7a4c5d8e9f0a1b")
    deleted: bool = text("Always true", True)
