"""GET /dead-letters and POST /dead-letters/replay (ours, outside API.md: docs/api.md, "Dead letters"): the records the
workers set aside, and their replay once what set them aside is mended: HTTP to ingest_api.dead_letters.service."""

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ingest_api.dead_letters import service
from rewards.domain.dead_letters import replay_of
from rewards.domain.timestamps import format_timestamp, now_ms
from rewards.ports import Principal
from rewards.web.answers import Answer, text, timestamp
from rewards.web.auth import guard
from rewards.web.bounds import time_window
from rewards.web.dependencies import EventLogDep, SettingsDep, WarehouseDep
from rewards.web.errors import bad_request, validation_messages
from rewards.web.openapi import LOG_UNAVAILABLE, request_body_doc, success
from rewards.web.requests import PageParams, json_body

router = APIRouter(prefix="/dead-letters", tags=["dead letters"])
Replayer = Annotated[Principal, Depends(guard("service_role", "dead_letters_replay"))]
Reader = Annotated[Principal, Depends(guard("service_role"))]


class DeadLetter(Answer):
    id: str = text("The dead letter's id (what a replay marks its record with)", "dl_0c5e9f1b2a7d4e6f8a9b0c1d2e3f4a5b")
    record_type: str = text("The record's type on the event log", "conversion")
    source_id: str = text("Its id (a conversion's dedup_id, a code use's id, …)", "order-1042")
    reason: str = text("Why it was set aside", "the project's payout configuration cannot be read")
    failed_at: str = timestamp("When")
    payload: str = text("The record as it was (JSON; cut at 64 KiB)", '{"type":"conversion","dedup_id":"order-1042"}')
    replayable: bool = text("Whether a replay would publish it again", True)
    not_replayable_because: str | None = text("Why not, when it would not", None)


class DeadLetterPage(Answer):
    results: list[DeadLetter] = Field(description="The dead letters, oldest first")
    total_count: int = text("How many match", 1)
    next_page: int | None = text("The next page, null on the last", None)


class ReplayBody(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"reason": "configuration", "from": "2026-11-28"}]}
    )

    record_type: str | None = Field(None, max_length=64, description="Only dead letters of this record type")
    reason: str | None = Field(None, min_length=1, max_length=200, description="Only those whose reason holds this")
    start: str | None = Field(None, alias="from", description="Failed at or after (ISO 8601 or epoch ms)")
    end: str | None = Field(None, alias="to", description="Failed before (ISO 8601 or epoch ms)")
    after: str | None = Field(None, max_length=2000, description="The `next` of the previous answer: go on from there")


class ReplayAnswer(Answer):
    replayed: int = text("Records published again (the workers write each once, however often it is replayed)", 3)
    not_replayable: dict[str, int] = text("Dead letters left as they are, by why", {"older than the dedup window": 1})
    next: str | None = text(
        f"More match past the {service.REPLAY_SLICE:,} of this answer: send it as `after` to go on; null when done",
        None,
    )


@router.get("", responses=success(DeadLetterPage, "A page of the project's dead letters"))
async def dead_letters(
    principal: Reader,
    warehouse: WarehouseDep,
    settings: SettingsDep,
    record_type: str | None = Query(None, max_length=64, description="Only this record type"),
    reason: str | None = Query(None, min_length=1, max_length=200, description="Only reasons holding this, any case"),
    start: str | None = Query(None, alias="from", description="Failed at or after (ISO 8601 or epoch ms)"),
    end: str | None = Query(None, alias="to", description="Failed before (ISO 8601 or epoch ms)"),
    page=PageParams,
):
    """The records the workers set aside (a record that could not be read or computed, e.g. under a configuration
    that could not be read), oldest first, with why, and whether a replay would publish them again."""
    filters = _filters(record_type, reason, start, end)
    rows, total = await service.listing(warehouse, principal.project_id, filters, page.offset, page.size)
    now, window_ms = now_ms(), int(settings.dedup_window * 1000)
    results = []
    for row in rows:
        dead_letter_id = service.row_id(row)
        why = replay_of(dead_letter_id, row["record_type"], row["payload"], int(row["failed_ms"]), now, window_ms).why
        results.append({"id": dead_letter_id, "record_type": row["record_type"], "source_id": row["source_id"],
                        "reason": row["reason"], "failed_at": format_timestamp(int(row["failed_ms"])),
                        "payload": row["payload"], "replayable": not why,
                        "not_replayable_because": why or None})  # fmt: skip
    return {"results": results, "total_count": total, "next_page": page.next_page(total)}


@router.post(
    "/replay",
    openapi_extra=request_body_doc(ReplayBody),
    responses={**success(ReplayAnswer, "The slice replayed"), **LOG_UNAVAILABLE},
)
async def replay(
    request: Request, principal: Replayer, warehouse: WarehouseDep, log: EventLogDep, settings: SettingsDep
):
    """Publish the matching dead letters' records again, once what set them aside is mended (a configuration fixed):
    the workers process them as new, each written once however often it is replayed (within the dedup window after
    it failed: older ones are left). Up to 1,000 a call, oldest first; `next` goes on."""
    try:
        body = ReplayBody.model_validate(json_body(await request.body()))
    except ValidationError as exc:
        raise bad_request(validation_messages(exc.errors())) from exc
    filters = _filters(body.record_type, body.reason, body.start, body.end)
    try:
        done = await service.replay(warehouse, log, principal.project_id, filters, body.after, now_ms(),
                                    int(settings.dedup_window * 1000))  # fmt: skip
    except service.BadCursor as exc:
        raise bad_request(str(exc)) from exc
    return {"replayed": done.replayed, "not_replayable": done.not_replayable, "next": done.next}


def _filters(record_type: str | None, reason: str | None, start: str | None, end: str | None) -> service.Filters:
    return service.Filters(record_type, reason, *time_window(("from", "to"), start, end))
