"""GET /payouts/pending-approval (API.md §9): the payouts held for an operator's decision, newest first."""

from decimal import Decimal

from fastapi import APIRouter
from pydantic import Field

from query_api.paging import counted_page
from rewards.domain.amounts import format_amount
from rewards.domain.timestamps import format_timestamp
from rewards.web.answers import ALICE, Answer, raw_amount, text, timestamp
from rewards.web.dependencies import ServiceCaller, WarehouseDep
from rewards.web.openapi import success
from rewards.web.requests import PageParams, parse_user

router = APIRouter(prefix="/payouts/pending-approval", tags=["payouts"])


class HeldPayout(Answer):
    id: str = text("The payout's id (what approve and reject name)", "conversion:order-1042:0")
    user_identifier: str = text("Who would earn it", ALICE)
    user_identifier_type: str = text("Its identifier type", "evm_address")
    kind: str = text("Its kind", "end_user_reward")
    level: int = text("Its level (1-4 for commissions, else 0)", 0)
    amount: str = raw_amount("The amount held (points, or a token's raw units)")
    currency: str = text("`point`, or a token's address", "point")
    currency_chain_id: int = text("The token's chain id (0 for points)", 0)
    currency_name: str = text("The token's name ('' for points)", "")
    currency_decimals: int = text("The token's decimals (0 for points)", 0)
    source_id: str = text("The event's dedup_id (or the code use's id) that paid it", "order-1042")
    happened_at: str = timestamp("When its event happened")
    status: str = text("Always `pending_approval`", "pending_approval")


class HeldPage(Answer):
    results: list[HeldPayout] = Field(description="The payouts held, newest first")
    total_count: int = text("How many are held", 1)
    next_page: int | None = text("The next page, null on the last", None)


_HELD = """
SELECT payout_id, recipient_identifier, recipient_identifier_type, kind, level, toString(amount) AS amount_text,
       currency, currency_chain_id, currency_name, currency_decimals, source_id,
       toUnixTimestamp64Milli(happened_at) AS happened_ms, count() OVER () AS total_count
FROM pending_payouts FINAL
WHERE project_id = {project:String} AND status = 'pending'
  AND ({user_type:String} = '' OR (recipient_identifier_type = {user_type:String}
                                   AND recipient_identifier = {user_id:String}))
ORDER BY happened_at DESC, payout_id
"""


@router.get("", responses=success(HeldPage, "A page of the payouts held for approval"))
async def pending_approval(
    principal: ServiceCaller,
    warehouse: WarehouseDep,
    user_identifier: str | None = None,
    user_identifier_type: str | None = None,
    page=PageParams,
):
    """The payouts held for an operator's decision (API.md §9, `approval` in the configuration), newest first,
    optionally one user's: in no total until approved."""
    user = None if user_identifier is None and user_identifier_type is None else parse_user(
        user_identifier, user_identifier_type)  # fmt: skip
    params = {"project": principal.project_id, "user_type": user.identifier_type if user else "",
              "user_id": user.identifier if user else ""}  # fmt: skip
    rows, total = await counted_page(warehouse, _HELD, params, page.offset, page.size)
    results = [
        {"id": r["payout_id"], "user_identifier": r["recipient_identifier"],
         "user_identifier_type": r["recipient_identifier_type"], "kind": r["kind"], "level": int(r["level"]),
         "amount": _plain(r["amount_text"]), "currency": r["currency"],
         "currency_chain_id": int(r["currency_chain_id"]), "currency_name": r["currency_name"],
         "currency_decimals": int(r["currency_decimals"]),
         "source_id": r["source_id"], "happened_at": format_timestamp(int(r["happened_ms"])),
         "status": "pending_approval"}
        for r in rows
    ]  # fmt: skip
    return {"results": results, "total_count": total, "next_page": page.next_page(total)}


def _plain(text_amount: str) -> str:
    return format_amount(Decimal(text_amount))
