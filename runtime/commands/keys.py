"""`rewards key …`: API keys."""

from typing import Annotated

import typer

from rewards.domain.keys import SCOPES
from runtime.commands.common import DEFAULT_DATA_DIR, DataDir, emit, fail, with_state

key_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="API keys.")


@key_app.command("create")
def key_create(
    project: Annotated[str, typer.Option("--project", metavar="ID")],
    scope: Annotated[
        list[str] | None,
        typer.Option(
            "--scope",
            metavar="SCOPE",
            help=f"One of {', '.join(SCOPES)}; repeatable. None: a standard key (what needs no scope, docs/api.md §0);"
            " service_role is accepted wherever a scope is needed.",
        ),
    ] = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Create an API key; it is shown only here."""
    scopes = sorted(set(scope or []))
    unknown = [s for s in scopes if s not in SCOPES]
    if unknown:
        fail(f"unknown scope(s): {', '.join(unknown)}; known: {', '.join(SCOPES)}")

    async def create(state):
        if not await state.project_exists(project):
            return None
        return await state.create_key(project, scopes)

    api_key = with_state(data_dir, create)
    if api_key is None:
        fail(f"project {project} not found")
    emit({"api_key": api_key, "project_id": project, "scopes": scopes})


@key_app.command("list")
def key_list(
    project: Annotated[str, typer.Option("--project", metavar="ID")], data_dir: DataDir = DEFAULT_DATA_DIR
) -> None:
    """List a project's keys (revoked ones too, oldest first): each key's id, scopes, creation and revocation times.
    A key itself is shown only when it is created, and never stored."""
    from rewards.domain.timestamps import format_timestamp

    async def listing(state):
        if await state.get_project(project) is None:
            return None
        return await state.list_keys(project)

    found = with_state(data_dir, listing)
    if found is None:
        fail(f"project {project} not found")
    emit(
        [
            {
                "key_id": k.key_id,
                "scopes": list(k.scopes),
                "created_at": format_timestamp(k.created_ms),
                "revoked_at": None if k.revoked_ms is None else format_timestamp(k.revoked_ms),
            }
            for k in found
        ]
    )


@key_app.command("revoke")
def key_revoke(
    # Hidden from the help's argument list (typer would show `API_KEY <str>`): the usage line and the text name it.
    api_key: Annotated[str | None, typer.Argument(metavar="API_KEY", hidden=True)] = None,
    key_id: Annotated[
        str | None, typer.Option("--id", metavar="KEY_ID", help="Revoke by the key's id (`key list`), not the key")
    ] = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Revoke an API key, given itself (the argument API_KEY) or its id (--id): requests with it answer 401 from now on
    (the project stays)."""
    if (api_key is None) == (key_id is None):
        fail("pass either the API key or --id KEY_ID")
    if api_key is not None:
        revoked = with_state(data_dir, lambda state: state.revoke_key(api_key))
    else:
        revoked = with_state(data_dir, lambda state: state.revoke_key_id(key_id))
    if not revoked:
        fail("unknown or already revoked key")
    emit({"revoked": True})
