"""The dead-letter topic (`rewards.events.dlq`): what the workers set aside, for downstream consumers.

The warehouse's `dead_letters` table is the record of it (written exactly once, under the delivery's
token); the topic is a feed of the same rows, at least once: a delivery read again after a crash
publishes its dead letters again (consumers tell repeats apart by `delivery` and `source_id`).
"""

import asyncio

import orjson

from schemas.topics import DLQ_TOPIC, partition_key

PUBLISH_TIMEOUT_S = 10.0


class KafkaDeadLetters:
    def __init__(self, producer):
        self._producer = producer

    @classmethod
    async def start(cls, bootstrap: str) -> "KafkaDeadLetters":
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, compression_type="lz4"
        )
        await producer.start()
        return cls(producer)

    async def publish(self, dead_letters: list[dict]) -> None:
        async def send_all() -> None:
            sent = [
                await self._producer.send(DLQ_TOPIC, orjson.dumps(row), key=partition_key(row["project_id"]))
                for row in dead_letters
            ]
            await asyncio.gather(*sent)

        await asyncio.wait_for(send_all(), PUBLISH_TIMEOUT_S)  # a failure fails the delivery: it is retried

    async def close(self) -> None:
        await self._producer.stop()
