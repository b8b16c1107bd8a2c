"""ClickHouse DDL: the same text runs on the embedded chdb engine and on a ClickHouse server."""

from importlib import resources

# Every insert carries these, so the materialized views deduplicate a redelivered block too.
INSERT_SETTINGS = {"deduplicate_blocks_in_dependent_materialized_views": 1}


def statements() -> list[str]:
    files = sorted(f for f in resources.files(__package__).iterdir() if f.name.endswith(".sql"))
    result = []
    for sql_file in files:
        text = "\n".join(line for line in sql_file.read_text().splitlines() if not line.lstrip().startswith("--"))
        result += [statement.strip() for statement in text.split(";") if statement.strip()]
    return result
