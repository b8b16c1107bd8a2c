"""bench.engines.ceiling_figures: each pipeline figure of the ingest suite as a share of the slowest engine it
depends on (pure: the figures are built by hand here)."""

import inspect

import pytest

from bench import engines, ingest
from bench.engines import (
    CHDB,
    CLICKHOUSE,
    KAFKA_CONSUME,
    KAFKA_LOG,
    KAFKA_PLAIN,
    KAFKA_TOOL,
    REDIS,
    SECTION,
    SQLITE,
    TARGET,
    ceiling_figures,
)
from bench.report import Figure

PROCESSED_CASE = "processed events/s (accepted → warehouse, load + drain)"


def engine(label: str, result: float, shape: str = "production", detail: str = ": details") -> Figure:
    return Figure(SECTION, f"{label}{detail}", shape, result, "events/s")


def accepted(shape: str, result: float, errors: dict | None = None) -> Figure:
    """The accepted figure exactly as bench/ingest.py builds it."""
    loaded = {"events_per_s": result, "p50_ms": 500.0, "p99_ms": 900.0, "errors": errors or {}}
    baseline = {"events_per_s": 150_000.0, "p50_ms": 30.0}
    return ingest._ingest_figures(shape, loaded, baseline)[0]


def processed(shape: str, result: float) -> Figure:
    return Figure("ingest", PROCESSED_CASE, shape, result, "events/s", baseline_name="accepted", baseline=1.0)


def production_engines() -> list[Figure]:
    return [
        engine(REDIS, 30_000.0),
        engine(KAFKA_TOOL, 300_000.0),
        engine(KAFKA_PLAIN, 7_000.0, detail=", 4 producers, 1 batch per transaction"),
        engine(KAFKA_LOG, 90_000.0),
        engine(KAFKA_CONSUME, 900_000.0),
        engine(CLICKHOUSE, 9_000.0),
    ]


def by_shape_and_kind(figures: list[Figure]) -> dict[tuple[str, str], Figure]:
    return {(f.shape, f.case.split(" ")[0]): f for f in figures}


def test_production_accept_is_a_share_of_the_slower_of_redis_and_the_event_log():
    (figure,) = ceiling_figures([*production_engines(), accepted("production", 10_000.0)])
    assert figure.section == SECTION and figure.shape == "production" and figure.unit == "events/s"
    assert figure.case.startswith("accepted events/s")
    assert figure.result == 10_000.0
    assert (figure.baseline_name, figure.baseline) == (REDIS, 30_000.0)
    assert figure.ratio == pytest.approx(1 / 3)
    assert figure.ratio_note == f"of {REDIS}"
    assert figure.target == TARGET and figure.met is False


def test_the_slowest_engine_is_chosen_whichever_it_is():
    figures = [*production_engines(), engine(KAFKA_LOG, 20_000.0, detail=", 2 processes"), engine(REDIS, 15_000.0)]
    # KafkaEventLog measured twice: its best (90,000) counts; Redis twice: its best (30,000) counts.
    (figure,) = ceiling_figures([*figures, accepted("production", 20_000.0)])
    assert (figure.baseline_name, figure.baseline) == (REDIS, 30_000.0)
    slow_log = [f for f in production_engines() if not f.case.startswith(KAFKA_LOG)] + [engine(KAFKA_LOG, 12_000.0)]
    (figure,) = ceiling_figures([*slow_log, accepted("production", 6_000.0)])
    assert (figure.baseline_name, figure.baseline, figure.met) == (KAFKA_LOG, 12_000.0, True)
    assert figure.ratio == pytest.approx(0.5)  # the target's edge counts as met


def test_production_processing_is_a_share_of_the_slower_of_clickhouse_and_the_consumer():
    (figure,) = ceiling_figures([*production_engines(), processed("production", 7_200.0)])
    assert figure.case.startswith("processed events/s")
    assert (figure.baseline_name, figure.baseline) == (CLICKHOUSE, 9_000.0)
    assert figure.ratio == pytest.approx(0.8) and figure.met is True


def test_embedded_figures_depend_on_sqlite_and_chdb():
    figures = [
        engine(SQLITE, 15_000.0, shape="embedded"),
        engine(CHDB, 4_000.0, shape="embedded"),
        accepted("embedded", 11_000.0),
        processed("embedded", 5_600.0),
    ]
    found = by_shape_and_kind(ceiling_figures(figures))
    assert set(found) == {("embedded", "accepted"), ("embedded", "processed")}
    assert (found["embedded", "accepted"].baseline_name, found["embedded", "accepted"].baseline) == (SQLITE, 15_000.0)
    assert found["embedded", "processed"].baseline_name == CHDB
    assert found["embedded", "processed"].ratio == pytest.approx(1.4)  # above its engine: the engine measure is off


def test_every_pipeline_figure_of_a_full_run_gets_one_ceiling():
    figures = [
        accepted("embedded", 11_000.0),
        processed("embedded", 5_600.0),
        accepted("production", 10_000.0, errors={"503": 4}),  # the case names its errors: still found
        processed("production", 7_300.0),
        *production_engines(),
        engine(SQLITE, 15_000.0, shape="embedded"),
        engine(CHDB, 4_000.0, shape="embedded"),
    ]
    found = by_shape_and_kind(ceiling_figures(figures))
    assert set(found) == {(s, k) for s in ("embedded", "production") for k in ("accepted", "processed")}
    assert {key: f.baseline_name for key, f in found.items()} == {
        ("embedded", "accepted"): SQLITE,
        ("embedded", "processed"): CHDB,
        ("production", "accepted"): REDIS,
        ("production", "processed"): CLICKHOUSE,
    }


def test_nothing_without_the_engines_or_without_the_pipeline():
    assert ceiling_figures([accepted("production", 10_000.0), processed("embedded", 5_000.0)]) == []
    assert ceiling_figures(production_engines()) == []
    assert ceiling_figures([]) == []
    # Engines of the other shape do not count.
    assert ceiling_figures([engine(SQLITE, 15_000.0, shape="embedded"), accepted("production", 10_000.0)]) == []


def test_a_missing_engine_leaves_the_others():
    only_log = [engine(KAFKA_LOG, 90_000.0)]
    (figure,) = ceiling_figures([*only_log, accepted("production", 10_000.0)])
    assert (figure.baseline_name, figure.baseline) == (KAFKA_LOG, 90_000.0)
    assert REDIS not in figure.case  # the case names the engines it compared


def test_other_figures_are_left_alone():
    latency = ingest._ingest_figures(
        "production",
        {"events_per_s": 10_000.0, "p50_ms": 500.0, "p99_ms": 900.0, "errors": {}},
        {"events_per_s": 150_000.0, "p50_ms": 30.0},
    )[1]
    assert latency.unit == "ms"
    unrelated = [
        latency,
        Figure("workers", "events/s one core of workers sustains", "production", 8_000.0, "events/s"),
        Figure(SECTION, f"{REDIS}: a failed measure", "production", 0.0, "events/s"),  # no rate: not an engine figure
        Figure("memory", "peak RSS: redis", "production", 279.0, "MB"),
    ]
    assert ceiling_figures(unrelated) == []
    figures = [*production_engines(), *unrelated, accepted("production", 10_000.0)]
    before = list(figures)
    assert len(ceiling_figures(figures)) == 1
    assert figures == before  # pure: nothing changed in place


def test_the_pipeline_cases_are_those_of_the_ingest_suite():
    assert accepted("production", 1.0).case.startswith(engines.ACCEPTED)
    assert f'"{PROCESSED_CASE}"' in inspect.getsource(ingest._measure)
    assert PROCESSED_CASE.startswith(engines.PROCESSED)
