"""Claim check read models (API.md §5): SQL over the versioned `claim_checks` table.

`FINAL` keeps each check's latest version. It is applied in an inner query restricted on the
sorting key (project, user), and every filter on other columns sits outside it, so a filter never
sees an outdated version of a check (claim history's `status = 'claimed'` is the one exception, safe
as explained there).
"""

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from query_api.paging import counted_page
from rewards.domain import claim_signing
from rewards.domain.claim_checks import CLOSED, ClaimCheck
from rewards.domain.payout_config import TokenCurrency
from rewards.domain.payouts import User
from rewards.ports import ClaimCheckStore, ProjectStore, Warehouse
from schemas.clickhouse.values import time_window

CURRENCY = "currency_address, currency_chain_id, currency_name, currency_decimals"


def _key_prefix(user: User | None) -> tuple[str, dict]:
    """The condition on the sorting key: the project's checks, or one user's."""
    where = "project_id = {project:String}"
    if user is None:
        return where, {}
    where += " AND user_identifier_type = {user_type:String} AND user_identifier = {user_id:String}"
    return where, {"user_type": user.identifier_type, "user_id": user.identifier}


def _latest(user: User | None) -> tuple[str, dict]:
    where, params = _key_prefix(user)
    return f"SELECT * FROM claim_checks FINAL WHERE {where}", params


def _currency(row: dict) -> TokenCurrency:
    return TokenCurrency(
        address=row["currency_address"],
        chain_id=int(row["currency_chain_id"]),
        name=row["currency_name"],
        decimals=int(row["currency_decimals"]),
    )


@dataclass(frozen=True)
class HistoryRow:
    hash: str
    currency: TokenCurrency
    amount: int
    claimed_ms: int


async def claim_history(
    warehouse: Warehouse, project_id: str, user: User, offset: int, limit: int
) -> tuple[list[HistoryRow], int]:
    """One row per (hash, currency) of the user's claimed checks, the latest claim first."""
    where, params = _key_prefix(user)
    # `status = 'claimed'` may sit beside FINAL: claimed is a check's last status (only the same claim can
    # follow it), so no outdated version passes it. One query level fewer to plan: ~15% of the query's CPU.
    sql = (
        f"SELECT hash, currency_address, currency_chain_id, any(currency_name) AS currency_name,"
        f" any(currency_decimals) AS currency_decimals, toString(sum(amount)) AS amount_text,"
        f" toUnixTimestamp64Milli(max(claimed_at)) AS claimed_ms, count() OVER () AS total_count"
        f" FROM claim_checks FINAL WHERE {where} AND status = 'claimed'"
        f" GROUP BY hash, currency_address, currency_chain_id"
        f" ORDER BY claimed_ms DESC, hash, currency_address, currency_chain_id"
    )
    rows, total = await counted_page(warehouse, sql, {**params, "project": project_id}, offset, limit)
    return [HistoryRow(r["hash"], _currency(r), int(r["amount_text"]), int(r["claimed_ms"])) for r in rows], total


@dataclass(frozen=True)
class Total:
    status: str
    currency: TokenCurrency
    amount: int


async def totals(warehouse: Warehouse, project_id: str, user: User, reason: str | None) -> list[Total]:
    """The user's amounts summed per status and currency."""
    latest, params = _latest(user)
    where = "" if reason is None else " WHERE reason = {reason:String}"
    sql = (
        f"SELECT status, currency_address, currency_chain_id, any(currency_name) AS currency_name,"
        f" any(currency_decimals) AS currency_decimals, toString(sum(amount)) AS amount_text"
        f" FROM ({latest}){where} GROUP BY status, currency_address, currency_chain_id"
        f" ORDER BY currency_chain_id, currency_address, status"
    )
    rows = await warehouse.query(sql, {**params, "project": project_id, "reason": reason or ""})
    return [Total(r["status"], _currency(r), int(r["amount_text"])) for r in rows]


async def debts(warehouse: Warehouse, project_id: str, user: User) -> list[Total]:
    """What the user owes per currency (API.md §9): reversals' parts that closed or claimed checks could not give
    back, less what later checks settled."""
    sql = (
        "SELECT lower(currency_address) AS currency_address, currency_chain_id, any(currency_name) AS currency_name,"
        " any(currency_decimals) AS currency_decimals, toString(sum(amount)) AS amount_text FROM debts"
        " WHERE project_id = {project:String} AND user_identifier_type = {user_type:String}"
        " AND user_identifier = {user_id:String} GROUP BY currency_address, currency_chain_id"
        " HAVING sum(amount) > 0 ORDER BY currency_chain_id, currency_address"
    )
    params = {"project": project_id, "user_type": user.identifier_type, "user_id": user.identifier}
    return [Total("debt", _currency(r), int(r["amount_text"])) for r in await warehouse.query(sql, params)]


@dataclass(frozen=True)
class ChecksFilter:
    statuses: tuple[str, ...] | None = None
    user: User | None = None
    currency_address: str | None = None
    start_ms: int | None = None
    end_ms: int | None = None


async def project_checks(
    warehouse: Warehouse, project_id: str, where: ChecksFilter, offset: int, limit: int
) -> tuple[list[ClaimCheck], int]:
    """Every check of the project, newest first."""
    latest, params = _latest(where.user)
    conditions, params = ["1"], {**params, "project": project_id}
    if where.statuses is not None:
        conditions.append("status IN {statuses:Array(String)}")
        params["statuses"] = list(where.statuses)
    if where.currency_address is not None:
        conditions.append("lower(currency_address) = lower({currency:String})")
        params["currency"] = where.currency_address
    conditions += time_window("created_at", where.start_ms, where.end_ms, params, end_inclusive=True)
    sql = (
        f"SELECT id, user_identifier, user_identifier_type, {CURRENCY}, toString(amount) AS amount_text, reason,"
        f" status, hash, source_id, toUnixTimestamp64Milli(created_at) AS created_ms,"
        f" toUnixTimestamp64Milli(claimed_at) AS claimed_ms, version, toUnixTimestamp64Milli(expires_at) AS expires_ms,"
        f" count() OVER () AS total_count"
        f" FROM ({latest}) WHERE {' AND '.join(conditions)} ORDER BY created_at DESC, id"
    )
    rows, total = await counted_page(warehouse, sql, params, offset, limit)
    return [_check(r) for r in rows], total


def _check(row: dict) -> ClaimCheck:
    return ClaimCheck(
        id=row["id"],
        user=User(row["user_identifier"], row["user_identifier_type"]),
        currency=_currency(row),
        amount=int(row["amount_text"]),
        reason=row["reason"],
        status=row["status"],
        hash=row["hash"],
        source_id=row["source_id"],
        created_ms=int(row["created_ms"]),
        claimed_ms=None if row["claimed_ms"] is None else int(row["claimed_ms"]),
        version=int(row["version"]),
        expires_ms=None if row["expires_ms"] is None else int(row["expires_ms"]),
    )


# A user's checks answer in one list (the published client pages nothing): the newest this many.
MAX_USER_CHECKS = 1000


async def user_checks(
    warehouse: Warehouse, project_id: str, user: User, statuses: tuple[str, ...] | None
) -> list[ClaimCheck]:
    """The user's checks, newest first, at most MAX_USER_CHECKS."""
    where = ChecksFilter(statuses=statuses, user=user)
    return (await project_checks(warehouse, project_id, where, 0, MAX_USER_CHECKS))[0]


class SigningStore(ClaimCheckStore, ProjectStore, Protocol):
    """What the claim forms read of the state store: the checks' current states, the project's signer and config."""


async def claim_forms(
    state: SigningStore,
    warehouse: Warehouse,
    project_id: str,
    user: User,
    secrets_keys: Sequence[str],
    now_ms: int,
) -> list[dict]:
    """A signed claim form for each of the user's claimable checks (API.md §7): closed, and payable by an EVM contract
    (claim_signing.is_signable). The warehouse names the user's closed checks (the newest MAX_USER_CHECKS); the state
    store, which changes first, says whether each is still closed (a check claimed a moment ago is left out)."""
    signer = claim_signing.open_signer(await state.get_claim_signer(project_id), secrets_keys)
    contract = (await state.get_config(project_id)).claim_contract_address
    listed = await user_checks(warehouse, project_id, user, (CLOSED,))
    current = await state.get_claim_checks(project_id, [check.id for check in listed])
    claimable = [c for c in current if c.status == CLOSED and c.user == user and claim_signing.is_signable(c)]
    return await asyncio.to_thread(claim_signing.claim_forms, claimable, signer, contract, now_ms)
