"""Turn deliveries of the event log into rows of the warehouse.

A delivery is written with one insert per table under the delivery's token, so a delivery seen
again after a crash (written, not yet committed) writes nothing twice. Only then does the state
store learn of it (events marked processed, new claim checks registered), idempotently too.

One bad record never holds up the others: each record's rows are computed on their own, and a record
that cannot be read or computed (computing is pure, so such a failure would repeat forever) becomes a
row of `dead_letters`, with the reason, instead of its rows. Failures of the engines (reading the state
store, inserting) fail the whole delivery, which is retried.
"""

from collections import defaultdict
from dataclasses import dataclass, field

import structlog
from prometheus_client import Counter
from pydantic import ValidationError

from rewards.domain import claim_checks
from rewards.domain import payouts as engine
from rewards.domain.limits import check_time_ms
from rewards.domain.payout_config import EMPTY_CONFIG, PayoutConfig, TokenCurrency
from rewards.domain.payouts import User
from rewards.domain.timestamps import now_ms
from rewards.ports import DeadLetterLog, Delivery, StateStore, Warehouse
from schemas.records import (
    AffiliateRecord,
    ClaimCheckRecord,
    CodesCreatedRecord,
    CodeUseRecord,
    ConversionRecord,
    Undecodable,
)
from stream_workers import rows

log = structlog.get_logger(__name__)
DEAD_LETTERS = Counter("rewards_worker_dead_letters_total", "Records set aside as dead letters", ["record_type"])

TABLES = (
    "conversions", "payouts", "affiliate_volumes", "referrals", "referral_codes", "affiliates", "claim_checks",
    "dead_letters",
)  # fmt: skip


@dataclass
class _Writes:
    rows: dict[str, list[dict]] = field(default_factory=lambda: defaultdict(list))
    processed: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    failed: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # conversions set aside
    new_checks: dict[str, list[claim_checks.ClaimCheck]] = field(default_factory=lambda: defaultdict(list))
    payouts: int = 0

    def merge(self, other: "_Writes") -> None:
        for table, table_rows in other.rows.items():
            self.rows[table] += table_rows
        for project_id, dedup_ids in other.processed.items():
            self.processed[project_id] += dedup_ids
        for project_id, checks in other.new_checks.items():
            self.new_checks[project_id] += checks
        self.payouts += other.payouts


@dataclass(frozen=True)
class _Project:
    """What a delivery's records need of their project's state, read once per delivery."""

    config: PayoutConfig
    chains: dict[User, list[User]]  # the referrers of the users whose conversions pay
    tiers: dict[User, str | None]  # the tier of each level-1 referrer among them


@dataclass(frozen=True)
class _Unusable:
    """A project whose stored configuration cannot be read (stored before today's checks)."""

    reason: str


async def process_delivery(
    delivery: Delivery, state: StateStore, warehouse: Warehouse, dead_letters: DeadLetterLog | None = None
) -> int:
    """Write one delivery; returns the number of payouts written. Dead letters are also published on
    `dead_letters` when given (the production shape's `rewards.events.dlq` topic)."""
    writes = _Writes()
    created = now_ms()
    records = await _not_yet_processed(delivery.records, state)
    projects = await _projects_of(records, state)
    for record in records:
        _add_alone(record, projects, writes, created, delivery.token)
    for table in TABLES:
        await warehouse.insert(table, writes.rows[table], f"{delivery.token}:{table}")
    if dead_letters is not None and writes.rows["dead_letters"]:
        # Before the marks: a delivery retried after a failed publish would find its ids done and drop them.
        await dead_letters.publish(writes.rows["dead_letters"])
    for project_id, checks in writes.new_checks.items():
        await state.register_claim_checks(project_id, checks)
    for project_id, dedup_ids in writes.processed.items():
        await state.mark_processed(project_id, dedup_ids)
    for project_id, dedup_ids in writes.failed.items():
        await state.mark_failed(project_id, dedup_ids)
    _count_dead_letters(writes.rows["dead_letters"], delivery.token)
    return writes.payouts


def _add_alone(record, projects: dict, writes: _Writes, created: int, token: str) -> None:
    """Add the record's rows, or, if it cannot be read or computed, a dead letter in their place."""
    if isinstance(record, Undecodable):
        _set_aside(record, record.reason, writes, created, token)
        return
    project = projects[record.project_id]
    if isinstance(project, _Unusable):
        if isinstance(record, ConversionRecord | CodeUseRecord):  # the only records the configuration pays
            _set_aside(record, project.reason, writes, created, token)
            return
        project = _Project(EMPTY_CONFIG, {}, {})
    own = _Writes()
    try:
        _add(record, project, own, created)
    except Exception as exc:  # deterministic: computing a record's rows reads nothing but the record
        _set_aside(record, f"{type(exc).__name__}: {exc}", writes, created, token)
        return
    writes.merge(own)


def _set_aside(record, reason: str, writes: _Writes, created: int, token: str) -> None:
    writes.rows["dead_letters"].append(rows.dead_letter_row(record, reason, token, created))
    if isinstance(record, ConversionRecord):
        writes.failed[record.project_id].append(record.dedup_id)


def _count_dead_letters(dead: list[dict], token: str) -> None:
    """Counted and logged once written (a delivery retried after a failed insert counts them once)."""
    for row in dead:
        DEAD_LETTERS.labels(row["record_type"]).inc()
        log.error(
            "record set aside as a dead letter",
            project_id=row["project_id"],
            record_type=row["record_type"],
            source_id=row["source_id"],
            reason=row["reason"],
            delivery=token,
        )


async def _not_yet_processed(records: list, state: StateStore) -> list:
    """Drop conversions already written (published twice, e.g. a retry after an ingest process died
    between its Kafka commit and its Redis bookkeeping) and repeats within the delivery."""
    conversions: dict[str, list[str]] = defaultdict(list)
    for record in records:
        if isinstance(record, ConversionRecord):
            conversions[record.project_id].append(record.dedup_id)
    done = {(p, d) for p, ids in conversions.items() for d in await state.processed_among(p, ids)}
    kept = []
    for record in records:
        if isinstance(record, ConversionRecord):
            key = (record.project_id, record.dedup_id)
            if key in done:
                continue
            done.add(key)
        kept.append(record)
    return kept


async def _projects_of(records: list, state: StateStore) -> dict[str, _Project | _Unusable]:
    """Each project's config, and the referral chains its conversions pay along: a few round trips to
    the state store per delivery rather than two per event."""
    paying: dict[str, list[User]] = defaultdict(list)
    configs: dict[str, PayoutConfig | _Unusable] = {}
    for record in records:
        if isinstance(record, Undecodable):
            continue
        if record.project_id not in configs:
            configs[record.project_id] = await _config_of(record.project_id, state)
        config = configs[record.project_id]
        if isinstance(record, ConversionRecord) and isinstance(config, PayoutConfig) and _pays(record, config):
            paying[record.project_id].append(User(record.user_identifier, record.user_identifier_type))
    projects: dict[str, _Project | _Unusable] = {}
    for project_id, config in configs.items():
        if isinstance(config, _Unusable):
            projects[project_id] = config
            continue
        chains = await state.referrer_chains(project_id, paying[project_id], engine.MAX_LEVELS)
        affiliates = await state.affiliates_among(project_id, list({chain[0] for chain in chains.values() if chain}))
        projects[project_id] = _Project(config, chains, {user: a.tier for user, a in affiliates.items()})
    return projects


async def _config_of(project_id: str, state: StateStore) -> PayoutConfig | _Unusable:
    try:
        return await state.get_config(project_id)
    except ValidationError as exc:  # the stored document, not the store: reading it again would fail again
        return _Unusable(f"the project's stored payout configuration is invalid: {exc}"[:1000])


def _pays(record: ConversionRecord, config: PayoutConfig) -> bool:
    return config.conversion_for(record.name) is not None or bool(config.campaigns)


def _add(record, project: _Project, writes: _Writes, created: int) -> None:
    config = project.config
    if isinstance(record, ConversionRecord):
        check_time_ms(record.timestamp_ms)  # a record from before the edge checked it: not storable
        writes.rows["conversions"].append(rows.conversion_row(record))
        source = rows.conversion_source(record)
        payouts, volumes = _conversion_effects(record, project)
        _add_payouts(source, payouts, writes, created)
        writes.rows["affiliate_volumes"] += rows.volume_rows(source, volumes)
        writes.processed[record.project_id].append(record.dedup_id)
    elif isinstance(record, CodeUseRecord):
        owner = User(record.owner_identifier, record.owner_identifier_type)
        referred = User(record.user_identifier, record.user_identifier_type)
        _add_payouts(rows.code_use_source(record), engine.code_use_payouts(config, owner, referred), writes, created)
        writes.rows["referrals"].append(rows.referral_row(record))
    elif isinstance(record, CodesCreatedRecord):
        writes.rows["referral_codes"] += rows.code_rows(record)
    elif isinstance(record, AffiliateRecord):
        writes.rows["affiliates"].append(rows.affiliate_row(record))
    elif isinstance(record, ClaimCheckRecord):
        writes.rows["claim_checks"].append(rows.claim_check_record_row(record))


def _add_payouts(source: rows.PayoutSource, payouts: list[engine.Payout], writes: _Writes, created: int) -> None:
    writes.rows["payouts"] += rows.payout_rows(source, payouts, created)
    writes.payouts += len(payouts)
    for index, payout in enumerate(payouts):
        if isinstance(payout.currency, TokenCurrency):
            payout_id = rows.payout_id(source, index)
            check = claim_checks.opened(source.project_id, payout_id, source.source_id, payout, source.happened_at_ms)
            writes.rows["claim_checks"].append(rows.claim_check_row(source.project_id, check))
            writes.new_checks[source.project_id].append(check)


def _conversion_effects(record: ConversionRecord, project: _Project) -> tuple[list[engine.Payout], list[engine.Volume]]:
    if not _pays(record, project.config):
        return [], []
    user = User(record.user_identifier, record.user_identifier_type)
    chain = project.chains.get(user, [])
    l1_tier = project.tiers.get(chain[0]) if chain else None
    event = engine.Conversion(record.name, user, record.timestamp_ms, record.args)
    config = project.config
    return engine.conversion_payouts(event, config, chain, l1_tier), engine.conversion_volumes(event, config, chain)
