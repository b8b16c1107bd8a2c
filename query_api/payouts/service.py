"""Payout read models: SQL over the materialized views of schemas/clickhouse (API.md §1)."""

from decimal import Decimal

from rewards.domain.payouts import PayoutKind, User
from rewards.ports import Warehouse

KINDS = tuple(kind.value for kind in PayoutKind)  # plain texts: they key answers
HOUR_MS = 3_600_000
DT = "DateTime64(3, 'UTC')"


async def project_total(warehouse: Warehouse, project_id: str) -> Decimal:
    rows = await warehouse.query(
        "SELECT toString(sum(amount)) AS total FROM point_totals_by_project WHERE project_id = {project:String}",
        {"project": project_id},
    )
    return Decimal(rows[0]["total"]) if rows else Decimal(0)


async def user_totals(warehouse: Warehouse, project_id: str, user: User) -> dict[str, Decimal]:
    rows = await warehouse.query(
        "SELECT kind, toString(sum(amount)) AS total FROM point_totals_by_user "
        "WHERE project_id = {project:String} AND recipient_identifier_type = {type:String} "
        "AND recipient_identifier = {id:String} GROUP BY kind",
        {"project": project_id, "type": user.identifier_type, "id": user.identifier},
    )
    totals = dict.fromkeys(KINDS, Decimal(0))
    totals.update({row["kind"]: Decimal(row["total"]) for row in rows})
    return totals
