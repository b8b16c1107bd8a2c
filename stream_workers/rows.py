"""Log records to warehouse rows: pure functions over the payout engine's results."""

from dataclasses import dataclass

import orjson

from rewards.clickhouse_values import ch_datetime
from rewards.domain.amounts import format_amount, to_points
from rewards.domain.claim_checks import ClaimCheck
from rewards.domain.payouts import Payout, Volume
from schemas.records import (
    AffiliateRecord,
    ClaimCheckRecord,
    CodesCreatedRecord,
    CodeUseRecord,
    ConversionRecord,
    Undecodable,
)

MAX_DEAD_LETTER_PAYLOAD = 64 * 1024


@dataclass(frozen=True)
class PayoutSource:
    project_id: str
    source_id: str  # the event's dedup_id, or the code use's id
    source_type: str  # "conversion" | "code_use"
    happened_at_ms: int


def conversion_row(record: ConversionRecord) -> dict:
    return {
        "project_id": record.project_id,
        "dedup_id": record.dedup_id,
        "name": record.name,
        "user_identifier": record.user_identifier,
        "user_identifier_type": record.user_identifier_type,
        "timestamp": ch_datetime(record.timestamp_ms),
        "received_at": ch_datetime(record.received_ms),
        "batch_id": record.batch_id,
        "args": orjson.dumps(record.args).decode(),
        "metadata": orjson.dumps(record.metadata).decode(),
    }


def conversion_source(record: ConversionRecord) -> PayoutSource:
    return PayoutSource(record.project_id, record.dedup_id, "conversion", record.timestamp_ms)


def code_use_source(record: CodeUseRecord) -> PayoutSource:
    return PayoutSource(record.project_id, record.use_id, "code_use", record.used_at_ms)


def payout_id(source: PayoutSource, index: int | str) -> str:
    return f"{source.source_type}:{source.source_id}:{index}"


def payout_rows(source: PayoutSource, payouts: list[Payout], created_at_ms: int) -> list[dict]:
    if not payouts:
        return []
    # What the rows of one source share, built once (a hot path: several payouts per event).
    shared = {
        "project_id": source.project_id,
        "source_id": source.source_id,
        "source_type": source.source_type,
        "happened_at": ch_datetime(source.happened_at_ms),
        "created_at": ch_datetime(created_at_ms),
    }
    prefix = payout_id(source, "")
    return [
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
        for index, payout in enumerate(payouts)
    ]


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


def volume_rows(source: PayoutSource, volumes: list[Volume]) -> list[dict]:
    if not volumes:
        return []
    happened_at = ch_datetime(source.happened_at_ms)
    base = format_amount(to_points(volumes[0].base))  # one conversion's volumes share its base
    return [
        {
            "project_id": source.project_id,
            "source_id": source.source_id,
            "level": volume.level,
            "affiliate_identifier_type": volume.affiliate.identifier_type,
            "affiliate_identifier": volume.affiliate.identifier,
            "base": base if volume.base is volumes[0].base else format_amount(to_points(volume.base)),
            "happened_at": happened_at,
        }
        for volume in volumes
    ]


def referral_row(record: CodeUseRecord) -> dict:
    return {
        "project_id": record.project_id,
        "user_identifier_type": record.user_identifier_type,
        "user_identifier": record.user_identifier,
        "referrer_identifier_type": record.owner_identifier_type,
        "referrer_identifier": record.owner_identifier,
        "code": record.code,
        "referred_at": ch_datetime(record.used_at_ms),
        "use_id": record.use_id,
    }


def code_rows(record: CodesCreatedRecord) -> list[dict]:
    return [
        {
            "project_id": record.project_id,
            "code": code,
            "owner_identifier_type": record.owner_identifier_type,
            "owner_identifier": record.owner_identifier,
            "created_at": ch_datetime(record.created_at_ms),
        }
        for code in record.codes
    ]


def affiliate_row(record: AffiliateRecord) -> dict:
    row = record.model_dump(exclude={"type", "created_at_ms"})
    return {**row, "created_at": ch_datetime(record.created_at_ms)}


def claim_check_row(project_id: str, check: ClaimCheck) -> dict:
    """claim_check_record_row(to_record(project_id, check)), without building and dumping the model (a check per
    token payout)."""
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
    }


def claim_check_record_row(record: ClaimCheckRecord) -> dict:
    row = record.model_dump(exclude={"type", "created_at_ms", "claimed_at_ms"})
    return {
        **row,
        "created_at": ch_datetime(record.created_at_ms),
        "claimed_at": None if record.claimed_at_ms is None else ch_datetime(record.claimed_at_ms),
    }


def dead_letter_row(record, reason: str, delivery: str, failed_at_ms: int) -> dict:
    """A record set aside (or what could be read of it), with why: kept for an operator to inspect."""
    if isinstance(record, Undecodable):
        record_type, source_id, payload = "undecodable", "", record.payload
    else:
        record_type, source_id = record.type, _source_id(record)
        try:
            payload = orjson.dumps(record.__dict__)
        except TypeError:  # e.g. nested deeper than orjson writes: what it was is in the reason
            payload = repr({k: v for k, v in record.__dict__.items() if k not in ("args", "metadata")}).encode()
    return {
        "project_id": record.project_id,
        "record_type": record_type,
        "source_id": source_id,
        "reason": reason[:1000],
        "payload": payload[:MAX_DEAD_LETTER_PAYLOAD].decode(errors="replace"),
        "delivery": delivery,
        "failed_at": ch_datetime(failed_at_ms),
    }


def _source_id(record) -> str:
    for name in ("dedup_id", "use_id", "id"):
        if isinstance(value := getattr(record, name, None), str):
            return value
    return ""
