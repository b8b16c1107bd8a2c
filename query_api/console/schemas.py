"""The operator console's reads, their answers (documented: rewards.web.answers)."""

from typing import Literal

from pydantic import Field

from rewards.web.answers import (
    ALICE,
    PROJECT_ID,
    TX_HASH,
    Answer,
    CheckCurrency,
    IdentifierType,
    decimal_text,
    raw_amount,
    text,
    timestamp,
)


class Freshness(Answer):
    average_ms: int | None = text(
        "How long the last minutes' events waited to be written, on average (null: none)", 140
    )
    max_ms: int | None = text("The longest wait (null: none written)", 430)
    last_written_minute: str | None = timestamp("The last minute with events written (null: none)")


class DeadLetter(Answer):
    record_type: str = text("The record's type", "conversion")
    source_id: str = text("Its id", "order-1042")
    reason: str = text("Why it was set aside", "no such tier")
    failed_at: str = timestamp("When")


class DeadLetters(Answer):
    last_24h: int = text("Records set aside in the last day", 0)
    latest: list[DeadLetter] = Field(description="The newest 5, without their payloads")


class PipelineMinute(Answer):
    minute: str = timestamp("The minute", "2026-11-22T09:12:00.000Z")
    accepted: int = text("Events accepted", 120)
    processed: int = text("Events written", 118)


class Backlog(Answer):
    scope: Literal["pipeline"] = text("The whole pipeline's (every project's)", "pipeline")
    messages: int | None = text("Messages waiting; null where this process does not measure it", 0)


class PipelineHealth(Answer):
    project_id: str = text("The key's project", PROJECT_ID)
    project_name: str = text("The project's name, as it was created", "Demo shop")
    window_s: float = text("The seconds the rates are over (the last 5 minutes, the current one up to now)", 272.5)
    accepted_per_s: float = text("Events accepted a second", 2.0)
    processed_per_s: float = text("Events written a second", 1.993)
    freshness: Freshness
    dead_letters: DeadLetters
    minutes: list[PipelineMinute] = Field(description="The last 60 minutes, oldest first")
    backlog: Backlog


class HourPoints(Answer):
    hour: str = timestamp("The hour", "2026-11-22T09:00:00.000Z")
    points: str = decimal_text("Points paid for events of that hour", "130")


class PointsByHour(Answer):
    hours: list[HourPoints] = Field(description="Every hour asked, oldest first")


class CurrencyChecks(CheckCurrency):
    open: str = raw_amount("Open amounts")
    closed: str = raw_amount("Closed amounts", "0")
    claimed: str = raw_amount("Claimed amounts", "0")
    expired: str = raw_amount("Expired amounts (closed, not claimed in time: API.md §8)", "0")
    checks: int = text("Checks", 2)


class LatestClaim(CheckCurrency):
    hash: str = text("The claim's transaction hash", TX_HASH)
    user_identifier: str = text("The user", ALICE)
    user_identifier_type: IdentifierType = text("Its identifier type", "evm_address")
    amount: str = raw_amount("The claimed amount")
    checks: int = text("Checks claimed", 1)
    claimed_at: str = timestamp("When")


class ProjectChecks(Answer):
    totals: list[CurrencyChecks] = Field(description="Per currency")
    latest_claims: list[LatestClaim] = Field(description="The newest claims, one row per hash, user and currency")


Reason = Literal["blocklisted", "self_referral", "cap_exceeded", "budget_exhausted", "rejected_by_operator"]


class RejectedTotal(Answer):
    reason: Reason = text("The rule that refused them (API.md §8)", "blocklisted")
    currency: str = text("`point`, or a token's address", "point")
    payouts: int = text("How many payouts", 3)
    amount: str = raw_amount("How much in all (points, or a token's raw units)")


class RejectedPayout(Answer):
    id: str = text("The payout's id, as movements show it", "conversion:order-1042:1:rejected")
    kind: str = text("Its kind", "affiliate_commission")
    level: int = text("Its level (1-4 for commissions, else 0)", 1)
    user_identifier: str = text("Who would have earned it", ALICE)
    user_identifier_type: IdentifierType = text("Its identifier type", "evm_address")
    amount: str = raw_amount("The refused amount (points, or a token's raw units)")
    currency: str = text("`point`, or a token's address", "point")
    reason: Reason = text("The rule that refused it", "blocklisted")
    happened_at: str = timestamp("When its event happened")


class ReversedTotal(Answer):
    currency: str = text("`point`, or a token's address", "point")
    movements: int = text("How many reversing movements (one per payout a reversal took from)", 4)
    amount: str = raw_amount("How much they took back in all (points, or a token's raw units)")


class LatestReversal(Answer):
    id: str = text("The reversal's id", "6f1c0d2e9a7b4c3d8e5f60718293a4b5")
    dedup_id: str = text("Its event", "order-1042")
    reason: str = text("Why", "refund")
    fraction: str = decimal_text("The share of the event it reversed", "0.5")
    reversed: str = decimal_text("The event's share reversed once it was applied (1: whole)", "0.5")
    reversed_at: str = timestamp("When it was accepted")


class ProjectIntegrity(Answer):
    rejected: list[RejectedTotal] = Field(description="The refused payouts per reason and currency")
    latest_rejected: list[RejectedPayout] = Field(description="The newest refused payouts")
    reversed: list[ReversedTotal] = Field(description="What reversals took back, per currency (API.md §9)")
    latest_reversals: list[LatestReversal] = Field(description="The newest reversals written")
