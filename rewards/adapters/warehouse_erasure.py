"""The warehouse's half of an erasure (API.md §11): every table naming an erased user rewritten, in both shapes (the
same SQL on chdb and on a ClickHouse server).

Which columns name a user is read from the schema itself, so a table added later is covered without a list to keep:
- `<x>identifier` beside `<x>identifier_type`: the identifier (conversions, payouts, referrals, totals by user, …);
- a `*_key` column of type UInt128: `sipHash128(type, identifier)`, an unkeyed hash anyone can compute from an
  identifier (affiliate listings, the portal, referral edges), so it is recomputed from the pseudonym;
- `dead_letters.payload`: a record's JSON text, its identifier strings replaced;
- `id` beside `user_identifier`: an affiliate's id, `<type>:<identifier>`.

Why rebuild and swap, not ALTER … UPDATE: most of these tables are sorted by the user (a mutation cannot change a
sorting-key column), and inserting rewritten rows would fire the materialized views reading the table (every
aggregate fed by it would count them twice). So each table holding an erased user is copied, rewritten, into a twin
(`CREATE TABLE t__erasing AS t`; views read `t`, so none fires), and the twin's rows replace the table's in one step
(`ALTER TABLE t REPLACE PARTITION tuple() FROM t__erasing`: no table is partitioned, `tuple()` is all of it): a
reader sees the table before or after, never half of it, and totals are the same at every moment. Nothing may write
the table between the copy and the swap: the caller holds the writers (stream_workers.erasures). One pass erases a
whole batch, of every project, so the cost is per batch (about the tables' size), not per user: docs/operations.md
"Erasure" has it measured.
"""

from collections.abc import Mapping
from dataclasses import dataclass

import orjson

from rewards.domain.erasure import document_renames
from rewards.domain.payouts import User
from rewards.ports import Warehouse

TWIN = "__erasing"

_TABLES = """
SELECT c.table AS table, groupArray(c.name) AS columns, groupArray(c.type) AS types
FROM system.columns AS c
INNER JOIN system.tables AS t ON t.database = c.database AND t.name = c.table
WHERE c.database = currentDatabase() AND t.engine LIKE '%MergeTree' AND c.default_kind NOT IN ('ALIAS', 'MATERIALIZED')
  AND NOT endsWith(c.table, {twin:String})
GROUP BY c.table
ORDER BY c.table
"""

# The erased users of each project: `<project_id><NUL><type>:<identifier>` → the pseudonym's identifier, and the same
# for the UInt128 keys (as decimal text: transform() maps strings, not UInt128).
_MAPS = """
WITH
    {olds:Array(String)} AS olds, {news:Array(String)} AS news, {new_fields:Array(String)} AS new_fields,
    arrayMap((p, t, i) -> concat(p, '\\0', toString(reinterpretAsUInt128(sipHash128(t, i)))),
             {projects:Array(String)}, {types:Array(String)}, {old_ids:Array(String)}) AS old_keys,
    arrayMap((t, i) -> toString(reinterpretAsUInt128(sipHash128(t, i))),
             {types:Array(String)}, {new_ids:Array(String)}) AS new_keys,
    {old_texts:Array(String)} AS old_texts, {new_texts:Array(String)} AS new_texts
"""


class ShardedWarehouse(Exception):
    """The warehouse is sharded over a cluster (`_local` tables): erasing there is not supported yet."""


@dataclass(frozen=True)
class Rewrite:
    """One table's copy: every column, those naming a user rewritten, and which rows name one."""

    table: str
    columns: tuple[str, ...]
    expressions: tuple[str, ...]
    touched: str


def rewrite_of(table: str, columns: list[str], types: list[str]) -> Rewrite | None:
    """The copy of `table` with its users renamed; None if no column of it names a user (or it has no project)."""
    names = set(columns)
    if "project_id" not in names:
        return None
    expressions, touched = [], []
    for column, column_type in zip(columns, types, strict=True):
        expression = _renamed(column, column_type, names, table)
        if expression is not None:
            touched.append(f"{expression} != {column}")
        expressions.append(expression or column)
    if not touched:
        return None
    return Rewrite(table, tuple(columns), tuple(expressions), " OR ".join(touched))


def _renamed(column: str, column_type: str, columns: set[str], table: str) -> str | None:
    if column.endswith("identifier") and f"{column}_type" in columns:
        return f"transform(concat(project_id, '\\0', {column}_type, ':', {column}), olds, news, {column})"
    if column == "id" and "user_identifier" in columns:  # an affiliate's id: `<type>:<identifier>`
        return "transform(concat(project_id, '\\0', id), olds, new_fields, id)"
    if column.endswith("_key") and column_type == "UInt128":
        key = f"concat(project_id, '\\0', toString({column}))"
        return f"toUInt128(transform({key}, old_keys, new_keys, toString({column})))"
    if table == "dead_letters" and column == "payload":
        # Exactly as the record's JSON quotes it, so that no longer text holding the identifier is touched.
        return f"arrayFold((text, pair) -> replaceAll(text, pair.1, pair.2), arrayZip(old_texts, new_texts), {column})"
    return None


def parameters(renames: Mapping[tuple[str, User], User]) -> dict:
    erased = list(renames.items())
    texts = document_renames({user: renamed for (_, user), renamed in erased})
    return {
        "olds": [f"{project}\0{user.identifier_type}:{user.identifier}" for (project, user), _ in erased],
        "news": [renamed.identifier for _, renamed in erased],
        "new_fields": [f"{renamed.identifier_type}:{renamed.identifier}" for _, renamed in erased],
        "projects": [project for (project, _), _ in erased],
        "types": [user.identifier_type for (_, user), _ in erased],
        "old_ids": [user.identifier for (_, user), _ in erased],
        "new_ids": [renamed.identifier for _, renamed in erased],
        "old_texts": [orjson.dumps(old).decode() for old in texts],
        "new_texts": [orjson.dumps(new).decode() for new in texts.values()],
    }


async def rewrites(warehouse: Warehouse) -> list[Rewrite]:
    tables = await warehouse.query(_TABLES, {"twin": TWIN})
    if any(row["table"].endswith("_local") for row in tables):
        raise ShardedWarehouse("erasing a user from a sharded warehouse is not supported yet")
    found = (rewrite_of(row["table"], row["columns"], row["types"]) for row in tables)
    return [rewrite for rewrite in found if rewrite is not None]


async def erase_users(warehouse: Warehouse, renames: Mapping[tuple[str, User], User]) -> list[str]:
    """Rename each (project, user) of `renames` to its pseudonym in every table; the tables rewritten. The caller
    holds every writer of the warehouse still until it returns."""
    if not renames:
        return []
    params = parameters(renames)
    rewritten = []
    for rewrite in await rewrites(warehouse):
        found = await warehouse.query(
            f"{_MAPS} SELECT count() AS n FROM {rewrite.table} WHERE {rewrite.touched}", params
        )
        if int(found[0]["n"]):
            await _swap(warehouse, rewrite, params)
            rewritten.append(rewrite.table)
    return rewritten


async def _swap(warehouse: Warehouse, rewrite: Rewrite, params: dict) -> None:
    twin = rewrite.table + TWIN
    await warehouse.command(f"DROP TABLE IF EXISTS {twin}")
    await warehouse.command(f"CREATE TABLE {twin} AS {rewrite.table}")
    try:
        columns = ", ".join(rewrite.columns)
        await warehouse.query(
            f"INSERT INTO {twin} ({columns}) {_MAPS} SELECT {', '.join(rewrite.expressions)} FROM {rewrite.table}"
            " SETTINGS insert_deduplicate = 0",
            params,
        )
        await warehouse.command(f"ALTER TABLE {rewrite.table} REPLACE PARTITION tuple() FROM {twin}")
    finally:
        await warehouse.command(f"DROP TABLE IF EXISTS {twin}")
