"""Public claimable rewards (API.md §9): a user's closed, unexpired claim checks summed per currency over every
project that allows it (`public_claimable_rewards`, default true). Knows nothing of HTTP."""

from dataclasses import dataclass

from pydantic import ValidationError

from rewards.domain.payouts import User
from rewards.ports import ProjectStore, Warehouse

# The user's rows only (user_claim_checks is sorted by user: migration 016), the latest version of each check.
_CLAIMABLE = """
SELECT project_id, lower(currency_address) AS address, currency_chain_id, any(currency_name) AS currency_name,
       any(currency_decimals) AS currency_decimals, toString(sum(amount)) AS amount
FROM user_claim_checks FINAL
WHERE user_identifier_type = {user_type:String} AND user_identifier = {user_id:String} AND status = 'closed'
  AND (expires_at IS NULL OR expires_at > now64(3)) AND ({project:String} = '' OR project_id = {project:String})
GROUP BY project_id, address, currency_chain_id
"""


@dataclass
class Claimable:
    currency_name: str
    currency_address: str
    currency_chain_id: int
    currency_decimals: int
    amount: int


async def claimable(warehouse: Warehouse, state: ProjectStore, user: User, project_id: str | None) -> list[Claimable]:
    """The user's claimable amounts per currency (address, chain), summed over the projects that allow it."""
    params = {"user_type": user.identifier_type, "user_id": user.identifier, "project": project_id or ""}
    rows = await warehouse.query(_CLAIMABLE, params)
    allowed = {pid for pid in {row["project_id"] for row in rows} if await _allows(state, pid)}
    sums: dict[tuple[str, int], Claimable] = {}
    for row in rows:
        if row["project_id"] not in allowed:
            continue
        key = (row["address"], int(row["currency_chain_id"]))
        found = sums.setdefault(
            key, Claimable(row["currency_name"], row["address"], key[1], int(row["currency_decimals"]), 0)
        )
        found.amount += int(row["amount"])
    return [sums[key] for key in sorted(sums, key=lambda k: (k[1], k[0]))]


async def _allows(state: ProjectStore, project_id: str) -> bool:
    """A live project whose configuration allows its users' claimable amounts to be read without a key."""
    if not await state.project_exists(project_id):
        return False
    try:
        return (await state.get_config(project_id)).public_claimable_rewards
    except ValidationError:  # a stored configuration that cannot be read allows nothing
        return False
