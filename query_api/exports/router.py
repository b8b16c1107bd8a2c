"""GET /exports/payouts and /exports/conversions (API.md §11): every row of a window of event time, streamed as CSV,
NDJSON or Parquet for a finance team's books; amounts exact (docs/api.md, "Exports")."""

from typing import Annotated, Literal

import structlog
from fastapi import APIRouter, Depends, Query
from fastapi.responses import StreamingResponse

from query_api.exports import service
from query_api.exports.formats import MEDIA_TYPES, WRITERS
from rewards.ports import Principal
from rewards.web.auth import guard
from rewards.web.bounds import time_window
from rewards.web.dependencies import WarehouseDep

log = structlog.get_logger(__name__)
router = APIRouter(prefix="/exports", tags=["exports"])
Exporter = Annotated[Principal, Depends(guard("service_role", "exports"))]
Format = Literal["csv", "ndjson", "parquet"]

_EXAMPLES = {
    "payout": {
        "csv": "id,dedup_id,kind,level,user_identifier,user_identifier_type,amount,currency,currency_chain_id,"
        "currency_name,currency_decimals,status,status_details,reversal,event_time,processed_at\n"
        "conversion:order-1042:0,order-1042,end_user_reward,0,0x00000000000000000000000000000000000a11ce,evm_address,"
        "12.5,point,0,,0,paid,,,2026-11-02T10:15:00.000Z,2026-11-02T10:15:00.412Z\n",
        "ndjson": '{"id":"conversion:order-1042:0","dedup_id":"order-1042","kind":"end_user_reward","level":0,'
        '"user_identifier":"0x00000000000000000000000000000000000a11ce","user_identifier_type":"evm_address",'
        '"amount":"12.5","currency":"point","currency_chain_id":0,"currency_name":"","currency_decimals":0,'
        '"status":"paid","status_details":"","reversal":"","event_time":"2026-11-02T10:15:00.000Z",'
        '"processed_at":"2026-11-02T10:15:00.412Z"}\n',
    },
    "conversion": {
        "csv": "dedup_id,name,user_identifier,user_identifier_type,event_time,received_at,batch_id,args,metadata\n"
        "order-1042,purchase,0x00000000000000000000000000000000000a11ce,evm_address,2026-11-02T10:15:00.000Z,"
        '2026-11-02T10:15:00.104Z,b_3f2a,"{""value"":{""amount"":""125""}}",{}\n',
        "ndjson": '{"dedup_id":"order-1042","name":"purchase","user_identifier":'
        '"0x00000000000000000000000000000000000a11ce","user_identifier_type":"evm_address",'
        '"event_time":"2026-11-02T10:15:00.000Z","received_at":"2026-11-02T10:15:00.104Z","batch_id":"b_3f2a",'
        '"args":{"value":{"amount":"125"}},"metadata":{}}\n',
    },
}


def _responses(what: str) -> dict:
    text = {fmt: {"schema": {"type": "string"}, "example": _EXAMPLES[what][fmt]} for fmt in ("csv", "ndjson")}
    content = {MEDIA_TYPES["csv"]: text["csv"], MEDIA_TYPES["ndjson"]: text["ndjson"],
               MEDIA_TYPES["parquet"]: {"schema": {"type": "string", "format": "binary"}}}  # fmt: skip
    return {200: {"description": f"Every {what} of the window, in event time order, in the format asked",
                  "content": content}}  # fmt: skip


def _window(start: str | None, end: str | None) -> service.Window:
    return service.Window(*time_window(("from", "to"), start, end))


async def _streamed(warehouse, project_id: str, window: service.Window, what: str, fmt: str) -> StreamingResponse:
    """The export as it is written; `X-Export-Rows`: how many rows the window holds as it begins (a progress bar's
    total: rows written meanwhile may add to them)."""
    rows = await service.count(warehouse, project_id, window, what)
    if what == "payouts":
        columns, pages = service.PAYOUT_COLUMNS, service.payout_pages(warehouse, project_id, window)
    else:
        columns, pages = service.CONVERSION_COLUMNS, service.conversion_pages(warehouse, project_id, window)

    async def body():
        try:
            async for chunk in WRITERS[fmt](columns, pages):
                yield chunk
        except Exception:  # the answer is under way: it ends short (no final chunk), and the log says why
            log.exception("export failed", project_id=project_id, export=what, format=fmt)
            raise

    name = f"{what}.{fmt}"
    headers = {"Content-Disposition": f'attachment; filename="{name}"', "Cache-Control": "no-store",
               "X-Export-Rows": str(rows)}  # fmt: skip
    return StreamingResponse(body(), media_type=MEDIA_TYPES[fmt], headers=headers)


FROM = Query(None, alias="from", description="Inclusive (ISO 8601 or epoch ms); all time when absent")
TO = Query(None, alias="to", description="Exclusive (ISO 8601 or epoch ms; a date: its start); open when absent")
FORMAT = Query("csv", description="`csv` (with a header line), `ndjson` (one JSON object a line) or `parquet`")


@router.get("/payouts", response_class=StreamingResponse, responses=_responses("payout"))
async def payouts(
    principal: Exporter,
    warehouse: WarehouseDep,
    start: str | None = FROM,
    end: str | None = TO,
    format: Format = FORMAT,
):
    """The project's payouts by event time: paid, rejected (`status` `rejected`, the rule in `status_details`) and
    reversing rows (negative, `reversal` the reversal's id); a token payout's `status` is its claim check's."""
    return await _streamed(warehouse, principal.project_id, _window(start, end), "payouts", format)


@router.get("/conversions", response_class=StreamingResponse, responses=_responses("conversion"))
async def conversions(
    principal: Exporter,
    warehouse: WarehouseDep,
    start: str | None = FROM,
    end: str | None = TO,
    format: Format = FORMAT,
):
    """The project's conversion events by event time, as received (`args` and `metadata` JSON)."""
    return await _streamed(warehouse, principal.project_id, _window(start, end), "conversions", format)
