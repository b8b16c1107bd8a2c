"""The AffiliateFigures port on the warehouse: a user's figures so far, from the `affiliate_stats` view."""

from rewards.domain.affiliates import LEVELS, NO_FIGURES, Figures, figures_from_row
from rewards.domain.payouts import User
from rewards.ports import Warehouse


class WarehouseAffiliateFigures:
    def __init__(self, warehouse: Warehouse):
        self._warehouse = warehouse

    async def all_time(self, project_id: str, user: User) -> Figures:
        return await all_time_figures(self._warehouse, project_id, user)


async def all_time_figures(warehouse: Warehouse, project_id: str, user: User) -> Figures:
    """A user's figures so far: a user may have referred and earned before registering as an affiliate."""
    volumes = ", ".join(f"toString(sum(r{n}_volume)) AS r{n}_volume" for n in LEVELS)
    rows = await warehouse.query(
        # (less the users whose referral was removed: API.md §7 deleteReferral)
        f"SELECT {volumes}, toString(sum(earnings)) AS earnings, sum(referred_users) - sum(removed_users) AS referred "
        "FROM affiliate_stats WHERE project_id = {project:String} "
        "AND user_key = reinterpretAsUInt128(sipHash128({type:String}, {id:String}))",
        {"project": project_id, "type": user.identifier_type, "id": user.identifier},
    )
    return figures_from_row({**rows[0], "referred_users": rows[0]["referred"]}) if rows else NO_FIGURES
