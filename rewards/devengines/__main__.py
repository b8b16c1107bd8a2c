"""`python -m rewards.devengines all|kafka|redis|clickhouse... [--cluster] [--dir DIR]`: start, print env lines, wait
for Ctrl-C."""

import argparse
import logging
import signal
import sys
import tempfile
import threading
from pathlib import Path

from rewards.devengines import CLUSTER_STARTERS, STARTERS, Engine


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m rewards.devengines")
    parser.add_argument("engines", nargs="+", choices=["all", *STARTERS])
    parser.add_argument("--dir", type=Path, help="keep the engines' data here across runs (default: a temporary dir)")
    parser.add_argument(
        "--cluster", action="store_true", help="each engine as a local cluster: 3 brokers, 3 masters, 2 shards"
    )
    args = parser.parse_args(argv)
    args.engines = list(STARTERS) if "all" in args.engines else list(dict.fromkeys(args.engines))
    return args


def _run(names: list[str], base: Path, cluster: bool = False) -> None:
    starters = CLUSTER_STARTERS if cluster else STARTERS
    engines: list[Engine] = []
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        for name in names:
            engines.append(starters[name](base / name))
        for engine in engines:
            print(engine.env_line, flush=True)
        if cluster and "kafka" in names:  # what `rewards migrate` then creates the topics with
            print("REWARDS_KAFKA_REPLICATION_FACTOR=3\nREWARDS_KAFKA_MIN_INSYNC_REPLICAS=2", flush=True)
        print(f"# logs under {base}; Ctrl-C stops everything", file=sys.stderr, flush=True)
        stop.wait()
    finally:
        for engine in reversed(engines):
            engine.stop()


def main(argv: list[str]) -> int:
    args = _parse(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    if args.dir:
        _run(args.engines, args.dir.resolve(), args.cluster)
    else:
        with tempfile.TemporaryDirectory(prefix="rewards-engines-") as base:
            _run(args.engines, Path(base), args.cluster)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
