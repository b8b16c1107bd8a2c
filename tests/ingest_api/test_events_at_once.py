"""The events' fast path (ingest_api.events.fast_path.batch_at_once / event_at_once: msgspec for the shape, then
the cheapest exact checks) accepts only what the checked path accepts, and makes the very same events of it;
everything else is answered by the checked path, so every message stays as it was. Generated batches, valid and
not."""

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from ingest_api.events import fast_path
from ingest_api.events import schemas as event_schemas
from ingest_api.events import validation as se
from rewards.domain.limits import MAX_NESTING

EVM = "0x" + "aB" * 20
SOLANA = "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T"
# Each field's values: (valid, not valid). A draw takes a valid one 9 times in 10, so that batches of several
# events are often valid too (one bad event makes the whole batch invalid).
USERS = (
    [(EVM, "evm_address"), ("Someone@Example.com", "email"), (SOLANA, "solana_address"), ("a@b.co", "email")],
    [("0x123", "evm_address"), ("", "email"), (5, "email"), (None, "email"), (EVM, "phone"), (EVM, ""), (EVM, None),
     (EVM, 3), (SOLANA, "sui_address")],
)  # fmt: skip
NAMES = (["purchase", "x" * 128, "é" * 128, "{[{["], ["", "x" * 129, "😀" * 129, 7, None])
DEDUP_IDS = (["d1", "d2", "x" * 255], ["", "x" * 256, 5, None])
AMOUNTS = (
    ["10", "0.5", "12.50", ".5", "5.", "0" * 40 + "1", "1" * 30, "1." + "1" * 18, "1." + "1" * 18 + "000", 10, 10.5],
    ["1" * 31, "1." + "1" * 19, "-1", "1e5", " 1", "١", "", ".", 1e300, True, None, [], {"x": 1}],
)  # fmt: skip
TIMESTAMPS = (
    ["2026-11-22T09:12:03.123Z", "2026-11-22T09:12:03+02:00", "2026-11-22", "1763800000000", 1763800000000, 0,
     2**63],
    ["99999999999999", "2300-01-01T00:00:00Z", "not a time", "", -1, 2**64 - 1, 1.5, True],
)  # fmt: skip


def nested(depth: int) -> object:
    """Objects and arrays in turn, `depth` levels, the outermost an object."""
    value: object = "leaf"
    for level in range(depth):
        value = {"k": value} if (depth - level) % 2 else [value]
    return value


FREE = (
    [None, {}, {"source": "bench", "list": [1, 2.5, True, None]}, nested(20), nested(32), {"b": "{" * 40}],
    ["text", [1], nested(33), nested(40), {"big": "x" * 17_000}],
)  # fmt: skip


def pick_from(draw, pools, valid_only: bool):
    valid, invalid = pools
    return draw(st.sampled_from(invalid if not valid_only and draw(st.integers(0, 19)) == 0 else valid))


@st.composite
def events(draw, valid_only: bool = False) -> dict:
    def pick(pools):
        return pick_from(draw, pools, valid_only)

    event: dict = {}
    if valid_only or draw(st.integers(0, 19)):
        event["name"] = pick(NAMES)
    if valid_only or draw(st.integers(0, 19)):
        event["dedup_id"] = pick(DEDUP_IDS) if draw(st.booleans()) else draw(st.text(min_size=1, max_size=9))
    identifier, identifier_type = pick(USERS)
    form = draw(st.integers(0, 9))
    if form <= 6 or form == 9:
        event["user_identifier"], event["user_identifier_type"] = identifier, identifier_type
    if form in (7, 8, 9) and valid_only:
        event["user"] = {"identifier": identifier, "identifier_type": identifier_type}
    elif form in (7, 8, 9):
        event["user"] = draw(
            st.sampled_from([{"identifier": identifier, "identifier_type": identifier_type}, {"identifier": EVM},
                             {"identifier": EVM, "identifier_type": "evm_address", "x": 1}, "user", None])
        )  # fmt: skip
        if form == 8:
            event["user_identifier"] = draw(st.sampled_from(["", None, EVM]))
    if draw(st.booleans()):
        event["timestamp"] = pick(TIMESTAMPS)
    if draw(st.booleans()):
        args = pick(FREE)
        if isinstance(args, dict) and draw(st.booleans()):
            args = dict(args)
            for key in draw(st.sets(st.sampled_from(["value", "revenue"]))):
                shape = draw(st.integers(0, 9))
                amount = pick(AMOUNTS)
                args[key] = (
                    {"amount": amount, "currency": {"name": "USDC"}} if shape else draw(st.sampled_from([{}, 5]))
                )
        event["args"] = args
    if draw(st.booleans()):
        event["metadata"] = pick(FREE)
    if not valid_only and not draw(st.integers(0, 29)):
        event["extra"] = 1
    return event


@st.composite
def payloads(draw) -> object:
    valid_only = draw(st.booleans())
    batch = draw(st.lists(events(valid_only), min_size=0 if not valid_only else 1, max_size=6))
    kind = draw(st.integers(0, 19)) if not valid_only else 3
    if kind == 0:
        return batch
    if kind == 1:
        return {"events": batch, "more": 1}
    if kind == 2:
        return {"events": {"0": batch}}
    return {"events": batch}


def answer(validate, payload) -> object:
    try:
        return validate(payload)
    except event_schemas.InvalidEvents as exc:
        return ("invalid", exc.messages)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(payloads())
def test_a_batch_is_answered_as_the_checked_path_answers(payload):
    payload = orjson.loads(orjson.dumps(payload))  # as parse_json hands it over
    checked = answer(se._checked_batch, payload)
    assert answer(se.validate_batch, payload) == checked
    fast = fast_path.batch_at_once(payload)
    assert fast is None or fast == checked


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.one_of(events(), st.just([]), st.just("event")))
def test_a_single_event_is_answered_as_the_checked_path_answers(raw):
    raw = orjson.loads(orjson.dumps(raw))
    checked = answer(se._checked_event, raw)
    assert answer(se.validate_event, raw) == checked
    fast = fast_path.event_at_once(raw)
    assert fast is None or fast == checked


def event(**extra) -> dict:
    return {"name": "purchase", "dedup_id": "d", "user_identifier": EVM, "user_identifier_type": "evm_address", **extra}


@pytest.mark.parametrize("depth", [MAX_NESTING - 1, MAX_NESTING, MAX_NESTING + 1])
def test_nesting_at_the_limit(depth):
    payload = {"events": [event(metadata=nested(depth))]}
    checked = answer(se._checked_batch, payload)
    assert answer(se.validate_batch, payload) == checked
    assert (checked[0] == "invalid") == (depth > MAX_NESTING)


def test_the_usual_batch_is_taken_at_once_and_the_same_as_checked():
    batch = [
        event(dedup_id=f"d{i}", timestamp="2026-11-22T09:12:03.123Z", args={"value": {"amount": f"{i}.25"}},
              metadata={"source": "bench", "campaign": "autumn"})
        for i in range(100)
    ]  # fmt: skip
    fast = fast_path.batch_at_once({"events": batch})
    assert fast is not None and fast == se._checked_batch({"events": batch})
    assert fast[0].user_identifier == EVM.lower() and fast[0].timestamp_ms == 1795338723123


def test_a_constraint_msgspec_would_not_check_is_refused():
    """The fast path's Structs are derived from the contract's models: a constraint they could not hold stops the
    derivation, rather than letting the fast path accept what the checked path refuses."""

    class Coded(BaseModel):
        model_config = ConfigDict(extra="forbid")
        code: str = Field(pattern="^[A-Z]+$")

    class Lax(BaseModel):
        code: str

    for model in (Coded, Lax):
        with pytest.raises(TypeError):
            fast_path._struct_of(model)
