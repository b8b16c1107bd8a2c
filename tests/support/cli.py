"""The `rewards` command line run in the test's own process (a process per command would cost a second of imports
each): what a shell would see of it."""

from types import SimpleNamespace

from typer.testing import CliRunner

from rewards.cli import app

# The embedded state of --data-dir, not a Redis the environment may name; no secrets key unless the test gives one.
UNSET = {"REDIS_URL": None, "REWARDS_REDIS_URL": None, "REWARDS_SECRETS_KEY": None}


def rewards(*args: str, data_dir, env: dict | None = None) -> SimpleNamespace:
    """`rewards <args> --data-dir <data_dir>`: its exit code, stdout and stderr. A crash is raised, never read as a
    failing exit code."""
    result = CliRunner().invoke(app, [*args, "--data-dir", str(data_dir)], env={**UNSET, **(env or {})})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return SimpleNamespace(returncode=result.exit_code, stdout=result.stdout, stderr=result.stderr)
