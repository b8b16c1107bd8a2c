"""What every benchmark gets from the runner (`python -m bench`)."""

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Context:
    data_root: Path  # generated data lives here between runs (make bench: .bench-data)
    engine_env: dict[str, str]  # KAFKA_BOOTSTRAP_SERVERS, REDIS_URL, CLICKHOUSE_URL of engines started for the run
    quick: bool = False  # smaller data and shorter runs: to try the benchmark, not to record figures
    smoke: bool = False  # tiny data, one short run of each case: proves a suite runs (make test), measures nothing

    def size(self, full, quick, smoke):
        """The size (rows, runs, seconds) of this run: the full one, the quick one or the smoke test's."""
        return smoke if self.smoke else quick if self.quick else full
