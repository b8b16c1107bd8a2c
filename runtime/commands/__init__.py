"""The `rewards` command line's commands, added to it through the `rewards.commands` entry point (pyproject.toml).

A module per group of commands: serving (serve, ingest-api, query-api, workers), migrations (migrate,
bound-redis-keys), projects (project …), keys (key …), demo (a demo project on a running server), exports (export: an
API export into a file), dead_letters (dead-letters list/replay, through the API), backups (backup, restore: the
embedded default's data dir), moving (move-to-production: a data dir into the production engines). Each command
imports what it runs inside its body, so that `rewards --help` stays quick. Output on stdout is JSON; errors go to
stderr with a non-zero exit (common.py).
"""

import typer

from runtime.commands import backups, dead_letters, demo, exports, keys, migrations, moving, projects, serving


def register(app: typer.Typer) -> None:
    app.add_typer(serving.app)
    app.add_typer(migrations.app)
    app.add_typer(projects.project_app, name="project")
    app.add_typer(keys.key_app, name="key")
    app.add_typer(demo.app)
    app.add_typer(exports.app)
    app.add_typer(dead_letters.app, name="dead-letters")
    app.add_typer(backups.app)
    app.add_typer(moving.app)
