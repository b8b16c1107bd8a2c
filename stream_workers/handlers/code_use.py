"""Code uses: the referral of a user by a code's owner (API.md §2), paid a referral reward under the project's
configuration. The state store refused a use past its code's `max_uses` or of a user referred already; the warehouse
refuses one too (set aside) when it holds a referral of its user or as many uses of its code as the `max_uses` it was
used under: a use Redis forgot (it may lose its last second in a crash) cannot make room for one more. (A referral
removed since, API.md §7, is not one.)"""

from collections import defaultdict

import structlog

from rewards.adapters import dedup_archive
from rewards.domain import integrity
from rewards.domain import payouts as engine
from rewards.domain.approvals import held
from rewards.domain.payouts import User
from rewards.ports import StateStore, Warehouse
from schemas.clickhouse.values import param_chunks, param_cost
from schemas.entities import CODE_USE
from schemas.records import CodeUseRecord
from stream_workers import rows
from stream_workers.handlers.base import Handler, Project, Referrals
from stream_workers.writes import Writes

log = structlog.get_logger(__name__)

referral_row = rows.row_of(CODE_USE, "referral_row")


class UseRefused(Exception):
    """A code use the warehouse's referrals refuse: the state store forgot an earlier use (a crash of Redis)."""


class CodeUse(Handler):
    record_type = CodeUseRecord
    pays = True

    def written_key(self, record: CodeUseRecord) -> tuple[str, str]:
        return dedup_archive.CODE_USE, record.use_id

    async def plan(
        self, project_id: str, project: Project, records: list, state: StateStore, warehouse: Warehouse
    ) -> None:
        project.referrals = await _referrals_of(warehouse, project_id, records)
        users = {u for r in records for u in (User(r.owner_identifier, r.owner_identifier_type), _user_of(r))}
        project.screened.update(users)
        if users:
            project.tracking.update(await state.tracking_ids_of(project_id, list(users)))

    def add(self, record: CodeUseRecord, project: Project, writes: Writes, created: int) -> None:
        owner = User(record.owner_identifier, record.owner_identifier_type)
        referred = User(record.user_identifier, record.user_identifier_type)
        source = rows.PayoutSource(record.project_id, record.use_id, "code_use", record.used_at_ms, record.code)
        payouts = engine.code_use_payouts(project.rules.config, owner, referred)
        # The edge refuses uses by or of a blocklisted user (403); one blocked since is refused here (API.md §8).
        same = integrity.self_referrers(referred, [owner], project.tracking)
        verdicts = integrity.screen(payouts, referred, project.blocklisted, same) if payouts else None
        verdicts = held(payouts, verdicts, project.rules.config.approval)
        referral = referral_row(record)
        written = self.written_row(record)
        _count_use(record, referred, project.referrals)  # last: it counts the use in
        writes.rows["referrals"].append(referral)
        writes.add_source(source, payouts, created, verdicts, project.limits)
        writes.rows["dedup_ids"].append(written)

    def set_aside(self, record: CodeUseRecord, writes: Writes) -> None:
        writes.rows["dedup_ids"].append(self.written_row(record, failed=True))


def _user_of(record: CodeUseRecord) -> User:
    return User(record.user_identifier, record.user_identifier_type)


def _count_use(record: CodeUseRecord, user: User, referrals: Referrals) -> None:
    """Count the use in, or raise UseRefused if its user is referred already or its code is at its max_uses."""
    if user in referrals.referred:
        raise UseRefused(f"the user is already referred (a referral the state store forgot): use of {record.code}")
    uses = referrals.uses.get(record.code, 0)
    if record.max_uses is not None and uses >= record.max_uses:
        raise UseRefused(f"code {record.code} is at its max_uses ({record.max_uses}) in the warehouse")
    referrals.referred.add(user)
    referrals.uses[record.code] = uses + 1


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


async def _referrals_of(warehouse: Warehouse, project_id: str, uses: list[CodeUseRecord]) -> Referrals:
    """The referrals the warehouse holds for these uses' codes and users, besides those of the uses themselves (a
    delivery written again after a crash in its middle finds its own)."""
    if not uses:
        return Referrals()
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
    return Referrals(uses={code: n for code, n in counts.items() if n > 0}, referred=referred & users)


def _owned_codes(project_id: str, owned: list[tuple[str, str, str]]) -> dict:
    """The parameters naming these (code, owner type, owner) of a project."""
    return {
        "project": project_id,
        "codes": sorted({code for code, _, _ in owned}),
        "owner_types": sorted({owner_type for _, owner_type, _ in owned}),
        "owners": sorted({owner for _, _, owner in owned}),
    }
