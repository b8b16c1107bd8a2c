"""What the commands share: the data dir option, JSON output, failing, and opening the state store."""

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer

DataDir = Annotated[
    Path, typer.Option("--data-dir", envvar="REWARDS_DATA_DIR", metavar="DIR", help="Where the data lives.")
]
DEFAULT_DATA_DIR = Path("data")


def emit(value: object) -> None:
    typer.echo(json.dumps(value))


def fail(message: str, code: int = 1) -> None:
    typer.echo(json.dumps({"error": message}), err=True)
    raise typer.Exit(code)


def with_state(data_dir: Path, action, create: bool = False):
    """Run `action(state)` on the state store: Redis's when REDIS_URL is set (the production shape),
    else the embedded one of `data_dir` (safe beside a running server). Only `create` makes a new one:
    run from another folder, a command would otherwise make an empty `./data` and its keys answer 401."""
    from rewards.settings import Settings
    from runtime.wiring import open_state, state_path

    settings = Settings()
    redis_url = settings.redis_url
    if not redis_url and not create and not state_path(data_dir).exists():
        fail(
            f"no data in {data_dir.resolve()}: pass the folder `rewards serve` uses (--data-dir or "
            "REWARDS_DATA_DIR), or create a project there first (`rewards project create`)"
        )

    async def run():
        state = await open_state(redis_url or f"sqlite:///{state_path(data_dir)}", settings)
        try:
            return await action(state)
        finally:
            await state.close()

    return asyncio.run(run())
