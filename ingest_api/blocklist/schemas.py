"""The blocklist's body and answers (API.md §8)."""

from pydantic import BaseModel, ConfigDict, Field

from rewards.web.answers import ALICE, Answer, text

MAX_REASON = 1000  # characters of a reason: an operator's note, not a document


class BlockBody(BaseModel):
    """The optional body of PUT /projects/blocklist/{user_identifier}."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"reason": "chargeback fraud"}]})

    reason: str | None = Field(None, max_length=MAX_REASON, description="Why the user is blocked (kept, never used)")


class BlockedUserAnswer(Answer):
    user_identifier: str = text("The blocked user's identifier", ALICE)
    user_identifier_type: str = text("Its type", "evm_address")
    reason: str | None = text("Why it was blocked; null if no reason was given", "chargeback fraud")
    created_at: str = text("When it was blocked (ISO 8601, UTC)", "2026-11-26T09:30:00.000Z")


class BlocklistPage(Answer):
    results: list[BlockedUserAnswer] = Field(description="The page's blocked users, the latest blocked first")
    total_count: int = text("How many users the blocklist holds", 1)
    next_page: int | None = text("The next page, null on the last", None)


class UnblockedAnswer(Answer):
    user_identifier: str = text("The user's identifier", ALICE)
    user_identifier_type: str = text("Its type", "evm_address")
    blocked: bool = text("Always false: the user is no longer blocked", False)
