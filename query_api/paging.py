"""A page of a warehouse query and the number of rows in all, for the query API's paginated reads."""

from rewards.ports import Warehouse


async def counted_page(warehouse: Warehouse, sql: str, params: dict, offset: int, limit: int) -> tuple[list[dict], int]:
    """One page of `sql` (which must select `count() OVER () AS total_count`) and the number of rows in all: read
    beside the page's rows, or counted apart when the page is past the end."""
    rows = await warehouse.query(f"{sql} LIMIT {{limit:UInt32}} OFFSET {{offset:UInt64}}", {
        **params, "limit": limit, "offset": offset})  # fmt: skip
    if rows:
        return rows, int(rows[0]["total_count"])
    if offset == 0:
        return [], 0
    counted = await warehouse.query(f"SELECT count() AS c FROM ({sql})", params)
    return [], int(counted[0]["c"])
