"""`python -m bench` (`make bench`): every benchmark, both shapes, one table.

Starts a real Kafka broker, Redis and ClickHouse server as local processes (rewards/devengines) for
the production shape, runs each suite in turn (never two at once: they share the machine's cores),
prints one table and saves it as JSON.
"""

import logging
import time
from pathlib import Path
from typing import Annotated

import typer

from bench import bench_affiliates, dedup, engines, hot_project, ingest, queries, webhooks, workers
from bench.context import Context
from bench.report import Figure, render, save
from rewards.devengines import STARTERS

SUITES = {
    "ingest": ingest.run,
    "engines": engines.run,
    "queries": queries.run,
    "affiliates": bench_affiliates.run,
    "dedup": dedup.run,
    "workers": workers.run,
    "webhooks": webhooks.run,
    "hot": hot_project.run,
}


def main(
    only: Annotated[list[str] | None, typer.Option(help=f"Run only these suites: {', '.join(SUITES)}")] = None,
    data_root: Annotated[Path, typer.Option(help="Generated data, kept between runs")] = Path(".bench-data"),
    out: Annotated[Path, typer.Option(help="Where the figures are saved as JSON")] = Path(".bench-data/latest.json"),
    quick: Annotated[bool, typer.Option(help="Small data, short runs: to try it, not to record")] = False,
    smoke: Annotated[bool, typer.Option(help="Tiny data, one short run each: that it runs")] = False,
) -> None:
    logging.basicConfig(level=logging.WARNING)
    unknown = set(only or []) - set(SUITES)
    if unknown:
        raise typer.BadParameter(f"unknown suites: {', '.join(sorted(unknown))}")
    data_root = data_root.resolve()
    started = [STARTERS[name](data_root / "engines" / name) for name in ("kafka", "redis", "clickhouse")]
    context = Context(data_root, {engine.env_name: engine.url for engine in started}, quick or smoke, smoke)
    figures: list[Figure] = []
    try:
        for name, run in SUITES.items():
            if not only or name in only:
                typer.echo(f"== {name}", err=True)
                began = time.monotonic()
                figures += run(context)
                typer.echo(f"== {name}: {time.monotonic() - began:.1f} s", err=True)
        figures += engines.ceiling_figures(figures)  # each pipeline figure against the slowest engine it needs
    finally:
        for engine in reversed(started):
            engine.stop()
    typer.echo(render(figures))
    save(figures, out)


if __name__ == "__main__":
    typer.run(main)
