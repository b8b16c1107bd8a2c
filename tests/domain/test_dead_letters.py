"""rewards/domain/dead_letters.py: which dead letters are replayed, as what."""

import orjson

from rewards.domain.dead_letters import dead_letter_id, replay_of
from schemas.records import ConversionRecord, TrackingEventRecord

NOW, WINDOW = 100 * 86_400_000, 35 * 86_400_000
PURCHASE = ConversionRecord(project_id="p", batch_id="b", dedup_id="d", name="purchase", user_identifier="a@b.co",
                            user_identifier_type="email", timestamp_ms=1, received_ms=2)  # fmt: skip


def payload(record) -> str:
    return orjson.dumps(record.__dict__).decode()  # as the workers keep it (stream_workers.rows.dead_letter_row)


def test_a_recent_whole_record_is_replayed_marked_with_its_dead_letters_id():
    replay = replay_of("dl_1", "conversion", payload(PURCHASE), NOW - 1, NOW, WINDOW)
    assert replay.why == "" and replay.record == PURCHASE.model_copy(update={"replay": "dl_1"})
    again = replay_of("dl_2", "conversion", payload(replay.record), NOW - 1, NOW, WINDOW)  # a replay set aside again
    assert again.record.replay == "dl_2"


def test_what_is_not_replayed_and_why():
    page = TrackingEventRecord(project_id="p", id="t", name="pageview", tracking_id="T", received_ms=1)
    cases = {
        ("tracking_event", payload(page), NOW): "a tracking_event is not replayed",
        ("", "not json", NOW): "a record that could not be read is not replayed",
        ("conversion", payload(PURCHASE), NOW - WINDOW - 1): "older than the dedup window",
        ("conversion", payload(PURCHASE)[:40], NOW): "its payload is not a whole record (cut at 64 KiB, or never one)",
        ("code_use", payload(PURCHASE), NOW): "its payload is not a record of its type",
    }
    for (record_type, text, failed_ms), why in cases.items():
        replay = replay_of("dl_1", record_type, text, failed_ms, NOW, WINDOW)
        assert (replay.record, replay.why) == (None, why), record_type


def test_a_dead_letters_id_is_stable_and_tells_rows_apart():
    assert dead_letter_id("t1", "conversion", "d") == dead_letter_id("t1", "conversion", "d")
    ids = {dead_letter_id(*row) for row in [("t1", "conversion", "d"), ("t2", "conversion", "d"),
                                            ("t1", "code_use", "d"), ("t1", "conversion", "e")]}  # fmt: skip
    assert len(ids) == 4 and all(i.startswith("dl_") and len(i) == 35 for i in ids)
