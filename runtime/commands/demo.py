"""`rewards demo`: a demo project, "Demo shop", on a running server (runtime.demo; docs/demo.md)."""

from typing import Annotated

import typer

from runtime.commands.common import DEFAULT_DATA_DIR, DataDir, emit, fail, with_state

app = typer.Typer()


@app.command()
def demo(
    url: Annotated[
        str, typer.Option("--url", metavar="URL", help="The running server (`rewards serve`, or the gateway).")
    ] = "http://127.0.0.1:8000",
    conversions: Annotated[
        int, typer.Option("--conversions", min=1, max=100_000, metavar="N", help="Conversion events to send.")
    ] = 3000,
    seed: Annotated[int, typer.Option("--seed", metavar="N", help="The same seed makes the same data.")] = 28,
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Make a new project, "Demo shop", on the running server at --url and fill it: a payout program (tiers,
    points for purchases, USDC for swaps, referral rewards), affiliates four levels deep, referred users, conversions
    over the last 30 days, closed and claimed claim checks. The project and its keys are made in the server's
    state store (--data-dir, or REDIS_URL), the rest through the API. Prints the project, a service_role key and the
    console's address."""
    from rewards.settings import Settings
    from runtime.demo import DemoError, run

    try:
        summary = run(url, conversions, seed, lambda action: with_state(data_dir, action), Settings().secrets_keys)
    except DemoError as exc:
        fail(str(exc))
    emit(summary)
