"""What the pipeline wrote, as webhook deliveries (API.md §10): for records the workers have processed (the feed gives
no other), the events each makes, one delivery per endpoint subscribed to its type.

- a conversion or a code use: `reward.earned` per payout it made, paid (`accepted`), refused (`rejected`, its rule)
  or held for approval (`pending`, with `payout.pending_approval`), read back from the warehouse; a code use is also
  `referral.created`;
- an operator's decision: `reward.earned` of the payout as it ended (paid, or refused);
- a reversal: `reward.reversed` per reversing movement it wrote;
- a referral removed, an affiliate registered, a claim check closed, claimed or expired: their event.

Each event has a subject (a payout and its status, a record's id), so its `webhook-id` per endpoint is the same
whenever the log is read again (rewards.domain.webhook_events.webhook_id). An endpoint is sent what happened from
its creation on: a record older than the endpoint (a log read from its start) sends it nothing."""

from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from rewards.domain import webhook_events as we
from rewards.domain.timestamps import format_timestamp
from rewards.domain.webhook_events import Delivery
from rewards.domain.webhooks import Endpoint
from rewards.ports import Warehouse
from schemas.clickhouse.values import param_chunks, param_cost
from schemas.entities import AFFILIATE, CLAIM_CHECK, CODE_USE, REFERRAL_REMOVAL
from schemas.records import (
    AffiliateRecord,
    ClaimCheckRecord,
    CodeUseRecord,
    ConversionRecord,
    PayoutDecisionRecord,
    ReferralRemovedRecord,
    ReversalRecord,
)

REFERRER_ROLE = "affiliate"
REFERRAL_REWARD = "referral_reward"  # a code use's payouts' conversion name (as the movements read them)
FOREVER = 2**62  # the time of a change not dated: after every endpoint's creation
CHECK_EVENTS = {"closed": "claim_check.closed", "claimed": "claim_check.claimed", "expired": "claim_check.expired"}

_COLUMNS = """project_id, payout_id, source_id, source_type, role, recipient_identifier_type, recipient_identifier,
    toString(amount) AS amount, currency, currency_chain_id, currency_name, toUnixTimestamp64Milli(happened_at) AS
    happened_ms, toUnixTimestamp64Milli(created_at) AS created_ms"""
_SOURCES = """project_id = {project:String} AND source_id IN {ids:Array(String)}
    AND happened_at BETWEEN fromUnixTimestamp64Milli({first:Int64}, 'UTC')
                        AND fromUnixTimestamp64Milli({last:Int64}, 'UTC')"""
# A source's payouts as it made them: paid (not a reversal's), refused, held (still, or since decided: held first).
_MADE = f"""
SELECT {_COLUMNS}, 'accepted' AS status, '' AS details FROM payouts WHERE {_SOURCES} AND reversal = ''
UNION ALL
SELECT {_COLUMNS}, 'rejected' AS status, reason AS details FROM rejected_payouts WHERE {_SOURCES}
  AND reason != 'rejected_by_operator'
UNION ALL
SELECT {_COLUMNS}, 'pending' AS status, '' AS details FROM pending_payouts FINAL WHERE {_SOURCES}
"""
# A decided payout as it ended: paid, or refused (by the operator, or by a cap or budget when approved).
_DECIDED = f"""
SELECT {_COLUMNS}, 'accepted' AS status, '' AS details FROM payouts
WHERE project_id = {{project:String}} AND payout_id IN {{ids:Array(String)}} AND reversal = ''
UNION ALL
SELECT {_COLUMNS}, 'rejected' AS status, reason AS details FROM rejected_payouts
WHERE project_id = {{project:String}} AND payout_id IN {{ids:Array(String)}}
"""
# A reversal's reversing rows, found through its event's conversion (the sorting key: time, then id).
_REVERSING = f"""
SELECT {_COLUMNS}, reversal, 'accepted' AS status, '' AS details FROM payouts
WHERE project_id = {{project:String}} AND reversal IN {{reversals:Array(String)}} AND source_id IN {{ids:Array(String)}}
  AND (happened_at, source_id) IN (
      SELECT timestamp, dedup_id FROM conversions
      WHERE project_id = {{project:String}} AND dedup_id IN {{ids:Array(String)}})
"""


@dataclass(frozen=True, slots=True)
class Event:
    type: str
    subject: str  # with the type, names the event: its webhook-id per endpoint
    body: dict
    happened_ms: int  # when the record was made (an endpoint created after it is not sent it)


class Events:
    """The events of a project's processed records, read with the warehouse's help."""

    def __init__(self, warehouse: Warehouse):
        self._warehouse = warehouse

    async def deliveries(
        self, project_id: str, records: Sequence, endpoints: Sequence[Endpoint], now_ms: int
    ) -> list[Delivery]:
        subscribed = {event for endpoint in endpoints if endpoint.enabled for event in endpoint.events}
        if not subscribed:
            return []
        events = await self.of(project_id, records, subscribed)
        return [
            we.new_delivery(project_id, endpoint.id, event.type, event.subject, orjson.dumps(event.body), now_ms)
            for event in events
            for endpoint in endpoints
            if endpoint.enabled and event.type in endpoint.events and event.happened_ms >= endpoint.created_ms
        ]

    async def of(self, project_id: str, records: Sequence, subscribed: set[str]) -> list[Event]:
        events: list[Event] = []
        payouts_wanted = subscribed & {"reward.earned", "payout.pending_approval"}
        sources = [r for r in records if isinstance(r, ConversionRecord | CodeUseRecord)]
        if payouts_wanted and sources:
            events += await self._made(project_id, sources)
        decisions = [r for r in records if isinstance(r, PayoutDecisionRecord)]
        if "reward.earned" in subscribed and decisions:
            events += await self._decided(project_id, decisions)
        reversals = [r for r in records if isinstance(r, ReversalRecord)]
        if "reward.reversed" in subscribed and reversals:
            events += await self._reversed(project_id, reversals)
        events += [event for record in records if (event := _plain_event(record)) is not None]
        return [event for event in events if event.type in subscribed]

    async def _made(self, project_id: str, sources: list) -> list[Event]:
        by_id = {_source_id(r): r for r in sources}
        events = []
        # A query's parameters are bounded (128 KiB on a ClickHouse server); _MADE names the ids three times.
        for ids in param_chunks(by_id, cost=lambda d: 3 * param_cost(d)):
            events += await self._made_of(project_id, {d: by_id[d] for d in ids})
        return events

    async def _made_of(self, project_id: str, by_id: dict) -> list[Event]:
        times = [_source_ms(r) for r in by_id.values()]
        params = {"project": project_id, "ids": list(by_id), "first": min(times), "last": max(times)}
        events = []
        for row in await self._warehouse.query(_MADE, params):
            source = by_id[row["source_id"]]
            if _source_ms(source) != int(row["happened_ms"]):
                continue  # another event of the same id (its dedup id used again past the 35 days)
            events += _payout_events(row, _conversion_name(source), _accepted_ms(source))
        return events

    async def _decided(self, project_id: str, decisions: list) -> list[Event]:
        made = {r.payout_id: r.decided_at_ms for r in decisions}
        rows = await self._rows(_DECIDED, {"project": project_id}, "ids", list(made))
        names = await self._conversion_names(project_id, rows)
        return [_earned(row, names.get(row["source_id"], REFERRAL_REWARD), made[row["payout_id"]]) for row in rows]

    async def _reversed(self, project_id: str, reversals: list) -> list[Event]:
        made = {r.id: r.reversed_at_ms for r in reversals}
        rows = []
        for chunk in param_chunks(reversals, cost=lambda r: param_cost(r.id, r.dedup_id, r.dedup_id)):  # ids twice
            ids = list({r.dedup_id for r in chunk})
            rows += await self._warehouse.query(_REVERSING, {"project": project_id, "reversals": [r.id for r in chunk],
                                                             "ids": ids})  # fmt: skip
        names = await self._conversion_names(project_id, rows)
        return [
            Event(
                "reward.reversed",
                row["payout_id"],
                we.event("reward.reversed", _movement(row, names)),
                made[row["reversal"]],
            )
            for row in rows
        ]

    async def _conversion_names(self, project_id: str, rows: list[dict]) -> dict[str, str]:
        ids = list({row["source_id"] for row in rows if row["source_type"] == "conversion"})
        sql = (
            "SELECT dedup_id, any(name) AS name FROM conversions WHERE project_id = {project:String}"
            " AND dedup_id IN {ids:Array(String)} GROUP BY dedup_id"
        )
        return {row["dedup_id"]: row["name"] for row in await self._rows(sql, {"project": project_id}, "ids", ids)}

    async def _rows(self, sql: str, params: dict, name: str, values: list[str]) -> list[dict]:
        """The rows of `sql` with `values` as the parameter `name`, a query per chunk of them."""
        rows = []
        for chunk in param_chunks(values):
            rows += await self._warehouse.query(sql, {**params, name: chunk})
        return rows


def _source_id(record) -> str:
    return record.dedup_id if isinstance(record, ConversionRecord) else record.use_id


def _source_ms(record) -> int:
    """The time its payouts were made at (their `happened_at`)."""
    return record.timestamp_ms if isinstance(record, ConversionRecord) else record.used_at_ms


def _accepted_ms(record) -> int:
    return record.received_ms if isinstance(record, ConversionRecord) else record.used_at_ms


def _conversion_name(record) -> str:
    return record.name if isinstance(record, ConversionRecord) else REFERRAL_REWARD


def _payout_events(row: dict, conversion_name: str, accepted_ms: int) -> list[Event]:
    events = [_earned(row, conversion_name, accepted_ms)]
    if row["status"] == we.PENDING:
        data = _movement(row, {row["source_id"]: conversion_name})
        events.append(Event("payout.pending_approval", row["payout_id"], we.event("payout.pending_approval", data),
                            accepted_ms))  # fmt: skip
    return events


def _earned(row: dict, conversion_name: str, happened_ms: int) -> Event:
    """`reward.earned` of a payout as it is now: its subject is the payout and its status, so a payout paid once
    held, met again from its event's record or from the decision's, is one event."""
    body = we.reward_earned(
        row, row["status"], row["details"] or None, conversion_name, format_timestamp(int(row["created_ms"]))
    )
    return Event("reward.earned", f"{row['payout_id']}:{row['status']}", body, happened_ms)


def _movement(row: dict, names: dict[str, str]) -> dict:
    """A payout as a movement (GET /payouts/movements' item, its user and currency named)."""
    earned = we.reward_earned(row, row["status"], row["details"] or None, "", "")["movement"]
    return {
        "id": row["payout_id"],
        "date": format_timestamp(int(row["happened_ms"])),
        "user_identifier": row["recipient_identifier"],
        "user_identifier_type": row["recipient_identifier_type"],
        "is_referrer": row["role"] == REFERRER_ROLE,
        "conversion_name": names.get(row["source_id"], REFERRAL_REWARD),
        "total_amount": earned["amount"],
        "currency": earned["currency"],
        "payout_status": row["status"],
        "payout_status_details": row["details"] or None,
        "reversal": bool(row.get("reversal")),
    }


def _plain_event(record) -> Event | None:
    """The event of a record that carries all its event says (its entity's answer is the event's data)."""
    values = record.model_dump()
    if isinstance(record, CodeUseRecord):
        return _entity_event("referral.created", record.use_id, CODE_USE.answer(values, format_timestamp),
                             record.used_at_ms)  # fmt: skip
    if isinstance(record, ReferralRemovedRecord):
        data = REFERRAL_REMOVAL.answer(values, format_timestamp)
        return _entity_event("referral.removed", record.id, data, record.removed_at_ms)
    if isinstance(record, AffiliateRecord):
        data = AFFILIATE.answer(values, format_timestamp)
        return _entity_event("affiliate.registered", record.id, data, record.created_at_ms)
    if isinstance(record, ClaimCheckRecord) and record.status in CHECK_EVENTS:
        # When it changed, where the check says (a close is not dated: sent to every endpoint subscribed now).
        changed = {"claimed": record.claimed_at_ms, "expired": record.expires_at_ms}.get(record.status) or FOREVER
        data = CLAIM_CHECK.answer(values, format_timestamp)
        return _entity_event(CHECK_EVENTS[record.status], record.id, data, changed)
    return None


def _entity_event(event_type: str, subject: str, data: dict, happened_ms: int) -> Event:
    return Event(event_type, subject, we.event(event_type, data), happened_ms)
