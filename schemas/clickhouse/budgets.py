"""What the warehouse holds of a project's budgets (API.md §8), read by the workers (a budget's paid counter starts
from it: stream_workers.allot) and by GET /projects/budgets (ingest_api.budgets). Currencies as caps and budgets name
them: `point`, or a token's address in lowercase (rewards.domain.allotment.currency_key)."""

# Points and a token's raw units alike: payouts.amount is Decimal(76, 18) for both.
PAID_IN = """
SELECT lower(currency) AS cur, toString(sum(amount)) AS paid FROM payouts
WHERE project_id = {project:String} AND lower(currency) IN {currencies:Array(String)}
GROUP BY cur
"""

# Open and closed claim checks not yet claimed: each check's latest version (FINAL, restricted on the sorting key's
# project before any other filter: query_api.claim_checks.service says why).
RESERVED_IN = """
SELECT lower(currency_address) AS cur, toString(sum(amount)) AS reserved
FROM (SELECT * FROM claim_checks FINAL WHERE project_id = {project:String})
WHERE status IN ('open', 'closed') AND lower(currency_address) IN {currencies:Array(String)}
GROUP BY cur
"""
