"""`rewards project …`: projects, their payout configuration and claim signer."""

import json
from pathlib import Path
from typing import Annotated

import typer
import yaml

from runtime.commands.common import DEFAULT_DATA_DIR, DataDir, emit, fail, with_state

project_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Projects and their payout configuration.")


@project_app.command("create")
def project_create(
    name: Annotated[str, typer.Option("--name", metavar="NAME")], data_dir: DataDir = DEFAULT_DATA_DIR
) -> None:
    """Create a project; prints its id."""
    project_id = with_state(data_dir, lambda state: state.create_project(name), create=True)
    emit({"project_id": project_id})


@project_app.command("list")
def project_list(data_dir: DataDir = DEFAULT_DATA_DIR) -> None:
    """List every project (deleted ones too, oldest first): its id, name, creation and deletion times."""
    from rewards.domain.timestamps import format_timestamp

    projects = with_state(data_dir, lambda state: state.list_projects())
    emit(
        [
            {
                "project_id": p.project_id,
                "name": p.name,
                "created_at": format_timestamp(p.created_ms),
                "deleted_at": None if p.deleted_ms is None else format_timestamp(p.deleted_ms),
            }
            for p in projects
        ]
    )


@project_app.command("delete")
def project_delete(
    # The id as the first argument works too (the form before `--project`); hidden, so that help shows no `<str>`.
    project_id: Annotated[str | None, typer.Argument(metavar="PROJECT_ID", hidden=True)] = None,
    project: Annotated[str | None, typer.Option("--project", metavar="ID", help="The project to delete")] = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Delete a project (--project ID, or the id as the argument): requests with its keys answer 404 "Project not
    found" from now on (docs/api.md §0)."""
    if (project_id is None) == (project is None):
        fail("pass the project's id: --project ID")
    project_id = project_id or project
    if not with_state(data_dir, lambda state: state.delete_project(project_id)):
        fail(f"project {project_id} not found")
    emit({"project_id": project_id, "deleted": True})


@project_app.command("config")
def project_config(
    project: Annotated[str, typer.Option("--project", metavar="ID")],
    file: Annotated[
        Path, typer.Option("--file", metavar="FILE", exists=True, dir_okay=False, help="JSON or YAML document")
    ],
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Load the payout configuration (docs/api.md §6) from a JSON or YAML file."""
    from ingest_api.projects.service import config_json, parse_config, store_config
    from rewards.domain.payout_config import InvalidConfig
    from rewards.web.errors import validation_messages

    document = _read_document(file)
    try:
        config = parse_config(document)
    except InvalidConfig as exc:
        fail("; ".join(validation_messages(exc.errors)))

    async def put(state):
        if not await state.project_exists(project):
            return False
        # Whether the project has conversions is the warehouse's to say, which the running server holds: a change of
        # the volume currency goes through PUT /projects/config, which checks (docs/api.md §6).
        stored = await state.get_config(project)
        if config.volume_currency != stored.volume_currency:
            fail("volume_currency changes through PUT /projects/config only (it checks the project has no conversions)")
        await store_config(state, project, stored, config)
        return True

    if not with_state(data_dir, put):
        fail(f"project {project} not found")
    emit({"project_id": project, "config": config_json(config)})


def _read_document(file: Path) -> object:
    """A .json file, or a text that opens like a JSON document, is read as JSON and its errors told in JSON's words
    (a text opening with `{` that is no JSON may still be YAML's flow style, unless the file is named .json); anything
    else as YAML, which JSON is a subset of. A byte-order mark is allowed."""
    text = file.read_text(encoding="utf-8-sig")
    named_json = file.suffix.lower() == ".json"
    json_error = None
    if named_json or text.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            json_error = f"{file} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
            if named_json:
                fail(json_error)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        fail(json_error or f"{file} is not valid YAML (nor JSON): {exc}")


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
    """Set the key that signs the project's claim checks (docs/api.md §7), read from a file so that it stays out of the
    shell's history and the process list; encrypted at rest when REWARDS_SECRETS_KEY is set. Prints its address only."""
    from ingest_api.projects.service import put_claim_signer
    from rewards.domain.claim_signing import InvalidSignerKey, parse_signer_key
    from rewards.domain.sealing import SecretUnreadable
    from rewards.settings import Settings

    if (key_file is None) == (not remove):
        fail("pass either --key-file FILE or --remove")
    signer = None
    if key_file is not None:
        try:
            signer = parse_signer_key(key_file.read_text())
        except (InvalidSignerKey, UnicodeDecodeError):
            fail(f"{key_file}: the key must be a secp256k1 private key: 64 hex digits, 0x optional")
    secrets_keys = Settings().secrets_keys

    async def put(state):
        if not await state.project_exists(project):
            return False
        await put_claim_signer(state, project, signer, secrets_keys)
        return True

    try:
        found = with_state(data_dir, put)
    except SecretUnreadable as exc:
        fail(str(exc))
    if not found:
        fail(f"project {project} not found")
    address = None if signer is None else signer.address
    emit({"project_id": project, "claim_signer_address": address, "encrypted": bool(secrets_keys and signer)})
