"""Where the warehouse's tables live: on one node, or sharded over a ClickHouse cluster, from the same declaration.

The migrations (NNN_*.sql) declare the schema once, as on one node. On a cluster, `Layout.place` rewrites each
declared statement into the statements that make the same schema sharded by project:

- a table `t` becomes `t_local` (the declared engine and settings) on every shard, plus `t`, a Distributed table
  over every shard's `t_local` sharded by `cityHash64(project_id)` (a table without `project_id`: the first
  column of its sorting key). The code reads and inserts `t` as before; all the rows of a project are on one
  shard, so FINAL, the merges of Replacing/Summing/AggregatingMergeTree and a subquery on another table of the
  project (`distributed_product_mode = 'local'`) each see the whole project on its shard;
- a materialized view runs on every shard, from and to the shard's own tables (`FROM s_local TO t_local`): the
  rows it writes stay on the shard of their project, and are read through the Distributed `t`;
- ALTER applies to `t_local` (and column changes to the Distributed `t` too); TRUNCATE and EXCHANGE to the
  `_local` tables (then each Distributed table is made anew over its `_local`: it keeps its name and follows
  the columns); DROP TABLE drops both;
- a backfill, `INSERT INTO t ... SELECT ... FROM s` of declared tables, copies each shard's own rows
  (`INSERT INTO t_local ... FROM s_local`);
- anything else (a SELECT, an INSERT of values) runs once, on one node, through the Distributed tables.

Two forms of the same layout:
- sharded (`Layout(cluster)`): the declared MergeTree engines, and every node runs the DDL itself
  (`Placed.each_node`: the migration runner sends it to each node). No Keeper needed; this is the form that
  runs on chdb (../shared/ENGINES.md, "Clusters on one machine").
- replicated (`Layout(cluster, replicated=True)`): `Replicated*MergeTree` engines (a Keeper path per table made
  from its UUID, so EXCHANGE and a table dropped then created again never meet an old path) and `ON CLUSTER` on
  every DDL statement, run once on any node; the deduplication window is declared as
  `non_replicated_deduplication_window` and becomes `replicated_deduplication_window`. A backfill runs once
  through the Distributed tables with `parallel_distributed_insert_select = 2` (each shard copies its own rows).

The statements are parsed with regular expressions for the forms the migrations use (each has a test in
tests/adapters/test_clickhouse_shards.py); a statement of another form is refused (LayoutError) rather than guessed at.
Unquoted, unqualified names only: a migration refers to the tables of its own database.
"""

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

LOCAL = "_local"
# ClickHouse's own default path: {uuid} is the table's, the same on every replica of an ON CLUSTER statement.
REPLICA_PATH = "/clickhouse/tables/{uuid}/{shard}"
REPLICA_NAME = "{replica}"
SHARD_COLUMN = "project_id"

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_FLAGS = re.IGNORECASE | re.DOTALL
_LITERAL = re.compile(r"'(?:[^'\\]|\\.|'')*'", re.DOTALL)
_READ = re.compile(rf"\b(?P<keyword>FROM|JOIN)(?P<space>\s+)(?P<name>{_NAME})\b(?!\s*[.(])", re.IGNORECASE)
_ENGINE = re.compile(rf"^\s*ENGINE\s*=\s*(?P<engine>{_NAME})(?P<args>\s*\()?", re.IGNORECASE)
_ORDER_BY = re.compile(rf"\bORDER\s+BY\s+\(?\s*(?P<first>{_NAME})", re.IGNORECASE)
_COLUMN_ACTION = re.compile(r"^(?:ADD|DROP|MODIFY|RENAME|COMMENT)\s+COLUMN\b", re.IGNORECASE)
_NOT_COLUMNS = re.compile(r"^(?:INDEX|PROJECTION|CONSTRAINT)\b", re.IGNORECASE)

_CREATE_TABLE = re.compile(
    rf"^CREATE\s+TABLE\s+(?P<if>IF\s+NOT\s+EXISTS\s+)?(?P<name>{_NAME})\s*(?P<body>\(.*)$", _FLAGS
)
_CREATE_VIEW = re.compile(
    rf"^CREATE\s+MATERIALIZED\s+VIEW\s+(?P<if>IF\s+NOT\s+EXISTS\s+)?(?P<name>{_NAME})\s+TO\s+(?P<target>{_NAME})"
    r"\s+AS\s+(?P<select>.*)$",
    _FLAGS,
)
_ALTER = re.compile(rf"^ALTER\s+TABLE\s+(?P<name>{_NAME})\s+(?P<actions>.*)$", _FLAGS)
_INSERT = re.compile(rf"^INSERT\s+INTO\s+(?:TABLE\s+)?(?P<name>{_NAME})\b(?P<rest>.*)$", _FLAGS)
_INSERT_SETTINGS = re.compile(r"^(?P<columns>\s*(?:\([^)]*\))?\s*)SETTINGS\s+", re.IGNORECASE)
_TRUNCATE = re.compile(rf"^TRUNCATE\s+(?:TABLE\s+)?(?P<if>IF\s+EXISTS\s+)?(?P<name>{_NAME})$", _FLAGS)
_EXCHANGE = re.compile(rf"^EXCHANGE\s+TABLES\s+(?P<a>{_NAME})\s+AND\s+(?P<b>{_NAME})$", _FLAGS)
_DROP = re.compile(
    rf"^DROP\s+(?P<kind>TABLE|VIEW)\s+(?P<if>IF\s+EXISTS\s+)?(?P<name>{_NAME})(?P<sync>\s+SYNC)?$", _FLAGS
)
_QUERY = re.compile(r"^(?:SELECT|WITH)\b", re.IGNORECASE)


class LayoutError(ValueError):
    """A declared statement this layout cannot rewrite (a form the parser does not know, or a schema that cannot
    be sharded as it is, e.g. a view whose source and target are sharded by different columns)."""


@dataclass(frozen=True)
class Placed:
    """One statement to run: on every node of the cluster (`each_node`), or once, on one node."""

    sql: str
    each_node: bool = False


@dataclass(frozen=True)
class Layout:
    """One node (no cluster), or sharded over `cluster` (`replicated`: Replicated engines and ON CLUSTER)."""

    cluster: str | None = None
    replicated: bool = False

    def __post_init__(self):
        if self.cluster is not None and not re.fullmatch(_NAME, self.cluster):
            raise LayoutError(f"a cluster name is a plain identifier (letters, digits, _): {self.cluster!r}")
        if self.replicated and self.cluster is None:
            raise LayoutError("the replicated layout needs a cluster")

    @property
    def sharded(self) -> bool:
        return self.cluster is not None

    def tables(self, statements: Iterable[str]) -> dict[str, str]:
        """The tables `statements` create (e.g. every statement of the migrations), each with the column its rows
        are sharded by (none on one node)."""
        tables = {}
        for statement in statements if self.sharded else ():
            if match := _CREATE_TABLE.match(statement):
                tables[match["name"]] = _shard_column(match["name"], _Table.parse(match["body"]))
        return tables

    def place(self, statement: str, tables: Mapping[str, str]) -> list[Placed]:
        """The statements that make `statement` in this layout, in order; `tables`: see `tables()`."""
        if not self.sharded:
            return [Placed(statement)]
        for pattern, rewrite in _FORMS:
            if match := pattern.match(statement):
                return rewrite(self, match, tables)
        raise LayoutError(f"no sharded form for this statement: {_head(statement)}")

    # -- the forms ---------------------------------------------------------------------------------------------

    @property
    def _on(self) -> str:
        return f" ON CLUSTER {self.cluster}" if self.replicated else ""

    def _ddl(self, sql: str) -> Placed:
        # ON CLUSTER reaches every node by itself; without it, each node must be sent the statement.
        return Placed(sql, each_node=not self.replicated)

    def _distributed(self, name: str, tables: Mapping[str, str], create: str = "CREATE TABLE IF NOT EXISTS") -> Placed:
        engine = f"Distributed('{self.cluster}', currentDatabase(), '{name}{LOCAL}', cityHash64({tables[name]}))"
        return self._ddl(f"{create} {name}{self._on} AS {name}{LOCAL} ENGINE = {engine}")

    def _create_table(self, match: re.Match, tables: Mapping[str, str]) -> list[Placed]:
        name, create = match["name"], f"CREATE TABLE {match['if'] or ''}".strip()
        table = _Table.parse(match["body"])
        body = table.replicated().text if self.replicated else match["body"]
        local = self._ddl(f"{create} {name}{LOCAL}{self._on} {body}")
        return [local, self._distributed(name, {name: _shard_column(name, table)}, create)]

    def _create_view(self, match: re.Match, tables: Mapping[str, str]) -> list[Placed]:
        name, target, select = match["name"], match["target"], match["select"]
        sources = _reads(select, tables)
        if target not in tables or not sources:
            raise LayoutError(f"view {name}: its source and its target (TO) must be tables of the migrations")
        _same_sharding(f"view {name}", target, sources, tables)
        view = f"CREATE MATERIALIZED VIEW {match['if'] or ''}{name}{self._on} TO {target}{LOCAL} AS "
        return [self._ddl(view + _read_locals(select, tables))]

    def _alter(self, match: re.Match, tables: Mapping[str, str]) -> list[Placed]:
        name = _known(match["name"], tables, "ALTER")
        actions = _split_top_level(match["actions"])
        placed = [self._ddl(f"ALTER TABLE {name}{LOCAL}{self._on} {match['actions']}")]
        columns = [action for action in actions if _COLUMN_ACTION.match(action)]
        if columns:  # the Distributed table has the columns, not the data: TTL, settings, mutations are the local's
            placed.append(self._ddl(f"ALTER TABLE {name}{self._on} {', '.join(columns)}"))
        return placed

    def _insert(self, match: re.Match, tables: Mapping[str, str]) -> list[Placed]:
        name, rest = match["name"], match["rest"]
        sources = _reads(rest, tables)
        if name not in tables or not sources:  # values, or a query of no declared table: once, through Distributed
            return [Placed(match.string)]
        _same_sharding(f"INSERT INTO {name}", name, sources, tables)
        if self.replicated:  # no ON CLUSTER for INSERT: ClickHouse runs the copy on each shard itself
            return [Placed(f"INSERT INTO {name}{_with_setting(rest, 'parallel_distributed_insert_select = 2')}")]
        return [Placed(f"INSERT INTO {name}{LOCAL}{_read_locals(rest, tables)}", each_node=True)]

    def _truncate(self, match: re.Match, tables: Mapping[str, str]) -> list[Placed]:
        name = _known(match["name"], tables, "TRUNCATE")
        return [self._ddl(f"TRUNCATE TABLE {match['if'] or ''}{name}{LOCAL}{self._on}")]

    def _exchange(self, match: re.Match, tables: Mapping[str, str]) -> list[Placed]:
        first, second = (_known(match[side], tables, "EXCHANGE") for side in ("a", "b"))
        exchanged = self._ddl(f"EXCHANGE TABLES {first}{LOCAL} AND {second}{LOCAL}{self._on}")
        return [exchanged, *(self._distributed(name, tables, "CREATE OR REPLACE TABLE") for name in (first, second))]

    def _drop(self, match: re.Match, tables: Mapping[str, str]) -> list[Placed]:
        kind, exists, name, sync = match["kind"].upper(), match["if"] or "", match["name"], match["sync"] or ""
        names = [name, f"{name}{LOCAL}"] if kind == "TABLE" and name in tables else [name]
        return [self._ddl(f"DROP {kind} {exists}{each}{self._on}{sync}") for each in names]

    def _query(self, match: re.Match, tables: Mapping[str, str]) -> list[Placed]:
        return [Placed(match.string)]


_FORMS = [
    (_CREATE_TABLE, Layout._create_table),
    (_CREATE_VIEW, Layout._create_view),
    (_ALTER, Layout._alter),
    (_INSERT, Layout._insert),
    (_TRUNCATE, Layout._truncate),
    (_EXCHANGE, Layout._exchange),
    (_DROP, Layout._drop),
    (_QUERY, Layout._query),
]


@dataclass(frozen=True)
class _Table:
    """A CREATE TABLE's body: `(columns) ENGINE = ... ORDER BY ... SETTINGS ...`, as text and in parts."""

    columns: list[str]  # the column names
    columns_text: str  # "(...)", as declared
    engine: str
    engine_args: str | None  # the text between the engine's parentheses; None: no parentheses
    after_engine: str  # ORDER BY, TTL, SETTINGS ...

    @classmethod
    def parse(cls, body: str) -> "_Table":
        close = _closing(body, 0)
        columns = [
            part.split()[0].strip("`")
            for part in _split_top_level(body[1:close])
            if part.strip() and not _NOT_COLUMNS.match(part.strip())
        ]
        rest = body[close + 1 :]
        engine = _ENGINE.match(rest)
        if engine is None:
            raise LayoutError(f"no ENGINE clause after the columns: {_head(body)}")
        end, args = engine.end(), None
        if engine["args"]:
            args_close = _closing(rest, end - 1)
            args, end = rest[end:args_close], args_close + 1
        return cls(columns, body[: close + 1], engine["engine"], args, rest[end:])

    @property
    def text(self) -> str:
        args = "" if self.engine_args is None else f"({self.engine_args})"
        return f"{self.columns_text}\nENGINE = {self.engine}{args}{self.after_engine}"

    def sorting_key_first(self) -> str | None:
        match = _ORDER_BY.search(_blank_literals(self.after_engine))
        return None if match is None or match["first"].lower() == "tuple" else match["first"]

    def replicated(self) -> "_Table":
        if not self.engine.endswith("MergeTree") or self.engine.startswith("Replicated"):
            raise LayoutError(f"no replicated form of the engine {self.engine} (a *MergeTree engine is replicated)")
        args = [f"'{REPLICA_PATH}'", f"'{REPLICA_NAME}'"] + ([self.engine_args] if self.engine_args else [])
        window = _outside_literals(
            self.after_engine,
            lambda text: re.sub(r"\bnon_replicated_deduplication_window\b", "replicated_deduplication_window", text),
        )
        return _Table(self.columns, self.columns_text, f"Replicated{self.engine}", ", ".join(args), window)


def _shard_column(name: str, table: _Table) -> str:
    column = SHARD_COLUMN if SHARD_COLUMN in table.columns else table.sorting_key_first()
    if column is None:
        raise LayoutError(f"table {name} has no {SHARD_COLUMN} and no sorting key column to shard its rows by")
    return column


def _known(name: str, tables: Mapping[str, str], what: str) -> str:
    if name not in tables:
        raise LayoutError(f"{what} {name}: not a table the migrations create (no sharded form for it)")
    return name


def _same_sharding(what: str, target: str, sources: list[str], tables: Mapping[str, str]) -> None:
    """Rows written on a shard from the shard's own rows stay there: right only if both are sharded alike."""
    differ = [source for source in sources if tables[source] != tables[target]]
    if differ:
        raise LayoutError(
            f"{what}: {target} is sharded by {tables[target]} but {', '.join(differ)} by another column; rows "
            "copied shard by shard would sit on the wrong shards"
        )


def _reads(sql: str, tables: Mapping[str, str]) -> list[str]:
    """The declared tables `sql` reads (FROM, JOIN), in order, each once."""
    names = [match["name"] for match in _READ.finditer(_blank_literals(sql))]
    return list(dict.fromkeys(name for name in names if name in tables))


def _read_locals(sql: str, tables: Mapping[str, str]) -> str:
    """`sql` reading each declared table's `_local` (outside string literals)."""

    def rewrite(text: str) -> str:
        return _READ.sub(lambda m: f"{m['keyword']}{m['space']}{m['name']}{LOCAL if m['name'] in tables else ''}", text)

    return _outside_literals(sql, rewrite)


def _with_setting(rest: str, setting: str) -> str:
    """An INSERT's text after its table name, with one more setting in (or as) its SETTINGS clause."""
    if match := _INSERT_SETTINGS.match(rest):
        return f"{match['columns']}SETTINGS {setting}, {rest[match.end() :]}"
    columns = re.match(r"^\s*(?:\([^)]*\))?", rest).group(0)
    return f"{columns.rstrip()} SETTINGS {setting}\n{rest[len(columns) :].lstrip()}"


# -- text ------------------------------------------------------------------------------------------------------


def _outside_literals(sql: str, rewrite) -> str:
    """`sql` with `rewrite` applied to the text between string literals (the literals kept as they are)."""
    parts, last = [], 0
    for literal in _LITERAL.finditer(sql):
        parts += [rewrite(sql[last : literal.start()]), literal.group(0)]
        last = literal.end()
    return "".join([*parts, rewrite(sql[last:])])


def _blank_literals(sql: str) -> str:
    """`sql` with each string literal's content blanked: positions kept, nothing inside a literal matches."""
    return _LITERAL.sub(lambda m: "'" + " " * (len(m.group(0)) - 2) + "'", sql)


def _closing(text: str, start: int) -> int:
    """The index of the parenthesis that closes the one at `start`."""
    blank, depth = _blank_literals(text), 0
    for index in range(start, len(blank)):
        depth += {"(": 1, ")": -1}.get(blank[index], 0)
        if depth == 0:
            return index
    raise LayoutError(f"unbalanced parentheses: {_head(text)}")


def _split_top_level(text: str) -> list[str]:
    """`text` split at the commas outside parentheses and string literals, each part trimmed."""
    blank, depth, start, parts = _blank_literals(text), 0, 0, []
    for index, char in enumerate(blank):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:index].strip())
            start = index + 1
    return [*parts, text[start:].strip()]


def _head(statement: str) -> str:
    return " ".join(statement.split())[:100]
