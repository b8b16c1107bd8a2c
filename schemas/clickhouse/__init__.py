"""ClickHouse DDL: the same text runs on the embedded chdb engine and on a ClickHouse server.

The schema is a series of numbered migrations, one file each: `NNN_name.sql` is version NNN (1, 2, 3, ... with
no gaps). A file holds its forward statements and, optionally, after a line `-- down`, the statements that undo
them (no such line: the migration cannot be undone; the line with nothing after it: there is nothing to undo).
Statements are separated by `;`; lines starting with `--` are comments. rewards/adapters/migrations.py applies them in
order and records each one in the warehouse's `schema_migrations` table. On a ClickHouse cluster, it runs them
rewritten into the sharded layout of `schemas.clickhouse.layout` (the files stay as they are, one node's schema).
"""

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

# Every insert carries these, so the materialized views deduplicate a redelivered block too.
INSERT_SETTINGS = {"deduplicate_blocks_in_dependent_materialized_views": 1}

_FILE_NAME = re.compile(r"^(\d+)_([a-z0-9_]+)\.sql$")
_DOWN = re.compile(r"^--\s*down\s*$", re.IGNORECASE)


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


def split_statements(text: str) -> list[str]:
    """Comment lines (`--`) dropped, then the `;`-separated statements, trimmed, empty ones left out."""
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    return [statement.strip() for statement in text.split(";") if statement.strip()]


def parse_migration(file_name: str, text: str) -> Migration:
    match = _FILE_NAME.match(file_name)
    if match is None:
        raise MigrationFileError(f"{file_name}: a migration file is named NNN_name.sql (name: a-z, 0-9, _)")
    lines = text.splitlines()
    marks = [n for n, line in enumerate(lines) if _DOWN.match(line.strip())]
    if len(marks) > 1:
        raise MigrationFileError(f"{file_name}: more than one `-- down` line")
    if marks:
        up = split_statements("\n".join(lines[: marks[0]]))
        down: tuple[str, ...] | None = tuple(split_statements("\n".join(lines[marks[0] + 1 :])))
    else:
        up, down = split_statements(text), None
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
