"""Turn deliveries of the event log into rows of the warehouse.

A delivery is written with one insert per table under the delivery's token, so a delivery seen
again after a crash (written, not yet committed) writes nothing twice. Only then does the state
store learn of it (events marked processed, new claim checks registered), idempotently too.

The warehouse refuses a second payout on its own, whatever the state store forgot (Redis keeps ids for a short
hot window only, and may lose its last second in a crash): each delivery's last insert is its `dedup_ids` rows
(rewards.adapters.dedup_archive), and the ids of a delivery that the state store has not marked done are looked up there
first; those found were written whole by an earlier delivery and are dropped. A code use is refused (set aside)
when the warehouse already holds a referral of its user or as many uses of its code as the `max_uses` it was
used under: a use Redis forgot cannot make room for one more. (A referral removed since, API.md §7, is not one.)

One bad record never holds up the others: each record's rows are computed on their own, and a record
that cannot be read or computed (computing is pure, so such a failure would repeat forever) becomes a
row of `dead_letters`, with the reason, instead of its rows. Failures of the engines (reading the state
store, inserting) fail the whole delivery, which is retried.
"""

from collections import defaultdict
from dataclasses import dataclass, field, replace
from decimal import Decimal

import structlog
from prometheus_client import Counter
from pydantic import ValidationError

from rewards.adapters import dedup_archive
from rewards.domain import claim_checks
from rewards.domain import payouts as engine
from rewards.domain.limits import check_time_ms
from rewards.domain.payout_config import EMPTY_CONFIG, TokenCurrency
from rewards.domain.payouts import User
from rewards.domain.timestamps import now_ms
from rewards.ports import DeadLetterLog, Delivery, IngestStore, ProjectStore, StateStore, Warehouse
from schemas.clickhouse.values import param_chunks, param_cost
from schemas.records import (
    AffiliateRecord,
    ClaimCheckRecord,
    CodesCreatedRecord,
    CodeUseRecord,
    ConversionRecord,
    ReferralRemovedRecord,
    TrackingEventRecord,
    Undecodable,
)
from stream_workers import rows

log = structlog.get_logger(__name__)
DEAD_LETTERS = Counter("rewards_worker_dead_letters_total", "Records set aside as dead letters", ["record_type"])

# dedup_ids last: an id found there means every row of its record was written.
TABLES = (
    "conversions", "payouts", "affiliate_volumes", "referrals", "referral_codes", "affiliates", "claim_checks",
    "tracking_events", "referral_removals", "dead_letters", "dedup_ids",
)  # fmt: skip
DEFAULT_WINDOW_S = 35 * 86400.0


@dataclass
class _Writes:
    rows: dict[str, list[dict]] = field(default_factory=lambda: defaultdict(list))
    processed: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    failed: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # conversions set aside
    new_checks: dict[str, list[claim_checks.ClaimCheck]] = field(default_factory=lambda: defaultdict(list))
    payouts: int = 0


@dataclass
class _Referrals:
    """What the warehouse holds of a project's referrals for a delivery's code uses (counted on as uses are added)."""

    uses: dict[str, int] = field(default_factory=dict)  # uses of each code used in the delivery
    referred: set[User] = field(default_factory=set)  # users of the delivery already referred


@dataclass(frozen=True)
class _Project:
    """What a delivery's records need of their project's state, read once per delivery."""

    rules: engine.Rules  # the project's configuration, looked up once per delivery
    chains: dict[User, list[User]]  # the referrers of the users whose conversions pay
    tiers: dict[User, str | None]  # the tier of each level-1 referrer among them
    referrals: _Referrals = field(default_factory=_Referrals)
    codes: dict[User, str] = field(default_factory=dict)  # the code each referred user among them was referred through
    rebates: dict[str, Decimal] = field(default_factory=dict)  # the rebate rates of those codes that have one


@dataclass(frozen=True)
class _Unusable:
    """A project whose stored configuration cannot be read (stored before today's checks)."""

    reason: str


async def process_delivery(
    delivery: Delivery,
    state: StateStore,
    warehouse: Warehouse,
    dead_letters: DeadLetterLog | None = None,
    window_s: float = DEFAULT_WINDOW_S,
) -> int:
    """Write one delivery; returns the number of payouts written. Dead letters are also published on
    `dead_letters` when given (the production shape's `rewards.events.dlq` topic). `window_s`: the dedup window."""
    records, projects = await read_state(delivery.records, state, warehouse, window_s)
    writes = compute(records, projects, now_ms(), delivery.token)
    await insert(writes, delivery.token, warehouse)
    if dead_letters is not None and writes.rows["dead_letters"]:
        # Before the marks: a delivery retried after a failed publish would find its ids done and drop them.
        await dead_letters.publish(writes.rows["dead_letters"])
    await mark(writes, state)
    _count_dead_letters(writes.rows["dead_letters"], delivery.token)
    return writes.payouts


# The steps of a delivery, apart so that bench/workers.py can time each.


async def read_state(
    records: list, state: StateStore, warehouse: Warehouse, window_s: float = DEFAULT_WINDOW_S
) -> tuple[list, dict]:
    """The records still to write, and what they need of their projects' state (a few round trips per project)."""
    records = await _not_yet_written(records, state, warehouse, window_s)
    return records, await _projects_of(records, state, warehouse)


def compute(records: list, projects: dict, created: int, token: str) -> _Writes:
    """Every row of the records (pure: reads nothing but its arguments)."""
    writes = _Writes()
    for record in records:
        _add_alone(record, projects, writes, created, token)
    return writes


async def insert(writes: _Writes, token: str, warehouse: Warehouse) -> None:
    """One insert per table, under the delivery's token."""
    for table in TABLES:
        await warehouse.insert(table, writes.rows[table], f"{token}:{table}")


async def mark(writes: _Writes, state: StateStore) -> None:
    """What the state store learns once the rows are written (idempotent)."""
    for project_id, checks in writes.new_checks.items():
        await state.register_claim_checks(project_id, checks)
    for project_id, dedup_ids in writes.processed.items():
        await state.mark_processed(project_id, dedup_ids)
    for project_id, dedup_ids in writes.failed.items():
        await state.mark_failed(project_id, dedup_ids)


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
        project = _Project(engine.Rules(EMPTY_CONFIG), {}, {})
    try:
        _add(record, project, writes, created)
    except Exception as exc:  # deterministic: computing a record's rows reads nothing but the record
        _set_aside(record, f"{type(exc).__name__}: {exc}", writes, created, token)


def _set_aside(record, reason: str, writes: _Writes, created: int, token: str) -> None:
    writes.rows["dead_letters"].append(rows.dead_letter_row(record, reason, token, created))
    if isinstance(record, ConversionRecord):
        writes.failed[record.project_id].append(record.dedup_id)
    if isinstance(record, ConversionRecord | CodeUseRecord):
        writes.rows["dedup_ids"].append(_written_row(record, failed=True))


def _written_row(record, failed: bool = False) -> dict:
    """The record's `dedup_ids` row: what tells a later delivery that it was written."""
    kind, key = _written_key(record)
    at = record.received_ms if isinstance(record, ConversionRecord) else now_ms()
    return dedup_archive.row(record.project_id, kind, key, rows.ch_datetime(at), failed)


def _written_key(record) -> tuple[str, str] | None:
    """(kind, id) of a record that must be written once, as `dedup_ids` holds it; None for the others."""
    if isinstance(record, ConversionRecord):
        return dedup_archive.EVENT, record.dedup_id
    if isinstance(record, CodeUseRecord):
        return dedup_archive.CODE_USE, record.use_id
    if isinstance(record, AffiliateRecord):
        return dedup_archive.AFFILIATE, record.id
    if isinstance(record, CodesCreatedRecord) and record.codes:
        return dedup_archive.CODES_CREATED, record.codes[0]
    if isinstance(record, ReferralRemovedRecord):
        return dedup_archive.REFERRAL_REMOVED, record.id
    return None  # claim checks: snapshots, the warehouse keeps the latest version of each


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


async def _not_yet_written(records: list, state: IngestStore, warehouse: Warehouse, window_s: float) -> list:
    """Drop records already written (published twice: an ingest retry after Redis forgot the id, the outbox
    relaying a change again) and repeats within the delivery. Ids the state store had not marked done but the
    warehouse holds are marked now."""
    keys: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for record in records:
        if (key := _written_key(record)) is not None:
            keys[record.project_id].add(key)
    done: set[tuple[str, tuple[str, str]]] = set()
    for project_id, project_keys in keys.items():
        events = [d for kind, d in project_keys if kind == dedup_archive.EVENT]
        marked = await state.processed_among(project_id, events) if events else set()
        done |= {(project_id, (dedup_archive.EVENT, d)) for d in marked}
        unsure = project_keys - {(dedup_archive.EVENT, d) for d in marked}
        written = await dedup_archive.written_among(warehouse, project_id, unsure, window_s)
        done |= {(project_id, key) for key in written}
        await _mark_found(state, project_id, written)
    kept = []
    for record in records:
        if (key := _written_key(record)) is not None:
            if (record.project_id, key) in done:
                continue
            done.add((record.project_id, key))
        kept.append(record)
    return kept


async def _mark_found(state: IngestStore, project_id: str, written: dict[tuple[str, str], str]) -> None:
    """Events the warehouse holds that the state store had not marked done (its marks were lost): mark them."""
    for status, mark in (("processed", state.mark_processed), ("failed", state.mark_failed)):
        ids = [d for (kind, d), found in written.items() if kind == dedup_archive.EVENT and found == status]
        if ids:
            await mark(project_id, ids)


async def _projects_of(records: list, state: StateStore, warehouse: Warehouse) -> dict[str, _Project | _Unusable]:
    """Each project's config, and the referral chains its conversions pay along: a few round trips to
    the state store per delivery rather than two per event; and what the warehouse holds of its code uses'
    referrals."""
    paying: dict[str, dict[User, None]] = defaultdict(dict)  # each user once, in order
    configs: dict[str, engine.Rules | _Unusable] = {}
    for record in records:
        if isinstance(record, Undecodable):
            continue
        if record.project_id not in configs:
            configs[record.project_id] = await _config_of(record.project_id, state)
        rules = configs[record.project_id]
        if isinstance(record, ConversionRecord) and isinstance(rules, engine.Rules) and rules.pays(record.name):
            paying[record.project_id][User(record.user_identifier, record.user_identifier_type)] = None
    projects: dict[str, _Project | _Unusable] = {}
    for project_id, rules in configs.items():
        if isinstance(rules, _Unusable):
            projects[project_id] = rules
            continue
        chains = await state.referrer_chains(project_id, list(paying[project_id]), engine.MAX_LEVELS)
        affiliates = await state.affiliates_among(project_id, list({chain[0] for chain in chains.values() if chain}))
        tiers = {user: a.tier for user, a in affiliates.items()}
        # The code each referred user came through: its payouts carry it, and its rebate rate splits the commission.
        referred = await state.referrals_among(project_id, [user for user, chain in chains.items() if chain])
        codes = {user: referral.code for user, referral in referred.items()}
        rebates = await state.rebate_rates(project_id, list(dict.fromkeys(codes.values())))
        uses = [r for r in records if isinstance(r, CodeUseRecord) and r.project_id == project_id]
        referrals = await _referrals_of(warehouse, project_id, uses)
        projects[project_id] = _Project(rules, chains, tiers, referrals, codes, rebates)
    return projects


# A code belongs to one owner: the owner columns only narrow the read to the primary key's range. (No tuple
# parameters: see schemas.clickhouse.values.) Each list goes in chunks (param_chunks), so each query's
# figures add up across chunks: a code's referrals, and those of them that are this delivery's own uses, are counted
# apart.
REFERRALS_OF_CODES = """
SELECT code, count() AS n FROM referrals
WHERE project_id = {project:String} AND referrer_identifier_type IN {owner_types:Array(String)}
  AND referrer_identifier IN {owners:Array(String)} AND code IN {codes:Array(String)}
GROUP BY code
"""
OWN_USES_OF_CODES = """
SELECT code, count() AS n FROM referrals
WHERE project_id = {project:String} AND referrer_identifier_type IN {owner_types:Array(String)}
  AND referrer_identifier IN {owners:Array(String)} AND code IN {codes:Array(String)} AND use_id IN {uses:Array(String)}
GROUP BY code
"""
REFERRALS_OF_USERS = """
SELECT DISTINCT user_identifier_type AS user_type, user_identifier AS user_id, use_id, toString(referred_at) AS at
FROM referrals
WHERE project_id = {project:String} AND user_identifier IN {users:Array(String)}
"""
# A referral removed since (API.md §7 deleteReferral) is not one: its user may be referred again. Asked only about
# users the warehouse holds a referral of (rare: the state store refuses their uses unless the referral was removed).
REMOVALS_OF_USERS = """
SELECT DISTINCT user_identifier_type AS user_type, user_identifier AS user_id, toString(referred_at) AS at
FROM referral_removals
WHERE project_id = {project:String} AND user_identifier IN {users:Array(String)}
"""


async def _referrals_of(warehouse: Warehouse, project_id: str, uses: list[CodeUseRecord]) -> _Referrals:
    """The referrals the warehouse holds for these uses' codes and users, besides those of the uses themselves (a
    delivery written again after a crash in its middle finds its own)."""
    if not uses:
        return _Referrals()
    own = {u.use_id for u in uses}
    counts: dict[str, int] = defaultdict(int)
    codes = sorted({(u.code, u.owner_identifier_type, u.owner_identifier) for u in uses})
    for chunk in param_chunks(codes, cost=lambda owned: param_cost(*owned)):
        for row in await warehouse.query(REFERRALS_OF_CODES, _owned_codes(project_id, chunk)):
            counts[row["code"]] += int(row["n"])
    by_use = sorted(uses, key=lambda u: u.use_id)
    for chunk in param_chunks(
        by_use, cost=lambda u: param_cost(u.use_id, u.code, u.owner_identifier_type, u.owner_identifier)
    ):
        owned = [(u.code, u.owner_identifier_type, u.owner_identifier) for u in chunk]
        params = {**_owned_codes(project_id, owned), "uses": [u.use_id for u in chunk]}
        for row in await warehouse.query(OWN_USES_OF_CODES, params):
            counts[row["code"]] -= int(row["n"])
    users = {User(u.user_identifier, u.user_identifier_type) for u in uses}
    held: list[dict] = []  # the referrals the warehouse holds of these users, but this delivery's own
    for chunk in param_chunks(sorted({u.user_identifier for u in uses})):
        found = await warehouse.query(REFERRALS_OF_USERS, {"project": project_id, "users": chunk})
        held += [r for r in found if r["use_id"] not in own]
    removed: set[tuple[str, str, str]] = set()
    for chunk in param_chunks(sorted({r["user_id"] for r in held})):
        found = await warehouse.query(REMOVALS_OF_USERS, {"project": project_id, "users": chunk})
        removed |= {(r["user_type"], r["user_id"], r["at"]) for r in found}
    referred = {
        User(r["user_id"], r["user_type"]) for r in held if (r["user_type"], r["user_id"], r["at"]) not in removed
    }
    if negative := {code: n for code, n in counts.items() if n < 0}:  # two workers wrote this delivery at once
        log.warning("more of a delivery's own uses found than referrals of their codes", codes=negative)
    return _Referrals(uses={code: n for code, n in counts.items() if n > 0}, referred=referred & users)


def _owned_codes(project_id: str, owned: list[tuple[str, str, str]]) -> dict:
    """The parameters naming these (code, owner type, owner) of a project."""
    return {
        "project": project_id,
        "codes": sorted({code for code, _, _ in owned}),
        "owner_types": sorted({owner_type for _, owner_type, _ in owned}),
        "owners": sorted({owner for _, _, owner in owned}),
    }


async def _config_of(project_id: str, state: ProjectStore) -> engine.Rules | _Unusable:
    try:
        return engine.Rules(await state.get_config(project_id))
    except ValidationError as exc:  # the stored document, not the store: reading it again would fail again
        return _Unusable(f"the project's stored payout configuration is invalid: {exc}"[:1000])


def _add(record, project: _Project, writes: _Writes, created: int) -> None:
    """Add the record's rows. Every row is computed first (that may raise), then added (that cannot): a record
    that fails leaves nothing behind, and is set aside whole."""
    if isinstance(record, ConversionRecord):
        check_time_ms(record.timestamp_ms)  # a record from before the edge checked it: not storable
        conversion = rows.conversion_row(record)
        source = rows.conversion_source(record)
        code = project.codes.get(User(record.user_identifier, record.user_identifier_type))
        if code is not None:
            source = replace(source, code=code)
        payouts, volumes = _conversion_effects(record, project)
        payout_rows, checks = _payout_rows(source, payouts, created)
        volume_rows = rows.volume_rows(source, volumes)
        written = _written_row(record)
        writes.rows["conversions"].append(conversion)
        writes.processed[record.project_id].append(record.dedup_id)
    elif isinstance(record, CodeUseRecord):
        owner = User(record.owner_identifier, record.owner_identifier_type)
        referred = User(record.user_identifier, record.user_identifier_type)
        source = rows.code_use_source(record)
        payouts = engine.code_use_payouts(project.rules.config, owner, referred)
        payout_rows, checks = _payout_rows(source, payouts, created)
        volume_rows = []
        referral = rows.referral_row(record)
        written = _written_row(record)
        _count_use(record, referred, project.referrals)  # last: it counts the use in
        writes.rows["referrals"].append(referral)
    elif isinstance(record, ReferralRemovedRecord):
        removal = rows.referral_removal_row(record)
        written = _written_row(record)
        # A use of the same user later in the delivery is not refused for the referral removed (it is not one).
        project.referrals.referred.discard(User(record.user_identifier, record.user_identifier_type))
        writes.rows["referral_removals"].append(removal)
        writes.rows["dedup_ids"].append(written)
        return
    else:
        table, new_rows = _state_rows(record)
        written = _written_row(record) if _written_key(record) is not None else None
        writes.rows[table] += new_rows
        if written is not None:
            writes.rows["dedup_ids"].append(written)
        return
    writes.rows["payouts"] += payout_rows
    writes.payouts += len(payout_rows)
    for check, check_row in checks:
        writes.rows["claim_checks"].append(check_row)
        writes.new_checks[source.project_id].append(check)
    writes.rows["affiliate_volumes"] += volume_rows
    writes.rows["dedup_ids"].append(written)


def _state_rows(record) -> tuple[str, list[dict]]:
    """The rows of a record of a state change (codes created, an affiliate, a claim check's new state) or of a
    tracking event (API.md §7: stored, pays nothing; its clicks and attributions are the views' figures)."""
    if isinstance(record, CodesCreatedRecord):
        return "referral_codes", rows.code_rows(record)
    if isinstance(record, AffiliateRecord):
        return "affiliates", [rows.affiliate_row(record)]
    if isinstance(record, ClaimCheckRecord):
        return "claim_checks", [rows.claim_check_record_row(record)]
    if isinstance(record, TrackingEventRecord):
        return "tracking_events", [rows.tracking_event_row(record)]
    raise TypeError(f"not a record of schemas.records: {type(record).__name__}")


class UseRefused(Exception):
    """A code use the warehouse's referrals refuse: the state store forgot an earlier use (a crash of Redis)."""


def _count_use(record: CodeUseRecord, user: User, referrals: _Referrals) -> None:
    """Count the use in, or raise UseRefused if its user is referred already or its code is at its max_uses."""
    if user in referrals.referred:
        raise UseRefused(f"the user is already referred (a referral the state store forgot): use of {record.code}")
    uses = referrals.uses.get(record.code, 0)
    if record.max_uses is not None and uses >= record.max_uses:
        raise UseRefused(f"code {record.code} is at its max_uses ({record.max_uses}) in the warehouse")
    referrals.referred.add(user)
    referrals.uses[record.code] = uses + 1


def _payout_rows(
    source: rows.PayoutSource, payouts: list[engine.Payout], created: int
) -> tuple[list[dict], list[tuple[claim_checks.ClaimCheck, dict]]]:
    """The payouts' rows, and a claim check (with its row) for each payout in an on-chain currency."""
    checks = []
    for index, payout in enumerate(payouts):
        if isinstance(payout.currency, TokenCurrency):
            payout_id = rows.payout_id(source, index)
            check = claim_checks.opened(source.project_id, payout_id, source.source_id, payout, source.happened_at_ms)
            checks.append((check, rows.claim_check_row(source.project_id, check)))
    return rows.payout_rows(source, payouts, created), checks


def _conversion_effects(record: ConversionRecord, project: _Project) -> tuple[list[engine.Payout], list[engine.Volume]]:
    if not project.rules.pays(record.name):
        return [], []
    user = User(record.user_identifier, record.user_identifier_type)
    chain = project.chains.get(user, [])
    l1_tier = project.tiers.get(chain[0]) if chain else None
    rebate = project.rebates.get(project.codes[user]) if chain and user in project.codes else None
    conversion = engine.Conversion(record.name, user, record.timestamp_ms, record.args)
    return project.rules.effects(conversion, chain, l1_tier, rebate)
