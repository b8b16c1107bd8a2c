"""Issue 34: the benchmarks must not rot. `python -m bench --smoke` runs every suite on tiny data (its own engines, as
`make bench` does, in a temporary directory) and each must print its table rows: a generator a migration broke, a
suite an API change broke, fails here instead of on the next recorded run. Nothing is timed (bench/context.py)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.__main__ import SUITES

AFFILIATE_READS = ("GET /affiliates ", "GET /affiliate-portal ")
# Which figures are each suite's (bench/*.py): every suite measures both shapes.
SUITE_OF = {
    "ingest": lambda f: f["section"] in {"ingest", "backpressure", "freshness", "memory"},
    "engines": lambda f: f["section"] == "ceiling",
    "queries": lambda f: f["section"] == "queries" and not f["case"].startswith(AFFILIATE_READS),
    "affiliates": lambda f: f["section"] == "queries" and f["case"].startswith(AFFILIATE_READS),
    "dedup": lambda f: f["section"] == "dedup",
    "workers": lambda f: f["section"] == "workers",
    "webhooks": lambda f: f["section"] == "webhooks",
    "hot": lambda f: f["section"] == "hot project",
}


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory) -> tuple[dict, str]:
    root = tmp_path_factory.mktemp("bench-smoke")
    out = root / "figures.json"
    command = [sys.executable, "-m", "bench", "--smoke", "--data-root", str(root / "data"), "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=Path(__file__).parents[2])
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(out.read_text()), done.stdout


def test_every_suite_is_smoke_tested():
    assert set(SUITE_OF) == set(SUITES)


@pytest.mark.parametrize("suite", sorted(SUITE_OF))
def test_each_suite_prints_its_table_rows(smoke_run, suite):
    figures, table = smoke_run
    rows = [f for f in figures["figures"] if SUITE_OF[suite](f)]
    assert {f["shape"] for f in rows} == {"embedded", "production"}, f"{suite}: {len(rows)} figures"
    for figure in rows:
        assert isinstance(figure["result"], int | float), figure
        assert f"| {figure['section']} | {figure['case']} | {figure['shape']} |" in table, figure
