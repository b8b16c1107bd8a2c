"""A process that dies with a Kafka transaction open, like an ingest process killed mid-publish
(tests/adapters/test_kafka_log.py):
`python -m tests.support.kafka_open_transaction BOOTSTRAP INSTANCE PROJECT TIMEOUT_MS`.

It starts a KafkaEventLog of one producer for ingest instance INSTANCE (the ids a real ingest process of
that instance uses), with the transaction timeout TIMEOUT_MS, begins a transaction and writes one message
keyed by PROJECT into it, prints "open" and sleeps, never committing: the test kills it."""

import asyncio
import sys

from rewards.adapters.production import kafka_log
from schemas.records import dump_records
from schemas.topics import EVENTS_TOPIC, partition_key
from tests.support.kafka_helpers import conversions


async def main(bootstrap: str, instance: str, project: str, timeout_ms: int) -> None:
    kafka_log.TRANSACTION_TIMEOUT_MS = timeout_ms
    event_log = await kafka_log.KafkaEventLog.start(bootstrap, 1, instance)
    (slot,) = event_log._slots
    await slot.producer.begin_transaction()
    payload = dump_records(conversions(project, "never-committed", 1))
    await (await slot.producer.send(EVENTS_TOPIC, payload, key=partition_key(project)))
    print("open", slot.transactional_id, flush=True)
    await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
