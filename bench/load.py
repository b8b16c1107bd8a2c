"""The ingest load generator and the freshness probe, each run as a process of its own.

    python -m bench.load load --url URL --keys K1,K2 --seconds 15 --connections 64 [--rate EVENTS_PER_S]
    python -m bench.load probe --url INGEST_URL --query-url QUERY_URL --keys K1 --seconds 15

`load` posts realistic batches of 100 events (unique dedup ids, 3 of each batch repeating the
connection's previous batch, so 97 are new) from many connections at once, round-robin over the
projects' keys, and prints one JSON line: requests, accepted events, latency percentiles, errors, and
the last accepted dedup id of each project (to wait for the backlog). A batch answered 503 (back-pressure) is
sent again after its Retry-After, as a producer would. `probe` posts one batch at a
time for a fresh user and polls until it is processed and the user's points show in the totals:
the time from the 200 to visible payouts.
"""

import argparse
import asyncio
import itertools
import json
import sys
import time
import uuid
from datetime import UTC, datetime

import aiohttp
import orjson

from bench.report import percentiles
from rewards.web.routing import service_for

BATCH = 100
REPEATED = 3  # events of each batch that repeat the connection's previous batch (known: not accepted again)
USERS = [f"0x{n:040x}" for n in range(1, 10_001)]
POLL_S = 0.005
PROBE_GIVE_UP_S = 60  # a probe not visible by then is recorded as taking that long
# Each probe event pays exactly one point to its user (bench project config: value × 0.1, amount "10").
PROBE_POINTS = BATCH


def event(dedup_id: str, user: str, amount: str, at: str) -> dict:
    return {
        "name": "purchase",
        "dedup_id": dedup_id,
        "user_identifier": user,
        "user_identifier_type": "evm_address",
        "timestamp": at,
        "args": {"value": {"amount": amount, "currency": {"name": "USDC"}}},
        "metadata": {"source": "bench", "campaign": "autumn", "platform": "ios"},
    }


def batch_ids(run: str, connection: int, number: int) -> list[str]:
    ids = [f"{run}-{connection}-{number}-{i}" for i in range(BATCH - REPEATED)]
    previous = number - 1 if number else 0
    return ids + [f"{run}-{connection}-{previous}-{i}" for i in range(REPEATED)]


def batch_body(ids: list[str], number: int) -> bytes:
    at = datetime.now(UTC).isoformat(timespec="milliseconds")
    users = USERS[(number * BATCH) % len(USERS) :] + USERS
    events = [event(dedup_id, users[i], f"{1 + (number + i) % 500}.{i:02d}", at) for i, dedup_id in enumerate(ids)]
    return orjson.dumps({"events": events})


async def _connection(session, url, key, run, connection, stop_at, results, pace):
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    for number in itertools.count():
        await pace()
        if time.monotonic() >= stop_at:
            return
        ids = batch_ids(run, connection, number)
        body = batch_body(ids, number)
        while True:  # a batch refused by back-pressure (503) is sent again after its Retry-After, as a producer would
            started = time.perf_counter()
            async with session.post(url, data=body, headers=headers) as response:
                answer = await response.read()
            results["latencies"].append((time.perf_counter() - started) * 1000)
            if response.status != 503 or time.monotonic() >= stop_at:
                break
            results["refused"] += 1
            await asyncio.sleep(float(response.headers.get("Retry-After", "1")))
        if response.status == 200:
            results["accepted"] += orjson.loads(answer)["ingested_events"]
            results["last_ids"][key] = ids[BATCH - REPEATED - 1]
        else:
            results["errors"][str(response.status)] = results["errors"].get(str(response.status), 0) + 1


def pacer(started: float, events_per_s: float | None):
    """Unpaced (as fast as the server answers), or batches spread evenly to send `events_per_s`."""
    sent = itertools.count()

    async def pace() -> None:
        if events_per_s:
            await asyncio.sleep(max(0.0, started + next(sent) * BATCH / events_per_s - time.monotonic()))

    return pace


async def load(url: str, keys: list[str], seconds: float, connections: int, rate: float | None = None) -> dict:
    run = uuid.uuid4().hex[:8]
    results = {"accepted": 0, "refused": 0, "latencies": [], "errors": {}, "last_ids": {}}
    connector = aiohttp.TCPConnector(limit=connections)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        started = time.monotonic()
        stop_at = started + seconds
        target = f"{url}/api/v1/events/batch"
        pace = pacer(started, rate)
        await asyncio.gather(
            *(
                _connection(session, target, keys[c % len(keys)], run, c, stop_at, results, pace)
                for c in range(connections)
            )
        )
        elapsed = time.monotonic() - started
    p50, p99 = percentiles(results["latencies"]) if results["latencies"] else (0.0, 0.0)
    return {
        "requests": len(results["latencies"]),
        "accepted": results["accepted"],
        "seconds": elapsed,
        "events_per_s": results["accepted"] / elapsed,
        "p50_ms": p50,
        "p99_ms": p99,
        "refused": results["refused"],  # answers 503 (back-pressure), each sent again after its Retry-After
        "errors": results["errors"],
        "last_ids": results["last_ids"],
    }


async def _visible(session, ingest_url, query_url, headers, dedup_id, user) -> bool:
    urls = {"ingest": ingest_url, "query": query_url}  # each path on its service, as the gateway routes it

    def url_of(path: str) -> str:
        return urls[service_for("GET", path)] + path

    status_url = url_of("/api/v1/events/status")
    async with session.get(status_url, params={"dedup_id": dedup_id}, headers=headers) as response:
        if (await response.json())["status"] != "processed":
            return False
    totals_url = url_of(f"/api/v1/payouts/totals/{user}")
    async with session.get(totals_url, params={"identifier_type": "evm_address"}, headers=headers) as response:
        return (await response.json())["total_points"] == str(PROBE_POINTS)


async def probe(ingest_url: str, query_url: str, key: str, seconds: float, every_s: float = 0.25) -> dict:
    run = uuid.uuid4().hex[:8]
    headers = {"Authorization": f"Bearer {key}"}
    samples, lost = [], 0
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        stop_at = time.monotonic() + seconds
        for number in itertools.count():
            if time.monotonic() >= stop_at:
                break
            user = f"0x{uuid.uuid4().hex:0>40}"
            at = datetime.now(UTC).isoformat(timespec="milliseconds")
            events = [event(f"probe-{run}-{number}-{i}", user, "10", at) for i in range(BATCH)]
            async with session.post(f"{ingest_url}/api/v1/events/batch", json={"events": events}, headers=headers) as r:
                if r.status != 200:
                    lost += 1
                    await asyncio.sleep(every_s)
                    continue
            accepted = time.perf_counter()
            while not await _visible(session, ingest_url, query_url, headers, events[-1]["dedup_id"], user):
                if time.perf_counter() - accepted > PROBE_GIVE_UP_S:
                    break
                await asyncio.sleep(POLL_S)
            samples.append((time.perf_counter() - accepted) * 1000)
            await asyncio.sleep(every_s)
    p50, p99 = percentiles(samples) if samples else (0.0, 0.0)
    return {"probes": len(samples), "refused": lost, "p50_ms": p50, "p99_ms": p99}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.load")
    parser.add_argument("mode", choices=["load", "probe"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--query-url")
    parser.add_argument("--keys", required=True)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--rate", type=float, help="events/s to send (default: as many as the server takes)")
    args = parser.parse_args(argv)
    keys = args.keys.split(",")
    if args.mode == "load":
        result = asyncio.run(load(args.url, keys, args.seconds, args.connections, args.rate))
    else:
        result = asyncio.run(probe(args.url, args.query_url or args.url, keys[0], args.seconds))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
