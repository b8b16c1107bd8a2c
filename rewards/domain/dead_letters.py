"""Dead letters replayed (`rewards dead-letters replay`, POST /dead-letters/replay): which can be, and the record each
becomes. Pure: knows nothing of HTTP or the engines.

A record set aside (stream_workers.processor) is kept whole in its dead letter's payload. Replayed, it is published
again with `replay` set to the dead letter's id, and the workers write it once under that id (their `dedup_ids` hold
it: a replay run twice, or published twice, writes it once). That holds while the first replay's mark is within the
dedup window, so only a dead letter younger than the window is replayed: a replay happens within the window after
the failure, so every replay of it finds the others'.
"""

import hashlib
from dataclasses import dataclass

from schemas.records import AnyRecord, load_record

# The records the workers write once under a key of their own (their handlers' `written_key`): their replays are
# written once too. Tracking events and claim check states have none (a claim check's state is replaced by version).
REPLAYABLE = {"conversion", "code_use", "codes_created", "affiliate", "referral_removed", "reversal", "payout_decision"}


def dead_letter_id(delivery: str, record_type: str, source_id: str) -> str:
    """A dead letter's id: stable, from what identifies its row (a delivery writes a record's dead letter once)."""
    digest = hashlib.sha256("\0".join((delivery, record_type, source_id)).encode()).hexdigest()
    return f"dl_{digest[:32]}"


@dataclass(frozen=True)
class Replay:
    record: AnyRecord | None  # None: not replayable, `why` says why
    why: str = ""


def replay_of(
    dead_letter_id_: str, record_type: str, payload: str, failed_ms: int, now_ms: int, window_ms: int
) -> Replay:
    """The record a dead letter replays as, or why it cannot be."""
    if record_type not in REPLAYABLE:
        return Replay(None, f"a {record_type or 'record that could not be read'} is not replayed")
    if failed_ms < now_ms - window_ms:
        return Replay(None, "older than the dedup window")
    try:
        record = load_record(payload)
    except ValueError:
        return Replay(None, "its payload is not a whole record (cut at 64 KiB, or never one)")
    if record.type != record_type:
        return Replay(None, "its payload is not a record of its type")
    return Replay(record.model_copy(update={"replay": dead_letter_id_}))
