"""The materialized views the migrations leave, and the order a delivery's inserts must follow for them.

A view runs on the block inserted into its source table, but it may join other tables (`referrer_earnings_daily_mv`,
fed by `affiliate_volumes`, reads the `payouts` of the same events): those must already hold the delivery's rows when
the source's insert runs, or the view writes what it found, nothing. `insert_waves` orders the tables so: every table
whose views (and the views fed by their targets) read another table of the delivery comes in a later wave.

Read from the migrations' text (the views they create, less those they drop): ClickHouse has no system table of
what a view reads, and this runs without an engine; tests/schemas/test_views.py checks the result on the engine.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass

from schemas.clickhouse import _VIEW, statements

_DROP_VIEW = re.compile(r"^DROP\s+VIEW\s+(?:IF\s+EXISTS\s+)?([A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE)
# A table after FROM or JOIN; not a function's argument (`trim(BOTH '"' FROM JSONExtractRaw(...))`).
_TABLE = re.compile(r"\b(?:FROM|JOIN)\s+([A-Za-z_][A-Za-z0-9_]*)\b(?!\s*\()", re.IGNORECASE)


@dataclass(frozen=True)
class View:
    name: str
    target: str
    source: str  # the table whose inserts feed it: the query's first table
    reads: frozenset[str]  # the other tables it joins


def views(schema: Iterable[str] | None = None) -> dict[str, View]:
    """The materialized views that `schema`'s statements (by default every migration's) leave, by name."""
    found: dict[str, View] = {}
    for statement in statements() if schema is None else schema:
        if made := _VIEW.match(statement):
            tables = _TABLE.findall(made[3])
            found[made[1]] = View(made[1], made[2], tables[0], frozenset(tables[1:]) - {tables[0]})
        elif dropped := _DROP_VIEW.match(statement):
            found.pop(dropped[1], None)
    return found


def reads_on_insert(table: str, every_view: dict[str, View]) -> frozenset[str]:
    """The tables that an insert into `table` reads through its views, and through the views of their targets."""
    read: set[str] = set()
    fed, seen = [table], {table}
    while fed:
        source = fed.pop()
        for view in every_view.values():
            if view.source == source:
                read |= view.reads
                if view.target not in seen:
                    seen.add(view.target)
                    fed.append(view.target)
    return frozenset(read - {table})


def insert_waves(tables: Iterable[str], every_view: dict[str, View] | None = None) -> list[tuple[str, ...]]:
    """`tables` in waves, in their given order within each: a table comes after every table of `tables` that its
    insert reads (a wave's inserts can run at once)."""
    tables = list(tables)
    every_view = views() if every_view is None else every_view
    needs = {table: reads_on_insert(table, every_view) & set(tables) for table in tables}
    wave_of: dict[str, int] = {}
    while len(wave_of) < len(tables):
        ready = [t for t in tables if t not in wave_of and needs[t] <= wave_of.keys()]
        if not ready:
            raise ValueError(f"the views read each other's tables in a cycle: {sorted(set(tables) - wave_of.keys())}")
        for table in ready:
            wave_of[table] = 1 + max((wave_of[need] for need in needs[table]), default=-1)
    return [tuple(t for t in tables if wave_of[t] == n) for n in range(max(wave_of.values(), default=-1) + 1)]
