"""A batch's conversions spread over the event log's partitions by user (schemas.topics): each user's in one part,
in the batch's order, the same part whatever the batch; one part for a log that does not spread."""

from ingest_api.events.schemas import ValidEvent
from ingest_api.events.service import spread
from schemas.topics import shard_of


def event(dedup_id: str, user: str, kind: str = "evm_address") -> ValidEvent:
    return ValidEvent("purchase", dedup_id, user, kind, None, {}, {})


def test_each_users_conversions_go_to_one_part_in_order():
    users = [f"0x{n:040x}" for n in range(50)]
    events = [event(f"d{i}", users[i % 50]) for i in range(500)]
    parts = spread("p", events, 8)
    assert sorted(e.dedup_id for part in parts.values() for e in part) == sorted(e.dedup_id for e in events)
    assert len(parts) > 4  # 50 users over 8 partitions
    for shard, part in parts.items():
        assert all(shard_of("p", "evm_address", e.user_identifier, 8) == shard for e in part)
        assert [int(e.dedup_id[1:]) for e in part] == sorted(int(e.dedup_id[1:]) for e in part)


def test_a_user_goes_where_it_went_whatever_the_batch_and_projects_spread_apart():
    alone = spread("p", [event("a", "alice@x.io", "email")], 12)
    among = spread(
        "p", [event(f"o{i}", f"u{i}@x.io", "email") for i in range(30)] + [event("a", "alice@x.io", "email")], 12
    )
    (shard,) = alone
    assert [e.dedup_id for e in among[shard]][-1] == "a"
    # The identifier type is part of the user: the same text of two types is two users.
    assert len({shard_of("p", kind, "x", 1000) for kind in ("email", "evm_address", "solana_address")}) > 1
    assert len({shard_of(f"project-{n}", "email", "alice@x.io", 12) for n in range(40)}) > 1


def test_a_log_of_one_shard_gets_one_part():
    events = [event(f"d{i}", f"0x{i:040x}") for i in range(20)]
    assert list(spread("p", events, 1)) == [0]
