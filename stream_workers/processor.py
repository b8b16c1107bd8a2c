"""Turn deliveries of the event log into conversions and payouts in the warehouse.

A delivery is written with one insert per table under the delivery's token, so a delivery seen
again after a crash (written, not yet committed) writes nothing twice.
"""

from collections import defaultdict

from rewards.domain import payouts as engine
from rewards.domain.payouts import User
from rewards.domain.timestamps import now_ms
from rewards.ports import Delivery, StateStore, Warehouse
from schemas.records import CodeUseRecord, ConversionRecord
from stream_workers import rows


async def process_delivery(delivery: Delivery, state: StateStore, warehouse: Warehouse) -> int:
    """Write one delivery; returns the number of payouts written."""
    created = now_ms()
    configs: dict = {}
    conversion_rows: list[dict] = []
    payout_rows: list[dict] = []
    processed: dict[str, list[str]] = defaultdict(list)
    for record in delivery.records:
        if record.project_id not in configs:
            configs[record.project_id] = await state.get_config(record.project_id)
        config = configs[record.project_id]
        if isinstance(record, ConversionRecord):
            conversion_rows.append(rows.conversion_row(record))
            payouts = await _conversion_payouts(record, config, state)
            payout_rows += rows.payout_rows(rows.conversion_source(record), payouts, created)
            processed[record.project_id].append(record.dedup_id)
        elif isinstance(record, CodeUseRecord):
            owner = User(record.owner_identifier, record.owner_identifier_type)
            referred = User(record.user_identifier, record.user_identifier_type)
            payouts = engine.code_use_payouts(config, owner, referred)
            payout_rows += rows.payout_rows(rows.code_use_source(record), payouts, created)
    await warehouse.insert("conversions", conversion_rows, f"{delivery.token}:conversions")
    await warehouse.insert("payouts", payout_rows, f"{delivery.token}:payouts")
    for project_id, dedup_ids in processed.items():
        await state.mark_processed(project_id, dedup_ids)
    return len(payout_rows)


async def _conversion_payouts(record: ConversionRecord, config, state: StateStore) -> list[engine.Payout]:
    if config.conversion_for(record.name) is None and not config.campaigns:
        return []
    user = User(record.user_identifier, record.user_identifier_type)
    chain = await state.referrer_chain(record.project_id, user, engine.MAX_LEVELS)
    l1_tier = None
    if chain:
        affiliate = await state.get_affiliate(record.project_id, chain[0])
        l1_tier = affiliate.tier if affiliate else None
    event = engine.Conversion(record.name, user, record.timestamp_ms, record.args)
    return engine.conversion_payouts(event, config, chain, l1_tier)
