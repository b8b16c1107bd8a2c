"""The `rewards` command line. Its commands come from the packages that provide them, through the `rewards.commands`
entry points (pyproject.toml; each names a `register(app)`), as Flask's `flask` command collects `flask.commands`:
the shared library imports none of the services, and the composition root (runtime/commands) adds serve, workers,
migrate, project, key and demo."""

import json
import sys
from importlib.metadata import entry_points

import typer

GROUP = "rewards.commands"

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help: typer's rich panels tag every option with its Python type (`--help <bool>`, `<str>`).
    rich_markup_mode=None,
    help="Rewards, referral and event-ingestion service.",
)


NOT_INSTALLED = f"no `{GROUP}` entry points: install the project (`make install` or `pip install -e .`)"


def _register_commands() -> bool:
    found = entry_points(group=GROUP)
    for entry in sorted(found, key=lambda e: e.name):
        entry.load()(app)
    return bool(found)


_installed = _register_commands()


def main() -> None:
    if not _installed:  # run from a checkout that was never installed: say so, not a usage with no commands
        sys.exit(json.dumps({"error": NOT_INSTALLED}))
    app()
