"""API.md §9 on both shapes: pending acceptance. A project with `require_acceptance` opens its token payouts' claim
checks as `pending_acceptance`; GET /payouts/pending-acceptance lists them; the user's EIP-191 signature of a message
naming the project accepts them (POST /payouts/pending-acceptance/accept), and they are claimable as usual."""

import pytest
from eth_account import Account
from eth_account.messages import encode_defunct

from tests.support.harness import Admin, Api, eventually
from tests.web.test_auth import error_of

EVM = "evm_address"
WALLET = Account.from_key("0x" + "42" * 32)
BOB = WALLET.address.lower()
USDC = {"address": "0xA0b86991c6218b36c1d19d4a2e9eb0ce3606eb48", "chain_id": 1, "name": "USDC", "decimals": 6}
TIERS = [{"id": "base", "name": "Base", "rank": 1, "rates": {"r1": "0", "r2": "0", "r3": "0", "r4": "0"}}]
CONFIG = {
    "default_tier": "base",
    "tiers": TIERS,
    "conversions": [{"event_name": "swap", "base": {"fixed": "2"}, "currency": USDC, "end_user_reward": {"rate": "1"}}],
    "require_acceptance": True,
}


def signed(message: str, account=WALLET) -> str:
    return "0x" + account.sign_message(encode_defunct(text=message)).signature.hex().removeprefix("0x")


@pytest.fixture(scope="module")
def api(server):
    admin = Admin(server)
    project = admin.project()
    api = Api(server, admin.key(project, "service_role"), project)
    assert api.put("/projects/config", json=CONFIG).status_code == 200
    events = [{"name": "swap", "user_identifier": BOB, "user_identifier_type": EVM, "dedup_id": f"s-{n}"}
              for n in range(2)]  # fmt: skip
    assert api.post("/events/batch", json={"events": events}).status_code == 200
    api.wait_processed("s-0", "s-1")
    yield api
    api.close()


def pending(api: Api) -> dict:
    answer = api.get("/payouts/pending-acceptance", params={"user_identifier": BOB, "user_identifier_type": EVM})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_token_payouts_wait_for_the_users_signature(api: Api):
    waiting = eventually(lambda: _two(pending(api)))
    assert {(p["amount"], p["status"]) for p in waiting["payouts"]} == {("2000000", "pending_acceptance")}
    ids = [p["id"] for p in waiting["payouts"]]
    close = {"user_identifier": BOB, "user_identifier_type": EVM, "claim_check_ids": ids}
    assert "not accepted by its user yet" in error_of(api.post("/claim-checks/close", json=close), 409)

    message = f"I accept my rewards of project {api.project_id}"
    accept = "/payouts/pending-acceptance/accept"
    other = Account.from_key("0x" + "43" * 32)
    for body in (
        {"recipient_address": BOB, "message": message, "signature": signed(message, other)},  # another's signature
        {"recipient_address": BOB, "message": "I accept my rewards", "signature": signed("I accept my rewards")},
        {"recipient_address": BOB, "message": message, "signature": "0x1234"},
    ):
        assert error_of(api.post(accept, json=body), 400) == "Invalid signature"
    assert error_of(api.post(accept, json={"recipient_address": "nope", "message": message, "signature": "0x"}), 400)
    body = {"recipient_address": BOB, "message": message, "signature": signed(message)}
    assert api.post(accept, json=body).json() == {"accepted": 2}
    assert api.post(accept, json=body).json() == {"accepted": 0}  # nothing left pending
    assert eventually(lambda: _none(pending(api))) == {"pending": False, "payouts": []}
    closed = api.post("/claim-checks/close", json=close)  # accepted: claimable as usual
    assert closed.status_code == 200 and {c["status"] for c in closed.json()} == {"closed"}, closed.text


def _two(answer: dict) -> dict:
    assert answer["pending"] is True and len(answer["payouts"]) == 2
    return answer


def _none(answer: dict) -> dict:
    assert answer["pending"] is False
    return answer
