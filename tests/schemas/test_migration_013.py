"""Migration 013 (rejected payouts) on both engines: a rejected payout reaches the movements' table with its reason,
and none of the figures; its down section takes the rejected rows out of the movements' table."""

from rewards.adapters import migrations
from tests.schemas.test_migration_012 import ALICE, commission, conversion
from tests.schemas.test_migrations import SHIPPED, place, server_place, warehouse  # noqa: F401 (the fixtures, both engines)

MOVEMENTS = (
    "SELECT payout_id, conversion_name, toString(amount) AS amount, rejection FROM recipient_payouts"
    " WHERE recipient_identifier = {a:String} ORDER BY payout_id, rejection"
)
POINTS = "SELECT toString(sum(amount)) AS points FROM point_totals_by_project"


async def test_013_keeps_rejected_payouts_out_of_every_figure(warehouse):  # noqa: F811
    await migrations.migrate(warehouse, target=13)
    await warehouse.insert("conversions", [conversion("usd", {"value": {"amount": "200"}})], "013:c")
    paid = commission("usd", "12")
    rejected = {**commission("usd", "8"), "payout_id": "conversion:usd:0", "reason": "cap_exceeded"}
    await warehouse.insert("payouts", [paid], "013:p")
    await warehouse.insert("rejected_payouts", [rejected], "013:r")
    assert await warehouse.query(MOVEMENTS, {"a": ALICE}) == [
        {"payout_id": "conversion:usd:0", "conversion_name": "purchase", "amount": "12", "rejection": ""},
        {"payout_id": "conversion:usd:0", "conversion_name": "purchase", "amount": "8", "rejection": "cap_exceeded"},
    ]
    assert await warehouse.query(POINTS) == [{"points": "12"}]  # the rejected part counts nowhere

    assert (await migrations.migrate(warehouse, target=12)).summary()["reverted"] == [13]
    rows = await warehouse.query("SELECT payout_id, toString(amount) AS amount FROM recipient_payouts")
    assert rows == [{"payout_id": "conversion:usd:0", "amount": "12"}]
    assert (await migrations.migrate(warehouse)).summary()["applied"] == list(range(13, SHIPPED + 1))
