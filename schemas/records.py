"""Records on the event log (Kafka topic `rewards.events`, or the embedded outbox).

These are a published contract for downstream consumers: add optional fields, never change
or remove one. Serialized as JSON; amounts are decimal strings, times epoch milliseconds.
"""

from typing import Annotated, Literal

from pydantic import BaseModel, Field, TypeAdapter


class ConversionRecord(BaseModel):
    type: Literal["conversion"] = "conversion"
    project_id: str
    batch_id: str
    dedup_id: str
    name: str
    user_identifier: str
    user_identifier_type: str
    timestamp_ms: int
    received_ms: int
    args: dict = {}
    metadata: dict = {}


class CodeUseRecord(BaseModel):
    type: Literal["code_use"] = "code_use"
    project_id: str
    use_id: str
    code: str
    owner_identifier: str
    owner_identifier_type: str
    user_identifier: str
    user_identifier_type: str
    used_at_ms: int


Record = Annotated[ConversionRecord | CodeUseRecord, Field(discriminator="type")]
_records = TypeAdapter(list[Record])


def dump_records(records: list[ConversionRecord | CodeUseRecord]) -> bytes:
    return _records.dump_json(records)


def load_records(payload: bytes) -> list[ConversionRecord | CodeUseRecord]:
    return _records.validate_json(payload)
