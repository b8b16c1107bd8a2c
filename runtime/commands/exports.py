"""`rewards export`: an export (API.md §11, GET /exports/payouts or /exports/conversions) of the running server into a
file, with a progress bar. A client of the API rather than of the warehouse: the embedded engine's folder is held by
the `rewards serve` that runs on it, and the API is where the key's project and its limits are checked."""

import os
from pathlib import Path
from typing import Annotated, Literal

import typer

from runtime.commands.common import emit, fail

app = typer.Typer()
ROWS_HEADER = "X-Export-Rows"  # how many rows the window held when the export began: the bar's total


@app.command()
def export(
    what: Annotated[Literal["payouts", "conversions"], typer.Argument(help="payouts or conversions")],
    out: Annotated[Path, typer.Option("--out", metavar="FILE", help="Where to write it (made anew).")],
    url: Annotated[str, typer.Option("--url", metavar="URL", help="The running server, or the gateway.")] = (
        "http://127.0.0.1:8000"
    ),
    start: Annotated[str | None, typer.Option("--from", help="Inclusive event time (ISO 8601 or epoch ms).")] = None,
    end: Annotated[str | None, typer.Option("--to", help="Exclusive event time (ISO 8601 or epoch ms).")] = None,
    fmt: Annotated[Literal["csv", "ndjson", "parquet"], typer.Option("--format")] = "csv",
) -> None:
    """Write the project's payouts or conversions of a window of event time to --out, streamed (bounded memory);
    the key, a service_role key of the project, is read from REWARDS_API_KEY (never from the command line, which
    other users of the machine can read). Prints the rows and bytes written."""
    import httpx
    from tqdm import tqdm

    key = os.environ.get("REWARDS_API_KEY")
    if not key:
        fail("set REWARDS_API_KEY to a service_role key of the project")
    params = {"format": fmt, **({"from": start} if start else {}), **({"to": end} if end else {})}
    partial = out.with_name(out.name + ".partial")  # renamed once whole: a failed export leaves no file that looks done
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.stream("GET", f"{url.rstrip('/')}/api/v1/exports/{what}", params=params, headers=headers,
                      timeout=httpx.Timeout(60, read=600)) as answer:  # fmt: skip
        if answer.status_code != 200:
            fail(f"{answer.status_code}: {answer.read().decode(errors='replace')[:500]}")
        total = int(answer.headers[ROWS_HEADER]) if answer.headers.get(ROWS_HEADER, "").isdigit() else None
        rows = written = 0
        with partial.open("wb") as file, tqdm(total=total, unit=" rows", disable=None) as bar:
            for chunk in answer.iter_bytes():
                file.write(chunk)
                written += len(chunk)
                if fmt != "parquet":  # a line a row (after CSV's header); Parquet's rows are not countable on the way
                    lines = chunk.count(b"\n")
                    rows += lines
                    bar.update(lines)
    partial.replace(out)
    emit({"file": str(out), "bytes": written, "rows": (rows - (fmt == "csv")) if fmt != "parquet" else total})
