"""`rewards dead-letters list` and `replay`: the project's dead letters through the running server's API (GET
/dead-letters, POST /dead-letters/replay), the key (service_role) from REWARDS_API_KEY. A client of the API, as
`rewards export` is: the embedded warehouse is held by the `rewards serve` that runs on it, and replaying publishes
on the server's event log."""

import os
from typing import Annotated

import typer

from runtime.commands.common import emit, fail

app = typer.Typer(help="The records the workers set aside: list them, replay them once what set them aside is mended.")

Url = Annotated[str, typer.Option("--url", metavar="URL", help="The running server, or the gateway.")]
RecordType = Annotated[str | None, typer.Option("--type", help="Only dead letters of this record type.")]
Reason = Annotated[str | None, typer.Option("--reason", help="Only those whose reason holds this (any case).")]
Start = Annotated[str | None, typer.Option("--from", help="Failed at or after (ISO 8601 or epoch ms).")]
End = Annotated[str | None, typer.Option("--to", help="Failed before (ISO 8601 or epoch ms).")]
DEFAULT_URL = "http://127.0.0.1:8000"


def _client(url: str):
    import httpx

    key = os.environ.get("REWARDS_API_KEY")
    if not key:
        fail("set REWARDS_API_KEY to a service_role key of the project")
    return httpx.Client(base_url=f"{url.rstrip('/')}/api/v1", headers={"Authorization": f"Bearer {key}"}, timeout=120)


def _ok(answer) -> dict:
    if answer.status_code != 200:
        fail(f"{answer.status_code}: {answer.text[:500]}")
    return answer.json()


def _filters(record_type: str | None, reason: str | None, start: str | None, end: str | None) -> dict:
    given = {"record_type": record_type, "reason": reason, "from": start, "to": end}
    return {name: value for name, value in given.items() if value is not None}


@app.command("list")
def list_(
    url: Url = DEFAULT_URL, record_type: RecordType = None, reason: Reason = None, start: Start = None,
    end: End = None, page: Annotated[int, typer.Option(min=1)] = 1,
    page_size: Annotated[int, typer.Option(min=1, max=100)] = 100,
) -> None:  # fmt: skip
    """Print a page of the project's dead letters, oldest first: why each was set aside, what it was, and whether a
    replay would publish it again."""
    with _client(url) as client:
        params = {**_filters(record_type, reason, start, end), "page": page, "page_size": page_size}
        emit(_ok(client.get("/dead-letters", params=params)))


@app.command()
def replay(
    url: Url = DEFAULT_URL, record_type: RecordType = None, reason: Reason = None, start: Start = None,
    end: End = None,
) -> None:  # fmt: skip
    """Publish the matching dead letters' records again, once what set them aside is mended; safe to run twice (the
    workers write each replayed record once). Prints how many were replayed, and those left by why."""
    from collections import Counter

    from tqdm import tqdm

    filters = _filters(record_type, reason, start, end)
    replayed, refused = 0, Counter()
    with _client(url) as client:
        total = _ok(client.get("/dead-letters", params={**filters, "page_size": 1}))["total_count"]
        with tqdm(total=total, unit=" dead letters", disable=None) as bar:
            after = None
            while True:
                body = {**filters, **({"after": after} if after else {})}
                answer = _ok(client.post("/dead-letters/replay", json=body))
                replayed += answer["replayed"]
                refused.update(answer["not_replayable"])
                bar.update(answer["replayed"] + sum(answer["not_replayable"].values()))
                if (after := answer["next"]) is None:
                    break
    emit({"replayed": replayed, "not_replayable": dict(refused)})
