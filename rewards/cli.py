"""The `rewards` command line. Its commands come from the packages that provide them, through the `rewards.commands`
entry points (pyproject.toml; each names a `register(app)`), as Flask's `flask` command collects `flask.commands`:
the shared library imports none of the services, and the composition root (runtime/commands) adds serve, workers,
migrate, project and key."""

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


class NoCommands(RuntimeError):
    pass


def _register_commands() -> None:
    found = entry_points(group=GROUP)
    if not found:
        raise NoCommands(f"no `{GROUP}` entry points: install the project (`make install` or `pip install -e .`)")
    for entry in sorted(found, key=lambda e: e.name):
        entry.load()(app)


_register_commands()


def main() -> None:
    app()
