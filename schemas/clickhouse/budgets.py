"""What the warehouse holds of a project's budgets (API.md §8), read by the workers (a budget's paid counter starts
from it: stream_workers.allot) and by GET /projects/budgets (ingest_api.budgets). Currencies as caps and budgets name
them: `point`, or a token's address in lowercase (rewards.domain.allotment.currency_key)."""

from decimal import Decimal

# Points and a token's raw units alike: payouts.amount is Decimal(76, 18) for both.
PAID_IN = """
SELECT lower(currency) AS cur, toString(sum(amount)) AS paid FROM payouts
WHERE project_id = {project:String} AND lower(currency) IN {currencies:Array(String)}
GROUP BY cur
"""

# Expired claim checks: paid once, their amounts back in their budgets (API.md §8).
EXPIRED_IN = """
SELECT lower(currency_address) AS cur, toString(sum(amount)) AS expired
FROM (SELECT * FROM claim_checks FINAL WHERE project_id = {project:String})
WHERE status = 'expired' AND lower(currency_address) IN {currencies:Array(String)}
GROUP BY cur
"""


async def paid_in(warehouse, project_id: str, currencies: list[str]) -> dict[str, Decimal]:
    """What the warehouse holds paid in each currency: its payouts, less the claim checks expired since."""
    params = {"project": project_id, "currencies": currencies}
    paid = {row["cur"]: Decimal(row["paid"]) for row in await warehouse.query(PAID_IN, params)}
    if tokens := _tokens(currencies):
        for row in await warehouse.query(EXPIRED_IN, {**params, "currencies": tokens}):
            paid[row["cur"]] = paid.get(row["cur"], Decimal(0)) - Decimal(row["expired"])
    return paid


# Open and closed claim checks not yet claimed: each check's latest version (FINAL, restricted on the sorting key's
# project before any other filter: query_api.claim_checks.service says why).
RESERVED_IN = """
SELECT lower(currency_address) AS cur, toString(sum(amount)) AS reserved
FROM (SELECT * FROM claim_checks FINAL WHERE project_id = {project:String})
WHERE status IN ('open', 'closed') AND lower(currency_address) IN {currencies:Array(String)}
GROUP BY cur
"""


async def reserved_in(warehouse, project_id: str, currencies: list[str]) -> dict[str, Decimal]:
    """What waits in each currency's open and closed claim checks (none in points)."""
    if not (tokens := _tokens(currencies)):
        return {}
    found = await warehouse.query(RESERVED_IN, {"project": project_id, "currencies": tokens})
    return {row["cur"]: Decimal(row["reserved"]) for row in found}


def _tokens(currencies: list[str]) -> list[str]:
    return [currency for currency in currencies if currency != "point"]  # points have no claim checks
