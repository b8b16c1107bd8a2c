"""API.md §8 on both shapes: the blocklist (its endpoints, and a blocked user earning nothing in any role from what is
processed after the change) and self-referral by email (always on); the rejected payouts in movements.

Alice refers Bob, Bob refers Carol (codes used before anything is blocked: their referral rewards are paid). Then Bob
is blocked: Carol's purchase pays Carol and Alice (level 2), not Bob (level 1); Bob's own purchase pays no one; no
code of Bob's, nor any code for Bob, can be used. Unblocked, Bob earns again."""

from decimal import Decimal
from urllib.parse import quote

import pytest

from rewards.domain.integrity import Rejection, email_person, same_by_email, screen
from rewards.domain.payouts import Payout, PayoutKind, User
from tests.conftest import event, evm
from tests.domain.test_domain import VALID
from tests.support.harness import Admin, Api, eventually
from tests.web.test_auth import error_of

ALICE, BOB, CAROL, DAN = evm(1), evm(2), evm(3), evm(4)
CONFIG = {
    "default_tier": "base",
    "tiers": [{"id": "base", "name": "Base", "rank": 1, "rates": {"r1": "0.1", "r2": "0.05", "r3": "0", "r4": "0"}}],
    "conversions": [{"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"}, "currency": "point",
                     "end_user_reward": {"fixed": "10"}}],
    "referral_reward": {"referrer": "50", "referred": "10"},
}  # fmt: skip


def who(identifier: str, kind: str = "evm_address") -> dict:
    return {"user_identifier": identifier, "user_identifier_type": kind}


def code_of(api: Api, owner: dict) -> str:
    created = api.post("/referral_codes", json={**owner, "quantity": 1})
    assert created.status_code == 201, created.text
    return created.json()[0]["code"]


def use(api: Api, code: str, user: dict):
    return api.patch(f"/referral_codes/{code}/use", json=user)


def buy(api: Api, dedup_id: str, user: dict) -> None:
    purchase = {**event(dedup_id), **user, "args": {"value": {"amount": "100"}}}
    assert api.post("/events/batch", json={"events": [purchase]}).status_code == 200
    api.wait_processed(dedup_id)


def summary(api: Api) -> Decimal:
    return Decimal(api.get("/payouts/summary", params={"currency": "point"}).json()["total_payouts"])


def movements(api: Api, identifier: str, kind: str = "evm_address") -> list[tuple]:
    answer = api.get("/payouts/movements", params={"type": "point", "user_identifier": identifier,
                                                    "identifier_type": kind, "page_size": 100})  # fmt: skip
    assert answer.status_code == 200, answer.text
    return sorted(
        (r["conversion_name"], r["total_amount"], r["payout_status"], r["payout_status_details"], r["id"])
        for r in answer.json()["results"]
    )


@pytest.fixture(scope="module")
def shop(server):
    admin = Admin(server)
    project = admin.project()
    api = Api(server, admin.key(project, "service_role"), project)
    assert api.put("/projects/config", json=CONFIG).status_code == 200
    api.bob_code = code_of(api, who(BOB))
    assert use(api, code_of(api, who(ALICE)), who(BOB)).status_code == 200
    assert use(api, api.bob_code, who(CAROL)).status_code == 200
    eventually(lambda: _equal(summary(api), Decimal(120)))  # two uses: 50 + 10 each
    yield api
    api.close()


def _equal(found, expected):
    assert found == expected, found
    return found


def test_a_blocked_user_earns_nothing_in_any_role(shop):
    blocked = shop.put(f"/projects/blocklist/{BOB}", params={"identifier_type": "evm_address"},
                       json={"reason": 'chargebacks "x" \\ é'})  # fmt: skip
    assert blocked.status_code == 200, blocked.text
    assert blocked.json()["reason"] == 'chargebacks "x" \\ é' and blocked.json()["user_identifier"] == BOB

    buy(shop, "carol-1", who(CAROL))  # Carol 10; Bob's r1 (10) refused; Alice's r2 (5) paid
    buy(shop, "bob-1", who(BOB))  # Bob's own: no one is paid (Bob's 10, Alice's r1 10)
    assert summary(shop) == Decimal(120 + 10 + 5)
    bob = movements(shop, BOB)
    assert ("purchase", "10", "rejected", "blocklisted", "conversion:carol-1:1:rejected") in bob
    assert ("purchase", "10", "rejected", "blocklisted", "conversion:bob-1:0:rejected") in bob
    paid = {(m[0], m[1]) for m in bob if m[2] == "paid"}
    assert paid == {("referral_reward", "10"), ("referral_reward", "50")}  # paid before the block: stays paid
    alice = movements(shop, ALICE)
    assert ("purchase", "5", "paid", None, "conversion:carol-1:2") in alice
    assert ("purchase", "10", "rejected", "blocklisted", "conversion:bob-1:1:rejected") in alice
    totals = shop.get(f"/payouts/totals/{BOB}", params={"identifier_type": "evm_address"}).json()
    assert totals["total_points"] == "60"  # the referral rewards of before: nothing rejected counts

    # Bob's code, and any code for Bob, are refused with 403.
    assert error_of(use(shop, shop.bob_code, who(DAN)), 403) == "User is blocklisted"
    assert error_of(use(shop, code_of(shop, who(DAN)), who(BOB)), 403) == "User is blocklisted"
    assert error_of(use(shop, "NOSUCHCODE", who(BOB)), 404)  # the code's 404 first

    listed = shop.get("/projects/blocklist").json()
    assert listed["total_count"] == 1 and listed["next_page"] is None
    assert listed["results"][0]["user_identifier"] == BOB and listed["results"][0]["created_at"].endswith("Z")
    again = shop.put(f"/projects/blocklist/{BOB}", params={"identifier_type": "evm_address"})  # no body
    assert again.status_code == 200 and again.json()["created_at"] == blocked.json()["created_at"]
    assert again.json()["reason"] is None

    unblocked = shop.delete(f"/projects/blocklist/{BOB}", params={"identifier_type": "evm_address"})
    assert unblocked.json() == {"user_identifier": BOB, "user_identifier_type": "evm_address", "blocked": False}
    buy(shop, "carol-2", who(CAROL))  # Bob earns again: 10 + his r1 10 + Alice's r2 5
    assert summary(shop) == Decimal(135 + 25)
    assert ("purchase", "10", "paid", None, "conversion:carol-2:1") in movements(shop, BOB)
    assert error_of(shop.delete(f"/projects/blocklist/{BOB}", params={"identifier_type": "evm_address"}), 404)


def test_the_blocklist_refuses_what_it_cannot_hold(shop):
    path = f"/projects/blocklist/{DAN}"
    assert error_of(shop.put(path), 400) == "identifier_type is required"
    assert "not a valid" in error_of(
        shop.put("/projects/blocklist/nope", params={"identifier_type": "evm_address"}), 400
    )
    long = shop.put(path, params={"identifier_type": "evm_address"}, json={"reason": "x" * 1001})
    assert "at most 1000 characters" in error_of(long, 400)
    assert error_of(shop.put(path, params={"identifier_type": "evm_address"}, json={"why": "x"}), 400)
    assert error_of(shop.put(path, params={"identifier_type": "evm_address"}, json=["x"]), 400)
    assert error_of(shop.get("/projects/blocklist", params={"page_size": 101}), 400)
    assert shop.get("/projects/blocklist").json()["total_count"] == 0  # nothing half-written


def test_the_blocklist_is_the_projects_own(shop, server):
    admin = Admin(server)
    other = admin.project()
    with Api(server, admin.key(other, "service_role"), other) as theirs:
        assert theirs.put(f"/projects/blocklist/{DAN}", params={"identifier_type": "evm_address"}).status_code == 200
        assert theirs.get("/projects/blocklist").json()["total_count"] == 1
    assert shop.get("/projects/blocklist").json()["total_count"] == 0
    with Api(server, admin.key(other), other) as standard:  # a key without service_role
        assert error_of(standard.get("/projects/blocklist"), 403)


def test_self_referral_by_email_pays_the_user_not_the_referrer(shop):
    """The same mailbox up to case and +tag: the referrer's referral reward and commissions from the user are refused;
    the user's own payouts are kept."""
    me, again = "eve+promo@example.com", "Eve@Example.com"
    before = summary(shop)
    assert use(shop, code_of(shop, who(me, "email")), who(again, "email")).status_code == 200
    buy(shop, "eve-1", who(again, "email"))
    mine = eventually(lambda: _with(movements(shop, me, "email"), 2))
    assert {(m[0], m[1], m[2], m[3]) for m in mine} == {
        ("referral_reward", "50", "rejected", "self_referral"), ("purchase", "10", "rejected", "self_referral")
    }  # fmt: skip
    theirs = {(m[0], m[1], m[2]) for m in movements(shop, "eve@example.com", "email")}
    assert theirs == {("referral_reward", "10", "paid"), ("purchase", "10", "paid")}
    assert summary(shop) == before + 20


def _with(found: list, count: int) -> list:
    assert len(found) == count, found
    return found


# -- the rules, pure ---------------------------------------------------------------------------------------------

U, R1, R2 = User("u", "email"), User("r1", "email"), User("r2", "email")
PAYOUTS = [
    Payout(PayoutKind.END_USER_REWARD, "user", 0, U, Decimal(10), "point"),
    Payout(PayoutKind.COMMISSION, "affiliate", 1, R1, Decimal(10), "point"),
    Payout(PayoutKind.COMMISSION, "affiliate", 2, R2, Decimal(5), "point"),
    Payout(PayoutKind.REBATE, "user", 0, U, Decimal(1), "point"),
]


def test_screen_refuses_by_the_rules():
    assert screen(PAYOUTS, U, set()) == [None] * 4
    assert screen(PAYOUTS, U, {U}) == [Rejection.BLOCKLISTED] * 4  # a blocked user's conversion pays no one
    assert screen(PAYOUTS, U, {R1}) == [None, Rejection.BLOCKLISTED, None, None]  # the level above still paid
    assert screen(PAYOUTS, U, set(), {R2}) == [None, None, Rejection.SELF_REFERRAL, None]
    assert screen(PAYOUTS, U, {R2}, {R2}) == [None, None, Rejection.BLOCKLISTED, None]


@pytest.mark.parametrize(
    "a, b, same",
    [
        ("alice@example.com", "ALICE@example.com", True),
        ("alice+promo@example.com", "alice@example.com", True),
        ("alice+a+b@example.com", "alice+c@example.com", True),
        ("alice@example.com", "alice@example.org", False),
        ("alice.b@example.com", "aliceb@example.com", False),  # dots are the provider's business, not ours
    ],
)
def test_emails_are_one_person_up_to_case_and_tag(a, b, same):
    assert same_by_email(User(a, "email"), User(b, "email")) is same
    assert email_person("Bob+X@Example.COM") == "bob@example.com"
    assert same_by_email(User(ALICE, "evm_address"), User(ALICE, "evm_address")) is False  # emails only


# -- self-referral through one browser -------------------------------------------------------------------------

FRANK, GRACE, HEIDI = evm(11), evm(12), evm(13)


def connect_wallet(api: Api, tracking_id: str, identifier: str) -> None:
    """What the published client's identifyUser sends: the browser's tracking id bound to the wallet."""
    body = {"name": "connect_wallet", "user": {"identifier": identifier, "identifier_type": "evm_address"},
            "args": {"page": "/home", "locationOrigin": "https://app.example"},
            "metadata": {"tracking_id": tracking_id}}  # fmt: skip
    assert api.post("/events", json=body).status_code == 201


def test_one_browser_behind_two_wallets_is_a_self_referral(shop):
    """Frank's browser connects his wallet, then Grace's: the two are one person to the service. Frank refers Grace:
    his referral reward and commission from her are refused, her own payouts kept, and the referral is flagged in
    GET /referral_codes/status and in Frank's referral tree. Heidi (another browser) is Grace's referral: fair."""
    connect_wallet(shop, "browser-frank", FRANK)
    connect_wallet(shop, "browser-frank", GRACE)
    connect_wallet(shop, "browser-heidi", HEIDI)
    assert use(shop, code_of(shop, who(FRANK)), who(GRACE)).status_code == 200
    assert use(shop, code_of(shop, who(GRACE)), who(HEIDI)).status_code == 200
    buy(shop, "grace-1", who(GRACE))
    buy(shop, "heidi-1", who(HEIDI))  # Heidi is neither Grace nor Frank: Grace's r1 and Frank's r2 paid
    frank = eventually(lambda: _with(movements(shop, FRANK), 3))
    assert {(m[0], m[1], m[2], m[3]) for m in frank} == {
        ("referral_reward", "50", "rejected", "self_referral"),
        ("purchase", "10", "rejected", "self_referral"),  # r1 of Grace's purchase
        ("purchase", "5", "paid", None),  # r2 of Heidi's: Heidi is no one above her
    }
    assert ("purchase", "10", "paid", None) in {(m[0], m[1], m[2], m[3]) for m in movements(shop, GRACE)}

    def status(identifier: str) -> dict:
        return shop.get("/referral_codes/status", params=who(identifier)).json()

    assert status(GRACE)["flagged"] is True and status(HEIDI)["flagged"] is False
    registered = shop.post("/affiliates", json={**who(FRANK), "name": "Frank"})
    assert registered.status_code == 201, registered.text
    tree = eventually(lambda: _tree(shop, FRANK))
    [grace] = tree["children"]
    assert (grace["user_identifier"], grace["flagged"]) == (GRACE, True)
    assert [(h["user_identifier"], h["flagged"]) for h in grace["children"]] == [(HEIDI, False)]
    assert tree["flagged"] is False


def _tree(api: Api, identifier: str) -> dict:
    answer = api.get("/affiliate-portal/referral-tree", params={"user_identifier": identifier})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_every_identifier_type_is_blocked_as_stored(server):
    """Each identifier type, in the case its user sent it: blocked as stored (canonical), listed back exactly, and
    its path text (a `+`, an `@`) reaching the service as given."""
    admin = Admin(server)
    project = admin.project()
    with Api(server, admin.key(project, "service_role"), project) as api:
        for identifier, kind, stored in VALID:
            done = api.put(f"/projects/blocklist/{quote(identifier, safe='')}", params={"identifier_type": kind})
            assert done.status_code == 200, done.text
            assert done.json()["user_identifier"] == (stored or identifier)
        for odd in ("a+b@example.com", "a/b@example.com"):  # a `+`, a `/` (%2F) in the path
            done = api.put(f"/projects/blocklist/{quote(odd, safe='')}", params={"identifier_type": "email"})
            assert done.json()["user_identifier"] == odd, done.text
        gone = api.delete(
            f"/projects/blocklist/{quote('a/b@example.com', safe='')}", params={"identifier_type": "email"}
        )
        assert gone.status_code == 200, gone.text
        listed = api.get("/projects/blocklist", params={"page_size": 100}).json()
        assert listed["total_count"] == len(VALID) + 1
        assert {(b["user_identifier"], b["user_identifier_type"]) for b in listed["results"]} == {
            *((stored or identifier, kind) for identifier, kind, stored in VALID),
            ("a+b@example.com", "email"),
        }


def _deep(levels: int) -> list:
    value: list = []
    for _ in range(levels):
        value = [value]
    return value


DEEP = _deep(200)


@pytest.mark.parametrize(
    "body",
    [
        {"reason": "\x00\x1f\u202e" + "\\" * 50 + '"' * 50},  # control characters, backslashes, quotes: kept as given
        {"reason": {"a": [[[[[[[[[[{}]]]]]]]]]]}},
        {"reason": 10**400},
        {"reason": ["x"] * 10_000},
        DEEP,
        "x" * 100_000,
    ],
    ids=["control", "nested", "huge-number", "long-list", "deep", "long-text"],
)
def test_hostile_blocklist_input_is_a_4xx_or_kept_exactly_and_others_go_on(shop, server, body):
    path = f"/projects/blocklist/{evm(40)}"
    answer = shop.put(path, params={"identifier_type": "evm_address"}, json=body)
    if isinstance(body, dict) and isinstance(body["reason"], str):
        assert answer.status_code == 200 and answer.json()["reason"] == body["reason"], answer.text
        assert shop.get("/projects/blocklist").json()["results"][0]["reason"] == body["reason"]
        assert shop.delete(path, params={"identifier_type": "evm_address"}).status_code == 200
    else:
        assert 400 <= answer.status_code < 500 and answer.json()["statusCode"] == answer.status_code
    for page in ({"page": 2**31 - 1, "page_size": 100}, {"page": 2**31}, {"page": 0}, {"page_size": "1e9"}):
        listed = shop.get("/projects/blocklist", params=page)
        assert listed.status_code in (200, 400), listed.text
    # An ordinary event of another project is processed afterwards.
    admin = Admin(server)
    other = admin.project()
    with Api(server, admin.key(other, "service_role"), other) as theirs:
        assert theirs.put("/projects/config", json=CONFIG).status_code == 200
        buy(theirs, "after-hostile", who(DAN))
        assert summary(theirs) == Decimal(10)


@pytest.mark.parametrize(
    "volume_currency",
    [{"name": "\x00"}, {"name": "x" * 65}, {"identifier": ""}, {"name": {"a": 1}}, {"name": "USD", "x": 1}, [], 1.5],
)
def test_hostile_volume_currencies_are_a_400(shop, volume_currency):
    answer = shop.put("/projects/config", json={**CONFIG, "volume_currency": volume_currency})
    if volume_currency == {"name": "\x00"}:  # a name is any text of 1-64 characters: kept, compared exactly
        assert answer.status_code in (200, 409), answer.text
        return
    assert answer.status_code == 400 and "volume_currency" in answer.json()["message"], answer.text
