"""Log records to warehouse rows: pure functions over the payout engine's results, and the rows every record type
shares (payouts, claim checks, dead letters).

A record's own row is derived from its entity's declaration (schemas/entities.py) by `row_of`; each record type's
handler (stream_workers/handlers/) holds its own."""

import calendar
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

import orjson

from rewards.domain import claim_checks
from rewards.domain.amounts import format_amount, to_points
from rewards.domain.approvals import HELD
from rewards.domain.claim_checks import ClaimCheck
from rewards.domain.figure_currency import counted
from rewards.domain.integrity import Rejection
from rewards.domain.payout_config import TokenCurrency, VolumeCurrency
from rewards.domain.payouts import Payout, Volume
from schemas.clickhouse.values import ch_datetime
from schemas.entities import DOCUMENT, EACH, REQUIRED, TIME, Entity, Field, compiled

MAX_DEAD_LETTER_PAYLOAD = 64 * 1024


@dataclass(frozen=True)
class PayoutSource:
    project_id: str
    source_id: str  # the event's dedup_id, or the code use's id
    source_type: str  # "conversion" | "code_use"
    happened_at_ms: int
    # The referral code the payouts go through ('' none): the code of the converting user's referral, or the code used
    # (the warehouse sums an owner's earnings per code from it: schemas/clickhouse/007_*.sql).
    code: str = ""


def _column_value(field: Field) -> str:
    """The expression of a field's column value in a row of `record` (of `item`, for an EACH field)."""
    value = "item" if field.kind == EACH else f"record.{field.name}"
    if field.kind == TIME and field.default is REQUIRED:
        return f"ch_datetime({value})"
    if field.kind == TIME:
        return f"None if {value} is None else ch_datetime({value})"
    if field.kind == DOCUMENT:
        return f"dumps({value}).decode()"
    return value


def row_of(entity: Entity, name: str) -> Callable:
    """The function `name(record)` that makes a record's row (a list of rows, one per item, if a field is EACH):
    a dict literal compiled from the declaration, as fast as one written out (conversions: a per-event hot path)."""
    row = "{" + ", ".join(f"{field.column_name!r}: {_column_value(field)}" for field in entity.stored) + "}"
    each = [field.name for field in entity.stored if field.kind == EACH]
    expression = f"[{row} for item in record.{each[0]}]" if each else row
    return compiled(f"{name}(record)", expression, {"ch_datetime": ch_datetime, "dumps": orjson.dumps})


@lru_cache(maxsize=4096)
def ms_of(text: str) -> int:
    """A row's time (schemas.clickhouse.values.ch_datetime) back in ms, exactly."""
    second, millis = text.split(".")
    return calendar.timegm(time.strptime(second, "%Y-%m-%d %H:%M:%S")) * 1000 + int(millis)


def counted_columns(args: object, currency: VolumeCurrency) -> dict:
    """A conversion's amounts as the volume and revenue figures count them (rewards.domain.figure_currency)."""
    args = args if isinstance(args, dict) else {}
    return {
        "counted_volume": format_amount(counted(args.get("value"), currency)),
        "counted_revenue": format_amount(counted(args.get("revenue"), currency)),
    }


def payout_id(source: PayoutSource, index: int | str) -> str:
    return f"{source.source_type}:{source.source_id}:{index}"


def payout_rows(
    source: PayoutSource, numbered: list[tuple[int, Payout]], created_at_ms: int, reasons: list[str] | None = None
) -> list[dict]:
    """The rows of a source's payouts, each with its index among all the source's payouts (its id: payout_id), and,
    for rejected payouts (`reasons`: each one's), its reason."""
    if not numbered:
        return []
    # What the rows of one source share, built once (a hot path: several payouts per event).
    shared = {
        "project_id": source.project_id,
        "source_id": source.source_id,
        "source_type": source.source_type,
        "happened_at": ch_datetime(source.happened_at_ms),
        "created_at": ch_datetime(created_at_ms),
        "code": source.code,
    }
    prefix = payout_id(source, "")
    found = [
        {
            **shared,
            "payout_id": f"{prefix}{index}",
            "kind": payout.kind,
            "role": payout.role,
            "level": payout.level,
            "recipient_identifier": payout.recipient.identifier,
            "recipient_identifier_type": payout.recipient.identifier_type,
            "amount": format_amount(payout.amount),
            **_currency_columns(payout.currency),
        }
        for index, payout in numbered
    ]
    for row, reason in zip(found, reasons or (), strict=False):
        row["reason"] = reason
    return found


@dataclass
class SourceRows:
    """A source's payouts as rows: those paid, the claim checks (with their rows) the paid ones in an on-chain currency
    open, and those rejected (API.md §8), each with its reason."""

    paid: list[dict]
    checks: list[tuple[ClaimCheck, dict]]
    rejected: list[dict]
    held: list[dict] = field(default_factory=list)  # held for an operator's approval (API.md §9): pending_payouts rows


def source_rows(
    source: PayoutSource,
    payouts: list[Payout],
    created_at_ms: int,
    verdicts: list[Rejection | None] | None = None,
    check_status: str = claim_checks.OPEN,
) -> SourceRows:
    """`payouts` of one source as rows; `verdicts`: each payout's rejection (rewards.domain.integrity.screen), or
    None when it is paid (no verdicts: every payout is). A payout keeps its index among all the source's payouts (its
    id), whether paid or rejected (or cut by caps and budgets: stream_workers.writes.Writes.cut_payouts)."""
    held: list[tuple[int, Payout]] = []
    if verdicts is None or not any(verdicts):
        paid, rejected = list(enumerate(payouts)), []
    else:
        paid = [(i, p) for i, (p, v) in enumerate(zip(payouts, verdicts, strict=True)) if v is None]
        held = [(i, p) for i, (p, v) in enumerate(zip(payouts, verdicts, strict=True)) if v == HELD]
        rejected = [(i, p, v) for i, (p, v) in enumerate(zip(payouts, verdicts, strict=True)) if v not in (None, HELD)]
    checks = []
    for index, payout in paid:
        if isinstance(payout.currency, TokenCurrency):
            check = claim_checks.opened(
                source.project_id, payout_id(source, index), source.source_id, payout, source.happened_at_ms,
                check_status,
            )  # fmt: skip
            checks.append((check, claim_check_row(source.project_id, check)))
    rejected_rows = payout_rows(source, [(i, p) for i, p, _ in rejected], created_at_ms, [v for _, _, v in rejected])
    held_rows = [{**row, "status": "pending", "version": 1} for row in payout_rows(source, held, created_at_ms)]
    return SourceRows(payout_rows(source, paid, created_at_ms), checks, rejected_rows, held_rows)


_POINT_COLUMNS = {"currency": "point", "currency_chain_id": 0, "currency_name": "", "currency_decimals": 0}


def _currency_columns(currency) -> dict:
    if isinstance(currency, str):
        return _POINT_COLUMNS if currency == "point" else {**_POINT_COLUMNS, "currency": currency}
    return {
        "currency": currency.address,
        "currency_chain_id": currency.chain_id,
        "currency_name": currency.name,
        "currency_decimals": currency.decimals,
    }


def currency_of(row: dict) -> str | TokenCurrency:
    """A payouts row's currency back as the payout engine names it (the inverse of _currency_columns)."""
    if row["currency"] == "point":
        return "point"
    return TokenCurrency(
        address=row["currency"], chain_id=int(row["currency_chain_id"]), name=row["currency_name"],
        decimals=int(row["currency_decimals"]),
    )  # fmt: skip


def volume_rows(source: PayoutSource, volumes: list[Volume]) -> list[dict]:
    if not volumes:
        return []
    happened_at = ch_datetime(source.happened_at_ms)
    first = volumes[0]  # one conversion's volumes share its base
    base, counted = format_amount(to_points(first.base)), format_amount(to_points(first.counted_base))
    return [
        {
            "project_id": source.project_id,
            "source_id": source.source_id,
            "level": volume.level,
            "affiliate_identifier_type": volume.affiliate.identifier_type,
            "affiliate_identifier": volume.affiliate.identifier,
            "base": base if volume.base is first.base else format_amount(to_points(volume.base)),
            "counted_base": counted
            if volume.counted_base is first.counted_base
            else format_amount(to_points(volume.counted_base)),
            "happened_at": happened_at,
        }
        for volume in volumes
    ]


def claim_check_row(project_id: str, check: ClaimCheck) -> dict:
    """handlers.stored.claim_check_record_row(to_record(project_id, check)), without building the model (a check per
    token payout): written out, a ClaimCheck's shape being its own (tests/stream_workers/test_worker_rows.py holds the
    two equal)."""
    return {
        "project_id": project_id,
        "id": check.id,
        "user_identifier": check.user.identifier,
        "user_identifier_type": check.user.identifier_type,
        "currency_address": check.currency.address,
        "currency_chain_id": check.currency.chain_id,
        "currency_name": check.currency.name,
        "currency_decimals": check.currency.decimals,
        "amount": str(check.amount),
        "reason": check.reason,
        "status": check.status,
        "hash": check.hash,
        "source_id": check.source_id,
        "version": check.version,
        "created_at": ch_datetime(check.created_ms),
        "claimed_at": None if check.claimed_ms is None else ch_datetime(check.claimed_ms),
        "expires_at": None if check.expires_ms is None else ch_datetime(check.expires_ms),
    }


def debt_row(project_id: str, user, currency: TokenCurrency, units: int, source: str, created_ms: int) -> dict:
    """A change of what `user` owes in a token (API.md §9): owed (positive), or settled by a new check (negative)."""
    return {
        "project_id": project_id,
        "user_identifier_type": user.identifier_type,
        "user_identifier": user.identifier,
        "currency_address": currency.address,
        "currency_chain_id": currency.chain_id,
        "currency_name": currency.name,
        "currency_decimals": currency.decimals,
        "amount": str(units),
        "source": source,
        "created_at": ch_datetime(created_ms),
    }


def dead_letter_row(record, reason: str, delivery: str, failed_at_ms: int) -> dict:
    """A record set aside, with why: kept for an operator to inspect."""
    return set_aside_row(
        record.project_id, record.type, _source_id(record), _payload(record), reason, delivery, failed_at_ms
    )


def set_aside_row(
    project_id: str, record_type: str, source_id: str, payload: bytes, reason: str, delivery: str, failed_at_ms: int
) -> dict:
    """The `dead_letters` row of a record set aside, or of what could be read of one (`payload`)."""
    return {
        "project_id": project_id,
        "record_type": record_type,
        "source_id": source_id,
        "reason": reason[:1000],
        "payload": payload[:MAX_DEAD_LETTER_PAYLOAD].decode(errors="replace"),
        "delivery": delivery,
        "failed_at": ch_datetime(failed_at_ms),
    }


def _payload(record) -> bytes:
    try:
        return orjson.dumps(record.__dict__)
    except TypeError:  # e.g. nested deeper than orjson writes: what it was is in the reason
        return repr({k: v for k, v in record.__dict__.items() if k not in ("args", "metadata")}).encode()


def _source_id(record) -> str:
    for name in ("dedup_id", "use_id", "id"):
        if isinstance(value := getattr(record, name, None), str):
            return value
    return ""
