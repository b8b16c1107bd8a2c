"""ClickHouse DDL: the same text runs on the embedded chdb engine and on a ClickHouse server.

The schema is a series of numbered migrations, one file each: `NNN_name.sql` is version NNN (1, 2, 3, ... with
no gaps). A file holds its forward statements and, optionally, after a line `-- down`, the statements that undo
them (no such line: the migration cannot be undone; the line with nothing after it: there is nothing to undo).
Statements are separated by `;`; lines starting with `--` are comments. rewards/adapters/migrations.py applies them in
order and records each one in the warehouse's `schema_migrations` table. On a ClickHouse cluster, it runs them
rewritten into the sharded layout of `schemas.clickhouse.layout` (the files stay as they are, one node's schema).

A line `-- backfill: <view>` (after a `;`) is a statement of its own: `INSERT INTO <target> SETTINGS
insert_deduplicate = 0`, a newline, then the query of `<view>`, a materialized view made above it in the file (`TO
<target> AS <query>`), so the query is written once. `-- backfill: <view> (<columns>)` inserts into those columns
only (a view writes its query's columns by name, an INSERT ... SELECT by position). A backfill whose query differs
from its view's is written out. The checksum is of the statements so expanded.
"""

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

# Every insert carries these: the materialized views deduplicate a redelivered block too, and a table's views are fed
# at once rather than one after the other (`payouts` feeds nineteen: a delivery's insert there took 38 → 22 ms).
INSERT_SETTINGS = {"deduplicate_blocks_in_dependent_materialized_views": 1, "parallel_view_processing": 1}

_FILE_NAME = re.compile(r"^(\d+)_([a-z0-9_]+)\.sql$")
_DOWN = re.compile(r"^--\s*down\s*$", re.IGNORECASE)
_BACKFILL = re.compile(r"^--\s*backfill:\s*([A-Za-z_][A-Za-z0-9_]*)\s*(\([^()]*\))?\s*$", re.IGNORECASE)
_BACKFILL_LIKE = re.compile(r"^--\s*backfill\b", re.IGNORECASE)  # a line meant as one: never read as a comment
_VIEW = re.compile(
    r"^CREATE\s+MATERIALIZED\s+VIEW\s+(?:IF\s+NOT\s+EXISTS\s+)?([A-Za-z_][A-Za-z0-9_]*)\s+TO\s+([A-Za-z_][A-Za-z0-9_]*)"
    r"\s+AS\s+(SELECT\b.*)$",
    re.IGNORECASE | re.DOTALL,
)


class MigrationFileError(ValueError):
    """The migration files themselves are wrong (a bad name, a version twice, a gap)."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    up: tuple[str, ...]
    down: tuple[str, ...] | None  # None: the migration cannot be undone

    @property
    def checksum(self) -> str:
        """Of the forward statements as they run: editing a comment or the down section keeps it."""
        return hashlib.sha256("\n;\n".join(self.up).encode()).hexdigest()


def split_statements(text: str, views: dict[str, tuple[str, str]] | None = None) -> list[str]:
    """Comment lines (`--`) dropped, then the `;`-separated statements, trimmed, empty ones left out; each
    `-- backfill:` line expanded in its place. `views`: the materialized views made above `text` (name: target,
    query), to which those of `text` are added."""
    views = {} if views is None else views
    result: list[str] = []
    lines: list[str] = []
    for line in text.splitlines():
        directive = _BACKFILL.match(line.strip())
        if directive is None:
            if _BACKFILL_LIKE.match(line.strip()):
                raise MigrationFileError(f"malformed {line.strip()!r}: write `-- backfill: <view> [(<columns>)]`")
            lines.append(line)
            continue
        result += _plain_statements(lines, views, before_backfill=True)
        result.append(_backfill(directive[1], directive[2], views))
        lines = []
    return result + _plain_statements(lines, views)


def _plain_statements(lines: list[str], views: dict[str, tuple[str, str]], before_backfill: bool = False) -> list[str]:
    text = "\n".join(line for line in lines if not line.lstrip().startswith("--"))
    if before_backfill and text.strip() and not text.rstrip().endswith(";"):
        raise MigrationFileError("a `-- backfill:` line inside a statement: end the statement before it with `;`")
    found = [statement.strip() for statement in text.split(";") if statement.strip()]
    views.update((view[1], (view[2], view[3])) for view in map(_VIEW.match, found) if view)
    return found


def _backfill(view: str, columns: str | None, views: dict[str, tuple[str, str]]) -> str:
    if view not in views:
        raise MigrationFileError(f"`-- backfill: {view}`: no materialized view {view} made above it in the file")
    target, query = views[view]
    into = f"{target} {columns}" if columns else target
    return f"INSERT INTO {into} SETTINGS insert_deduplicate = 0\n{query}"


def parse_migration(file_name: str, text: str) -> Migration:
    match = _FILE_NAME.match(file_name)
    if match is None:
        raise MigrationFileError(f"{file_name}: a migration file is named NNN_name.sql (name: a-z, 0-9, _)")
    lines = text.splitlines()
    marks = [n for n, line in enumerate(lines) if _DOWN.match(line.strip())]
    if len(marks) > 1:
        raise MigrationFileError(f"{file_name}: more than one `-- down` line")
    try:  # each section backfills from the views it makes itself (the down section's are not the up section's)
        if marks:
            up = split_statements("\n".join(lines[: marks[0]]))
            down: tuple[str, ...] | None = tuple(split_statements("\n".join(lines[marks[0] + 1 :])))
        else:
            up, down = split_statements(text), None
    except MigrationFileError as exc:
        raise MigrationFileError(f"{file_name}: {exc}") from exc
    if not up:
        raise MigrationFileError(f"{file_name}: no statements")
    return Migration(int(match[1]), match[2], tuple(up), down)


def migrations_dir() -> Traversable:
    return resources.files(__package__)


def load_migrations(directory: Traversable | Path | None = None) -> list[Migration]:
    """The migrations of `directory` (by default this package's), in order; refuses gaps and repeats."""
    directory = migrations_dir() if directory is None else directory
    files = sorted((f for f in directory.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    result = sorted((parse_migration(f.name, f.read_text()) for f in files), key=lambda m: m.version)
    for expected, migration in enumerate(result, start=1):
        if migration.version != expected:
            found = ", ".join(f"{m.version} ({m.name})" for m in result)
            raise MigrationFileError(f"migration versions must run 1, 2, 3, ... with no gap or repeat; found {found}")
    return result


def statements() -> list[str]:
    """Every forward statement of every migration, in order: the whole schema of a fresh install."""
    return [statement for migration in load_migrations() for statement in migration.up]
