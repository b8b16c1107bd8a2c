"""Conversions (API.md §6): each pays its user and the referrers of its user's chain, under the project's
configuration (the payout engine, rewards/domain/payouts.py), and counts in its referrers' volumes."""

from rewards.adapters import dedup_archive
from rewards.domain import integrity
from rewards.domain import payouts as engine
from rewards.domain.approvals import held
from rewards.domain.claim_checks import OPEN, PENDING_ACCEPTANCE
from rewards.domain.integrity import Rejection
from rewards.domain.limits import check_time_ms
from rewards.domain.payouts import User
from rewards.domain.timestamps import now_ms
from rewards.ports import StateStore, Warehouse
from schemas.clickhouse.values import ch_datetime
from schemas.entities import CONVERSION
from schemas.records import ConversionRecord
from stream_workers import rows
from stream_workers.handlers.base import Handler, Project
from stream_workers.writes import Writes

conversion_row = rows.row_of(CONVERSION, "conversion_row")


class Conversion(Handler):
    record_type = ConversionRecord
    pays = True

    def written_key(self, record: ConversionRecord) -> tuple[str, str]:
        return dedup_archive.EVENT, record.dedup_id

    def written_at(self, record: ConversionRecord) -> int:
        return record.received_ms

    async def plan(
        self, project_id: str, project: Project, records: list, state: StateStore, warehouse: Warehouse
    ) -> None:
        """The referral chains the conversions pay along: a few round trips to the state store per delivery rather
        than two per event."""
        paying = dict.fromkeys(  # each user once, in order
            User(r.user_identifier, r.user_identifier_type) for r in records if project.rules.pays(r.name)
        )
        chains = await state.referrer_chains(project_id, list(paying), engine.MAX_LEVELS)
        affiliates = await state.affiliates_among(project_id, list({chain[0] for chain in chains.values() if chain}))
        # The code each referred user came through: its payouts carry it, and its rebate rate splits the commission.
        referred = await state.referrals_among(project_id, [user for user, chain in chains.items() if chain])
        codes = {user: referral.code for user, referral in referred.items()}
        project.rebates = await state.rebate_rates(project_id, list(dict.fromkeys(codes.values())))
        project.chains, project.tiers, project.codes = chains, {u: a.tier for u, a in affiliates.items()}, codes
        project.screened.update(paying)
        project.screened.update(referrer for chain in chains.values() for referrer in chain)
        related = {u for user, chain in chains.items() if chain for u in (user, *chain)}
        if related:
            project.tracking.update(await state.tracking_ids_of(project_id, list(related)))

    def add(self, record: ConversionRecord, project: Project, writes: Writes, created: int) -> None:
        check_time_ms(record.timestamp_ms)  # a record from before the edge checked it: not storable
        conversion = conversion_row(record)
        conversion.update(rows.counted_columns(record.args, project.rules.config.volume_currency))
        user = User(record.user_identifier, record.user_identifier_type)
        code = project.codes.get(user, "")
        source = rows.PayoutSource(record.project_id, record.dedup_id, "conversion", record.timestamp_ms, code)
        payouts, volumes = _effects(record, user, project)
        verdicts = held(payouts, _verdicts(payouts, user, project), project.rules.config.approval)
        volume_rows = rows.volume_rows(source, volumes)
        written = self.written_row(record)
        writes.rows["conversions"].append(conversion)
        writes.processed[record.project_id].append(record.dedup_id)
        status = PENDING_ACCEPTANCE if project.rules.config.require_acceptance else OPEN
        writes.add_source(source, payouts, created, verdicts, project.limits, status)
        writes.rows["affiliate_volumes"] += volume_rows
        writes.rows["dedup_ids"].append(written)
        if record.replay:  # written at last: its status past the hot window reads processed, no longer failed
            writes.rows["dedup_ids"].append(dedup_archive.row(record.project_id, dedup_archive.EVENT, record.dedup_id,
                                                              ch_datetime(now_ms())))  # fmt: skip

    def set_aside(self, record: ConversionRecord, writes: Writes) -> None:
        writes.failed[record.project_id].append(record.dedup_id)
        writes.rows["dedup_ids"].append(self.written_row(record, failed=True))


def _effects(record: ConversionRecord, user: User, project: Project) -> tuple[list[engine.Payout], list[engine.Volume]]:
    if not project.rules.pays(record.name):
        return [], []
    chain = project.chains.get(user, [])
    l1_tier = project.tiers.get(chain[0]) if chain else None
    rebate = project.rebates.get(project.codes[user]) if chain and user in project.codes else None
    conversion = engine.Conversion(record.name, user, record.timestamp_ms, record.args)
    return project.rules.effects(conversion, chain, l1_tier, rebate)


def _verdicts(payouts: list[engine.Payout], user: User, project: Project) -> list[Rejection | None] | None:
    """What the integrity rules refuse of a conversion's payouts (API.md §8); None: nothing to screen."""
    if not payouts:
        return None
    same = _self_referred(user, project)
    return integrity.screen(payouts, user, project.blocklisted, same) if project.blocklisted or same else None


def _self_referred(user: User, project: Project) -> set[User]:
    """The referrers of the user's chain that are the user itself by what the service can see (API.md §8)."""
    chain = project.chains.get(user)
    return integrity.self_referrers(user, chain, project.tracking) if chain else set()
