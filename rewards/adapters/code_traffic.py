"""The CodeTrafficFigures port on the warehouse: referral codes' clicks and attributions, from the `code_traffic` views
of tracking events (schemas/clickhouse/006_tracking.sql). Nothing here reads the state store: what a code is, and
whose, is the ReferralStore's; these are its figures only."""

from collections.abc import Sequence
from datetime import date

from rewards.domain.tracking import CodeTraffic
from rewards.ports import Warehouse
from schemas.clickhouse.values import param_chunks

ALL_TIME = """
SELECT code, toString(sum(clicks)) AS clicks, toString(sum(attributions)) AS attributions FROM code_traffic
WHERE project_id = {project:String} AND code IN {codes:Array(String)}
GROUP BY code
"""
IN_DAYS = """
SELECT code, toString(sum(clicks)) AS clicks, toString(sum(attributions)) AS attributions FROM code_traffic_daily
WHERE project_id = {project:String} AND code IN {codes:Array(String)} AND day BETWEEN {first:Date32} AND {last:Date32}
GROUP BY code
"""


class WarehouseCodeTraffic:
    def __init__(self, warehouse: Warehouse):
        self._warehouse = warehouse

    async def of_codes(self, project_id: str, codes: Sequence[str]) -> dict[str, CodeTraffic]:
        return await code_traffic(self._warehouse, project_id, codes)


async def code_traffic(
    warehouse: Warehouse, project_id: str, codes: Sequence[str], days: tuple[date, date] | None = None
) -> dict[str, CodeTraffic]:
    """Each code's clicks (pageviews naming it) and attributions (referrals connect_wallet made through it): all time,
    or on the UTC days `days` (both included). Every code asked for is answered (zeros when it has none); codes are
    named as the state store writes them (`CodeRecord.code`)."""
    found = {code: CodeTraffic() for code in codes}
    params: dict = {"project": project_id}
    if days is not None:
        params |= {"first": days[0].isoformat(), "last": days[1].isoformat()}
    for chunk in param_chunks(sorted(found)):
        for row in await warehouse.query(ALL_TIME if days is None else IN_DAYS, {**params, "codes": chunk}):
            found[row["code"]] = CodeTraffic(int(row["clicks"]), int(row["attributions"]))
    return found
