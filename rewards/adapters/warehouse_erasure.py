"""The warehouse's half of an erasure (API.md §11): every table naming an erased user rewritten, in both shapes (the
same SQL on chdb and on a ClickHouse server).

Which columns name a user is read from the schema itself, so a table added later is covered without a list to keep:
- `<x>identifier` beside `<x>identifier_type`: the identifier (conversions, payouts, referrals, totals by user, …);
- a `*_key` column of type UInt128: `sipHash128(type, identifier)`, an unkeyed hash anyone can compute from an
  identifier (affiliate listings, the portal, referral edges), so it is recomputed from the pseudonym;
- `id` beside `user_identifier`: an affiliate's id, `<type>:<identifier>`;
- `signature`, `signature_message`, `signature_public_key` beside `user_identifier` (a tracking event's signed
  connect_wallet: the signature gives the address back): emptied on the erased users' rows;
and by name, texts quoting identifiers (`_QUOTING`: a dead letter's record and reason, a held payout's row as JSON;
and every `args` and `metadata`, an event's own JSON):
each quoted form of an erased user of the row's project replaced. Every rule keys on the row's project: another
project's same identifier is another user, left alone.

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

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from rewards.domain.payouts import User
from rewards.ports import Warehouse
from schemas.clickhouse.values import param_chunks

TWIN = "__erasing"

_TABLES = """
SELECT c.table AS table, any(t.engine) AS engine, groupArray(c.name) AS columns, groupArray(c.type) AS types
FROM system.columns AS c
INNER JOIN system.tables AS t ON t.database = c.database AND t.name = c.table
WHERE c.database = currentDatabase() AND t.engine LIKE '%MergeTree' AND c.default_kind NOT IN ('ALIAS', 'MATERIALIZED')
  AND NOT endsWith(c.table, {twin:String})
GROUP BY c.table
ORDER BY c.table
"""

# The erased users, as four arrays (the smallest a server takes in its bounded parameters, everything else derived
# here): `<project_id><NUL><type>:<identifier>` → the pseudonym's identifier (its `<type>:<pseudonym>`; 1: "a row of an
# erased user"), the same for the UInt128 keys (as decimal text: transform() maps strings, not UInt128), and per
# project the texts that quote a user (its identifier and `<type>:<identifier>` in JSON's double quotes or Python's
# single ones, as a record's JSON or an error message does) with the pseudonym's.
_MAPS = """
WITH
    {projects:Array(String)} AS projects, {types:Array(String)} AS types,
    {old_ids:Array(String)} AS old_ids, {new_ids:Array(String)} AS news,
    arrayMap((p, t, i) -> concat(p, '\\0', t, ':', i), projects, types, old_ids) AS olds,
    arrayMap((t, i) -> concat(t, ':', i), types, news) AS new_fields,
    arrayMap(x -> toUInt8(1), olds) AS erased_flags,
    arrayMap((p, t, i) -> concat(p, '\\0', toString(reinterpretAsUInt128(sipHash128(t, i)))), projects, types, old_ids)
        AS old_keys,
    arrayMap((t, i) -> toString(reinterpretAsUInt128(sipHash128(t, i))), types, news) AS new_keys,
    arrayFlatten(arrayMap((p, t, i, n) -> [
        (p, toJSONString(i), toJSONString(n)), (p, concat('\\'', i, '\\''), concat('\\'', n, '\\'')),
        (p, toJSONString(concat(t, ':', i)), toJSONString(concat(t, ':', n))),
        (p, concat('\\'', t, ':', i, '\\''), concat('\\'', t, ':', n, '\\''))
    ], projects, types, old_ids, news)) AS quoted
"""
# toJSONString writes a `/` as `\\/` unless told otherwise; the records' JSON (orjson) never does.
_SETTINGS = "output_format_json_escape_forward_slashes = 0"
# Columns that hold a user's own proof of a wallet (a tracking event's signed connect_wallet: the signature gives the
# address back): emptied on the erased users' rows.
_PROOFS = ("signature", "signature_message", "signature_public_key")
# Texts that quote identifiers (a record set aside, why, a held payout's row as JSON): their quoted forms replaced.
_FREE_FORM = {"args", "metadata"}  # an event's own JSON (API.md §3: metadata may name a referrer or an affiliate)
_QUOTING = {("dead_letters", "payload"), ("dead_letters", "reason"), ("payout_decisions", "payout")}


class ShardedWarehouse(Exception):
    """The warehouse is sharded over a cluster (`_local` tables): erasing there is not supported yet."""


@dataclass(frozen=True)
class Rewrite:
    """One table's copy: every column, those naming a user rewritten, and which rows name one."""

    table: str
    columns: tuple[str, ...]
    expressions: tuple[str, ...]
    touched: str
    source: str  # what the copy reads: the table, or its merged rows (FINAL)


def rewrite_of(table: str, columns: list[str], types: list[str], engine: str = "MergeTree") -> Rewrite | None:
    """The copy of `table` with its users renamed; None if no column of it names a user (or it has no project)."""
    names = set(columns)
    if "project_id" not in names:
        return None
    expressions, touched = [], []
    for column, column_type in zip(columns, types, strict=True):
        expression = _renamed(column, column_type, names, table)
        if expression is not None:
            touched.append(f"{expression} IS DISTINCT FROM {column}")
        expressions.append(expression or column)
    if not touched:
        return None
    # A ReplacingMergeTree keeps the last row of a key by the order of its parts, which a copy made by several threads
    # does not keep: it is copied merged (FINAL: the rows a merge would keep, nothing else).
    source = f"{table} FINAL" if "ReplacingMergeTree" in engine else table
    return Rewrite(table, tuple(columns), tuple(expressions), " OR ".join(touched), source)


def _renamed(column: str, column_type: str, columns: set[str], table: str) -> str | None:
    if column.endswith("identifier") and f"{column}_type" in columns:
        return f"transform(concat(project_id, '\\0', {column}_type, ':', {column}), olds, news, {column})"
    if column == "id" and "user_identifier" in columns:  # an affiliate's id: `<type>:<identifier>`
        return "transform(concat(project_id, '\\0', id), olds, new_fields, id)"
    if column in _PROOFS and "user_identifier" in columns:
        erased = (
            "transform(concat(project_id, '\\0', user_identifier_type, ':', user_identifier), olds, erased_flags, 0)"
        )
        return f"if({erased} = 1, defaultValueOfArgumentType({column}), {column})"
    if column.endswith("_key") and column_type == "UInt128":
        key = f"concat(project_id, '\\0', toString({column}))"
        return f"toUInt128(transform({key}, old_keys, new_keys, toString({column})))"
    if (table, column) in _QUOTING or (column in _FREE_FORM and column_type == "String"):
        return f"arrayFold((text, q) -> if(q.1 = project_id, replaceAll(text, q.2, q.3), text), quoted, {column})"
    return None


def parameters(renames: Mapping[tuple[str, User], User]) -> dict:
    erased = list(renames.items())
    return {
        "projects": [project for (project, _), _ in erased],
        "types": [user.identifier_type for (_, user), _ in erased],
        "old_ids": [user.identifier for (_, user), _ in erased],
        "new_ids": [renamed.identifier for _, renamed in erased],
    }


def _cost(item: tuple[tuple[str, User], User]) -> int:
    """What one erased user adds to the largest of a round's parameters (a slice keeps each under PARAM_BYTES)."""
    (project, user), renamed = item
    return max(_escaped(text) for text in (project, user.identifier_type, user.identifier, renamed.identifier))


def _escaped(text: str) -> int:
    """An Array(String) element's size as sent: its bytes, a backslash more for each quote or backslash, the quotes and
    the comma (schemas.clickhouse.values.param_text)."""
    return len(text.encode()) + text.count("'") + text.count("\\") + 3


async def rewrites(warehouse: Warehouse) -> list[Rewrite]:
    tables = await warehouse.query(_TABLES, {"twin": TWIN})
    if any(row["table"].endswith("_local") for row in tables):
        raise ShardedWarehouse("erasing a user from a sharded warehouse is not supported yet")
    found = (rewrite_of(row["table"], row["columns"], row["types"], row["engine"]) for row in tables)
    return [rewrite for rewrite in found if rewrite is not None]


async def erase_users(
    warehouse: Warehouse,
    renames: Mapping[tuple[str, User], User],
    before_swap: Callable[[], Awaitable[None]] | None = None,
) -> list[str]:
    """Rename each (project, user) of `renames` to its pseudonym in every table; the tables rewritten. The caller
    holds every writer of the warehouse still until it returns; `before_swap` is awaited before each table's swap
    (it raises if the hold was lost: that table and the rest are left as they were). Users are taken in slices whose
    parameters a server takes (schemas.clickhouse.values.PARAM_BYTES): each slice copies each table once."""
    rewritten: list[str] = []
    tables = await rewrites(warehouse)  # a sharded warehouse is refused before anything is copied
    for chunk in param_chunks(renames.items(), cost=_cost):
        params = parameters(dict(chunk))
        for rewrite in tables:
            found = await warehouse.query(
                f"{_MAPS} SELECT count() AS n FROM {rewrite.source} WHERE {rewrite.touched} SETTINGS {_SETTINGS}",
                params,
            )
            if int(found[0]["n"]):
                await _swap(warehouse, rewrite, params, before_swap)
                rewritten.append(rewrite.table)
    return sorted(set(rewritten))


async def _swap(warehouse: Warehouse, rewrite: Rewrite, params: dict, before_swap) -> None:
    twin = rewrite.table + TWIN
    await warehouse.command(f"DROP TABLE IF EXISTS {twin}")
    await warehouse.command(f"CREATE TABLE {twin} AS {rewrite.table}")
    try:
        columns = ", ".join(rewrite.columns)
        await warehouse.query(
            f"INSERT INTO {twin} ({columns}) {_MAPS} SELECT {', '.join(rewrite.expressions)} FROM {rewrite.source}"
            f" SETTINGS insert_deduplicate = 0, {_SETTINGS}",
            params,
        )
        if before_swap is not None:
            await before_swap()
        await warehouse.command(f"ALTER TABLE {rewrite.table} REPLACE PARTITION tuple() FROM {twin}")
    finally:
        await warehouse.command(f"DROP TABLE IF EXISTS {twin}")
