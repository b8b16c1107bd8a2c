"""One table for every benchmark: each figure beside a baseline measured in the same run.

Absolute times drift on a shared machine; the ratio to a baseline taken minutes apart on the same
machine is what stays comparable from one run to the next.
"""

import json
import platform
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import psutil


@dataclass(frozen=True)
class Figure:
    section: str  # ingest | freshness | queries | memory
    case: str
    shape: str  # embedded | production
    result: float  # events/s, ms (p50 when latencies), MB
    unit: str
    p99: float | None = None  # for latencies
    baseline_name: str = ""
    baseline: float | None = None  # same unit as result
    ratio: float | None = None  # see `ratio_note`
    ratio_note: str = ""
    target: str = ""
    met: bool | None = None


def time_calls(call: Callable[[int], object], runs: int) -> tuple[list[float], object]:
    """The milliseconds of `call(0)` … `call(runs - 1)`, one sample each, and the last answer."""
    samples, answer = [], None
    for run in range(runs):
        start = time.perf_counter()
        answer = call(run)
        samples.append((time.perf_counter() - start) * 1000)
    return samples, answer


async def time_awaits(call: Callable[[int], Awaitable], runs: int) -> tuple[list[float], object]:
    """`time_calls` for a coroutine function."""
    samples, answer = [], None
    for run in range(runs):
        start = time.perf_counter()
        answer = await call(run)
        samples.append((time.perf_counter() - start) * 1000)
    return samples, answer


def percentiles(samples: list[float]) -> tuple[float, float]:
    """(p50, p99) of the samples (nearest rank)."""
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_gb = psutil.virtual_memory().total / 2**30
    return f"{psutil.cpu_count()} cores {cpu}, {memory_gb:.0f} GB, Python {platform.python_version()}"


def _number(value: float | None, unit: str = "") -> str:
    if value is None:
        return ""
    text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"
    return f"{text} {unit}".strip()


def _result(figure: Figure) -> str:
    if figure.p99 is None:
        return _number(figure.result, figure.unit)
    return f"{_number(figure.result)} / {_number(figure.p99)} {figure.unit}"


def render(figures: list[Figure]) -> str:
    lines = [
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {machine()}",
        "",
        "| section | case | shape | result (p50 / p99 for latencies) | baseline, same run | ratio | target | met |",
        "|---|---|---|---:|---|---:|---|:-:|",
    ]
    for f in figures:
        baseline = f"{f.baseline_name} {_number(f.baseline, f.unit)}".strip() if f.baseline_name else ""
        ratio = f"{f.ratio:.2f} {f.ratio_note}".strip() if f.ratio is not None else ""
        met = "" if f.met is None else ("yes" if f.met else "no")
        cells = (f.section, f.case, f.shape, _result(f), baseline, ratio, f.target, met)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def save(figures: list[Figure], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"machine": machine(), "figures": [asdict(f) for f in figures]}, indent=1))
