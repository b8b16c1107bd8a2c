"""The `rewards` command line. Output on stdout is JSON; errors go to stderr with a non-zero exit."""

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
import yaml

from rewards.domain.keys import SCOPES

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help: typer's rich panels tag every option with its Python type (`--help <bool>`, `<str>`).
    rich_markup_mode=None,
    help="Rewards, referral and event-ingestion service.",
)
project_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Projects and their payout configuration.")
key_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="API keys.")
app.add_typer(project_app, name="project")
app.add_typer(key_app, name="key")

DataDir = Annotated[
    Path, typer.Option("--data-dir", envvar="REWARDS_DATA_DIR", metavar="DIR", help="Where the data lives.")
]
DEFAULT_DATA_DIR = Path("data")


def _print(value: object) -> None:
    typer.echo(json.dumps(value))


def _fail(message: str, code: int = 1) -> None:
    typer.echo(json.dumps({"error": message}), err=True)
    raise typer.Exit(code)


def _with_state(data_dir: Path, action, create: bool = False):
    """Run `action(state)` on the state store: Redis's when REDIS_URL is set (the production shape),
    else the embedded one of `data_dir` (safe beside a running server). Only `create` makes a new one:
    run from another folder, a command would otherwise make an empty `./data` and its keys answer 401."""
    from rewards.app.wiring import open_state, state_path
    from rewards.settings import Settings

    settings = Settings()
    redis_url = settings.redis_url
    if not redis_url and not create and not state_path(data_dir).exists():
        _fail(
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


@app.command()
def serve(
    host: Annotated[str, typer.Option(envvar="REWARDS_HOST", metavar="HOST")] = "127.0.0.1",
    port: Annotated[int, typer.Option(envvar="REWARDS_PORT", metavar="PORT")] = 8000,
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Serve every endpoint and run the pipeline in one process (the embedded default)."""
    from rewards.app.serve import DataDirInUse
    from rewards.app.serve import serve as run_server
    from rewards.settings import Settings

    try:
        run_server(Settings(host=host, port=port, data_dir=data_dir))
    except DataDirInUse as exc:
        _fail(str(exc))


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
    _serve_factory("rewards.app.production:ingest_api", host, port, processes)


@app.command("query-api")
def query_api(
    host: Annotated[str, typer.Option(envvar="REWARDS_HOST", metavar="HOST")] = "127.0.0.1",
    port: Annotated[int, typer.Option(envvar="REWARDS_PORT", metavar="PORT")] = 8002,
    processes: Processes = 1,
) -> None:
    """The production shape's reads (payouts, affiliate listing, claim history and totals)."""
    _serve_factory("rewards.app.production:query_api", host, port, processes)


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
        from rewards.app.wiring import open_worker_resources
        from stream_workers.faust_app import run_workers

        run_workers(open_worker_resources)
        return
    from rewards.logging import configure_logging
    from stream_workers.faust_app import check_environment
    from stream_workers.processes import run_processes

    settings, _ = check_environment()
    configure_logging(settings.log_level, settings.log_format)
    raise typer.Exit(run_processes(processes))


def _migration_warehouse(data_dir: Path):
    """What `migrate --status` and `--to` work on: the ClickHouse server of CLICKHOUSE_URL when set, else the
    embedded warehouse of `data_dir` (not while `rewards serve` runs on it: chdb holds its directory)."""
    from rewards.app.wiring import open_warehouse
    from rewards.settings import Settings

    settings = Settings()
    if settings.clickhouse_url:
        return "clickhouse", lambda: open_warehouse(settings.clickhouse_url, settings, with_nodes=True)
    path = data_dir / "warehouse"
    if not path.is_dir():
        _fail(f"no embedded warehouse at {path} (set CLICKHOUSE_URL for the production shape's)")

    async def open_embedded():
        from rewards.adapters.migrations import MigrationError

        try:
            return await open_warehouse(f"chdb:///{path}", settings)
        except RuntimeError as exc:  # chdb's: most likely a `rewards serve` holds the directory
            raise MigrationError(f"cannot open the embedded warehouse at {path} (is `rewards serve` running on it?): "
                                 f"{exc}") from exc  # fmt: skip

    return "embedded", open_embedded


@app.command()
def migrate(
    status: Annotated[
        bool, typer.Option("--status", help="Print the applied and pending migrations; change nothing.")
    ] = False,
    to: Annotated[
        int | None,
        typer.Option(
            "--to",
            min=0,
            metavar="VERSION",
            help="Go up or down to this version (down only where migrations have down steps).",
        ),
    ] = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Create the events topic and bring the ClickHouse tables and views to the latest migration (idempotent).

    --status and --to work on the warehouse alone: CLICKHOUSE_URL's, else the embedded one of --data-dir."""
    from rewards.adapters import migrations
    from rewards.adapters.production.migrate import migrate as run_migrate
    from rewards.settings import Settings

    if status and to is not None:
        _fail("--status and --to go alone")
    if not status and to is None:
        try:
            _print(asyncio.run(run_migrate(Settings())))
        except migrations.MigrationError as exc:
            _fail(str(exc))
        return
    kind, open_warehouse = _migration_warehouse(data_dir)

    async def run():
        warehouse = await open_warehouse()
        try:
            if status:
                return await migrations.status(warehouse)
            return (await migrations.migrate(warehouse, target=to, progress=True)).summary()
        finally:
            await warehouse.close()

    try:
        _print({"warehouse": kind, **asyncio.run(run())})
    except migrations.MigrationError as exc:
        _fail(str(exc))


@app.command("bound-redis-keys")
def bound_redis_keys() -> None:
    """Give a TTL to the dedup keys and event-name sets an install made before the dedup windows (production
    shape, REDIS_URL): a one-off after upgrading, safe beside running services (README "Windows")."""
    from tqdm import tqdm

    from rewards.app.wiring import open_state
    from rewards.settings import Settings

    settings = Settings()
    if not settings.redis_url:
        _fail("bound-redis-keys works on the production shape's Redis: set REDIS_URL")

    async def run() -> int:
        state = await open_state(settings.redis_url, settings)
        try:
            with tqdm(total=await state.key_count(), desc="scanning", unit="key", file=sys.stderr) as bar:
                return await state.bound_unexpiring_keys(scanned=bar.update)
        finally:
            await state.close()

    _print({"bounded": asyncio.run(run())})


@project_app.command("create")
def project_create(
    name: Annotated[str, typer.Option("--name", metavar="NAME")], data_dir: DataDir = DEFAULT_DATA_DIR
) -> None:
    """Create a project; prints its id."""
    project_id = _with_state(data_dir, lambda state: state.create_project(name), create=True)
    _print({"project_id": project_id})


@project_app.command("delete")
def project_delete(
    project_id: Annotated[str, typer.Argument(metavar="PROJECT_ID")], data_dir: DataDir = DEFAULT_DATA_DIR
) -> None:
    """Delete a project: its keys answer 404 from now on."""
    if not _with_state(data_dir, lambda state: state.delete_project(project_id)):
        _fail(f"project {project_id} not found")
    _print({"project_id": project_id, "deleted": True})


@project_app.command("config")
def project_config(
    project: Annotated[str, typer.Option("--project", metavar="ID")],
    file: Annotated[
        Path, typer.Option("--file", metavar="FILE", exists=True, dir_okay=False, help="JSON or YAML document")
    ],
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Load the payout configuration (API.md §6) from a JSON or YAML file."""
    from ingest_api.projects.service import config_json, parse_config
    from rewards.domain.payout_config import InvalidConfig
    from rewards.web.errors import validation_messages

    try:
        document = yaml.safe_load(file.read_text())  # YAML is a superset of JSON
    except yaml.YAMLError as exc:
        _fail(f"{file} is not valid JSON or YAML: {exc}")
    try:
        config = parse_config(document)
    except InvalidConfig as exc:
        _fail("; ".join(validation_messages(exc.errors)))

    async def put(state):
        if not await state.project_exists(project):
            return False
        await state.put_config(project, config)
        return True

    if not _with_state(data_dir, put):
        _fail(f"project {project} not found")
    _print({"project_id": project, "config": config_json(config)})


@project_app.command("claim-signer")
def project_claim_signer(
    project: Annotated[str, typer.Option("--project", metavar="ID")],
    key_file: Annotated[
        Path | None,
        typer.Option(
            "--key-file",
            metavar="FILE",
            exists=True,
            dir_okay=False,
            help="The private key: 64 hex digits (0x optional)",
        ),
    ] = None,
    remove: Annotated[bool, typer.Option("--remove", help="Remove the project's claim signer")] = False,
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Set the key that signs the project's claim checks (API.md §7), read from a file so that it stays out of the
    shell's history and the process list; encrypted at rest when REWARDS_SECRETS_KEY is set. Prints its address only."""
    from ingest_api.projects.service import put_claim_signer
    from rewards.domain.claim_signing import InvalidSignerKey, parse_signer_key
    from rewards.domain.sealing import SecretUnreadable
    from rewards.settings import Settings

    if (key_file is None) == (not remove):
        _fail("pass either --key-file FILE or --remove")
    signer = None
    if key_file is not None:
        try:
            signer = parse_signer_key(key_file.read_text())
        except (InvalidSignerKey, UnicodeDecodeError):
            _fail(f"{key_file}: the key must be a secp256k1 private key: 64 hex digits, 0x optional")
    secrets_keys = Settings().secrets_keys

    async def put(state):
        if not await state.project_exists(project):
            return False
        await put_claim_signer(state, project, signer, secrets_keys)
        return True

    try:
        found = _with_state(data_dir, put)
    except SecretUnreadable as exc:
        _fail(str(exc))
    if not found:
        _fail(f"project {project} not found")
    address = None if signer is None else signer.address
    _print({"project_id": project, "claim_signer_address": address, "encrypted": bool(secrets_keys and signer)})


@key_app.command("create")
def key_create(
    project: Annotated[str, typer.Option("--project", metavar="ID")],
    scope: Annotated[
        list[str] | None, typer.Option("--scope", metavar="SCOPE", help=f"One of {', '.join(SCOPES)}; repeatable.")
    ] = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Create an API key; it is shown only here."""
    scopes = sorted(set(scope or []))
    unknown = [s for s in scopes if s not in SCOPES]
    if unknown:
        _fail(f"unknown scope(s): {', '.join(unknown)}; known: {', '.join(SCOPES)}")

    async def create(state):
        if not await state.project_exists(project):
            return None
        return await state.create_key(project, scopes)

    api_key = _with_state(data_dir, create)
    if api_key is None:
        _fail(f"project {project} not found")
    _print({"api_key": api_key, "project_id": project, "scopes": scopes})


@key_app.command("revoke")
def key_revoke(
    api_key: Annotated[str, typer.Argument(metavar="API_KEY")], data_dir: DataDir = DEFAULT_DATA_DIR
) -> None:
    """Revoke an API key: it answers 401 from now on."""
    if not _with_state(data_dir, lambda state: state.revoke_key(api_key)):
        _fail("unknown or already revoked key")
    _print({"revoked": True})
