"""A downstream consumer of `rewards.events` (docs/production.md, "The topic, for downstream consumers"): reads the
topic from its start, committed transactions only, checks every message against the published JSON Schema, and prints
what one project sent: how many records of each type, and its conversions' value per currency, summed exactly.

    pip install aiokafka jsonschema
    python docs/examples/consume_events.py --bootstrap localhost:9092 --project <project id>

It stops once the topic has been quiet for --idle-s seconds. tests/schemas/test_json_schema.py runs it.
"""

import argparse
import asyncio
import json
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

from aiokafka import AIOKafkaConsumer
from jsonschema import Draft202012Validator

SCHEMA = json.loads((Path(__file__).parents[1] / "schemas" / "rewards.events.schema.json").read_text())


async def consume(bootstrap: str, project_id: str, idle_s: float) -> dict:
    validator = Draft202012Validator(SCHEMA)
    consumer = AIOKafkaConsumer(
        "rewards.events",
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",  # a batch is written in a transaction: never read one that was aborted
        auto_offset_reset="earliest",
        enable_auto_commit=False,  # no group: a real consumer names one (group_id=...) and commits its offsets
    )
    types: Counter = Counter()
    value: defaultdict = defaultdict(Decimal)
    await consumer.start()
    try:
        while batches := await consumer.getmany(timeout_ms=int(idle_s * 1000)):
            for message in (m for messages in batches.values() for m in messages):
                if message.key != project_id.encode():  # every message is keyed by its project's id
                    continue
                records = json.loads(message.value)
                validator.validate(records)  # a message that breaks the contract stops us, loudly
                for record in records:
                    types[record["type"]] += 1
                    amount = (record.get("args") or {}).get("value") if record["type"] == "conversion" else None
                    if isinstance(amount, dict):  # amounts are decimal strings: exact, never floats
                        value[(amount.get("currency") or {}).get("name", "")] += Decimal(amount["amount"])
    finally:
        await consumer.stop()
    return {"records": dict(sorted(types.items())), "value": {k: str(v) for k, v in sorted(value.items())}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True, help="Kafka's bootstrap servers, host:port")
    parser.add_argument("--project", required=True, help="the project whose records to count")
    parser.add_argument("--idle-s", type=float, default=5.0, help="stop after this long without a message")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(consume(args.bootstrap, args.project, args.idle_s))))


if __name__ == "__main__":
    main()
