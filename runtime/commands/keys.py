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
            help=f"One of {', '.join(SCOPES)}; repeatable. None: a standard key (what needs no scope, API.md §0);"
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


@key_app.command("revoke")
def key_revoke(
    api_key: Annotated[str, typer.Argument(metavar="API_KEY")], data_dir: DataDir = DEFAULT_DATA_DIR
) -> None:
    """Revoke an API key: requests with it answer 401 from now on (the project stays)."""
    if not with_state(data_dir, lambda state: state.revoke_key(api_key)):
        fail("unknown or already revoked key")
    emit({"revoked": True})
