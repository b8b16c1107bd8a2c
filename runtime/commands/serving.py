"""Running the service: `serve` (the embedded default); the production shape's `ingest-api`, `query-api`, `workers`."""

import os
from typing import Annotated

import typer

from runtime.commands.common import DEFAULT_DATA_DIR, DataDir, fail

app = typer.Typer()


@app.command()
def serve(
    host: Annotated[str, typer.Option(envvar="REWARDS_HOST", metavar="HOST")] = "127.0.0.1",
    port: Annotated[int, typer.Option(envvar="REWARDS_PORT", metavar="PORT")] = 8000,
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Serve every endpoint and run the pipeline in one process (the embedded default)."""
    from rewards.settings import Settings
    from runtime.data_dir import DataDirInUse
    from runtime.serve import CannotListen
    from runtime.serve import serve as run_server

    try:
        run_server(Settings(host=host, port=port, data_dir=data_dir))
    except (CannotListen, DataDirInUse) as exc:
        fail(str(exc))


def _serve_factory(factory: str, host: str, port: int, processes: int) -> None:
    import uvicorn

    from rewards.logging import configure_logging
    from rewards.settings import Settings
    from rewards.web.protocol import ContractHttpProtocol

    settings = Settings()
    configure_logging(settings.log_level, settings.log_format)
    uvicorn.run(
        factory, factory=True, host=host, port=port, workers=processes, log_config=None, access_log=False,
        timeout_graceful_shutdown=10, http=ContractHttpProtocol,
    )  # fmt: skip


Processes = Annotated[int, typer.Option("--processes", metavar="N", help="Copies of the service sharing the port.")]


@app.command("ingest-api")
def ingest_api(
    host: Annotated[str, typer.Option(envvar="REWARDS_HOST", metavar="HOST")] = "127.0.0.1",
    port: Annotated[int, typer.Option(envvar="REWARDS_PORT", metavar="PORT")] = 8001,
    processes: Processes = 1,
    instance: Annotated[
        str | None,
        typer.Option(
            envvar="REWARDS_INGEST_INSTANCE",
            metavar="NAME",
            help="This service's identity, kept across its restarts and never shared by two live ones (a pod name,"
            " a systemd instance; default: the host name). Its Kafka transactional ids derive from it (and the"
            " worker's index), so a restart fences the dead process's open transactions at once.",
        ),
    ] = None,
) -> None:
    """The production shape's ingest edge (events, codes, configuration, affiliates, claim check changes)."""
    if instance:
        os.environ["REWARDS_INGEST_INSTANCE"] = instance  # read by each worker process's Settings
    _serve_factory("runtime.production:ingest_api", host, port, processes)


@app.command("query-api")
def query_api(
    host: Annotated[str, typer.Option(envvar="REWARDS_HOST", metavar="HOST")] = "127.0.0.1",
    port: Annotated[int, typer.Option(envvar="REWARDS_PORT", metavar="PORT")] = 8002,
    processes: Processes = 1,
) -> None:
    """The production shape's reads (payouts, affiliate listing, claim history and totals)."""
    _serve_factory("runtime.production:query_api", host, port, processes)


@app.command()
def workers(
    processes: Annotated[
        int,
        typer.Option(
            "--processes",
            envvar="REWARDS_WORKER_PROCESSES",
            metavar="N",
            min=1,
            help="Worker processes sharing the topic's partitions (one consumer group); 1 per core measured best."
            " If one exits, the others are stopped and its status is the command's.",
        ),
    ] = 1,
) -> None:
    """The production shape's stream workers (a faust app): log to warehouse."""
    if processes == 1:
        from runtime.wiring import open_worker_resources
        from stream_workers.faust_app import run_workers

        run_workers(open_worker_resources)
        return
    from rewards.logging import configure_logging
    from stream_workers.faust_app import check_environment
    from stream_workers.processes import run_processes

    settings, _ = check_environment()
    configure_logging(settings.log_level, settings.log_format)
    raise typer.Exit(run_processes(processes))


@app.command()
def webhooks() -> None:
    """The production shape's webhook dispatcher: reads the events topic with its own consumer group and sends each
    project's endpoints what happened (API.md §10). Scale by starting more."""
    from rewards.settings import Settings
    from runtime.webhooks import main

    try:
        main(Settings())
    except ValueError as exc:  # an engine's URL missing from the environment
        fail(str(exc))
