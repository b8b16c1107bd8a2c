"""API.md §7: verifying the published client's signatures is a per-project setting, off by default
(`verify_signatures` in the configuration; rewards.domain.signatures says what is signed, by whom).

The domain's verification (EIP-191 for EVM addresses, Ed25519 for Solana ones) with keys made here, then every signed
write on both shapes: refused with the client's "Invalid signature" when the setting is on and the signature is
missing, another's, or over another message, and changing nothing; accepted when valid; never checked when off."""

import base64

import base58
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from eth_account import Account
from eth_account.messages import encode_defunct

from rewards.domain import signatures
from rewards.domain.payouts import User
from rewards.domain.signatures import InvalidSignature, require_signed, signed_by
from tests.test_auth import error_of
from tests.test_tracking import CONFIG, connect_wallet, pageview

EVM = "evm_address"
ALICE, BOB, CAROL = (Account.from_key(bytes([n]) * 32) for n in (1, 2, 3))


def evm_user(account) -> User:
    return User(account.address.lower(), EVM)


def sign(account, message: str) -> str:
    return account.sign_message(encode_defunct(text=message)).signature.to_0x_hex()


def who(account) -> dict:
    return {"user_identifier": account.address.lower(), "user_identifier_type": EVM}


# -- the domain: what verifies -----------------------------------------------------------------------------------------


def test_evm_personal_sign_recovers_its_signer_only():
    message = "I am using referral code ABC"
    signature = sign(ALICE, message)
    assert signed_by(evm_user(ALICE), message, signature)
    assert not signed_by(evm_user(BOB), message, signature)  # another's
    assert not signed_by(evm_user(ALICE), message + ".", signature)  # another message
    assert not signed_by(evm_user(ALICE), message, signature[:-2])  # malformed: never an exception
    assert not signed_by(evm_user(ALICE), message, "not hex at all")


def test_solana_ed25519_in_each_encoding_wallets_send():
    key = Ed25519PrivateKey.generate()
    address = base58.b58encode(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()
    user, message = User(address, "solana_address"), "Accept referral from Fuul"
    raw = key.sign(message.encode())
    for text in (base58.b58encode(raw).decode(), raw.hex(), "0x" + raw.hex(), base64.b64encode(raw).decode()):
        assert signed_by(user, message, text)
    assert not signed_by(user, "another message", base58.b58encode(raw).decode())
    assert not signed_by(user, message, base58.b58encode(raw[:63]).decode())


def test_types_without_a_scheme_never_verify():
    message = "hello"
    assert not signed_by(User("a@b.co", "email"), message, sign(ALICE, message))


def test_require_signed_wants_both_fields_and_the_code_named():
    message = "I am using referral code abc123"
    signature = sign(ALICE, message)
    require_signed((evm_user(ALICE),), message, signature, naming="ABC123")  # case-insensitive
    require_signed((evm_user(BOB), evm_user(ALICE)), message, signature)  # any of the signers
    for args in ((message, None), (None, signature), ("", signature)):
        with pytest.raises(InvalidSignature, match=r"^Invalid signature$"):
            require_signed((evm_user(ALICE),), *args)
    with pytest.raises(InvalidSignature):  # a signature given for another code cannot be replayed for this one
        require_signed((evm_user(ALICE),), message, signature, naming="XYZ789")


# -- the setting, on both shapes ---------------------------------------------------------------------------------------


def verifying(api, on: bool = True) -> None:
    response = api.put("/projects/config", json={**CONFIG, "verify_signatures": on})
    assert response.status_code == 200, response.text
    assert api.get("/projects/config").json()["verify_signatures"] is on


def code_of(api, account) -> str:
    created = api.post("/referral_codes", json={**who(account), "quantity": 1})
    assert created.status_code == 201, created.text
    return created.json()[0]["code"]


def use(api, code: str, account, message: str | None = None, signature: str | None = None):
    body = {"signature": signature, "signature_message": message, "chain_id": 8453}
    return api.patch(f"/referral_codes/{code}/use", params=who(account), json=body)


def referred(api, account) -> bool:
    return api.get("/referral_codes/status", params=who(account)).json()["referred"]


def test_off_by_default_signatures_are_stored_not_checked(api):
    assert api.get("/projects/config").json().get("verify_signatures", False) is False
    code = code_of(api, ALICE)
    assert use(api, code, BOB, "anything", "0xnot-a-signature").status_code == 200
    assert referred(api, BOB)


def test_use_and_removal_need_the_users_signature_naming_the_code(api):
    verifying(api)
    code = code_of(api, ALICE)
    message = f"I am using referral code {code}"
    assert error_of(use(api, code, BOB), 400) == "Invalid signature"  # none
    assert error_of(use(api, code, BOB, message, sign(CAROL, message)), 400) == "Invalid signature"  # another's
    other = "I am using referral code XYZ"
    assert error_of(use(api, code, BOB, other, sign(BOB, other)), 400) == "Invalid signature"  # not this code
    assert not referred(api, BOB)  # refused: nothing changed
    assert use(api, code, BOB, message, sign(BOB, message)).status_code == 200
    assert referred(api, BOB)

    query = {**who(BOB), "referrer_identifier": ALICE.address.lower(), "referrer_identifier_type": EVM}
    removal = f"I am deleting referral for user {BOB.address} from code {code}"
    url = f"/referral_codes/{code}/referrals"
    unsigned = api.request("DELETE", url, params=query, json={})
    assert error_of(unsigned, 400) == "Invalid signature" and referred(api, BOB)
    by_referrer = {"signature": sign(ALICE, removal), "signature_message": removal}  # the referrer may sign it too
    assert api.request("DELETE", url, params=query, json=by_referrer).status_code == 200
    assert not referred(api, BOB)


def test_affiliate_code_writes_sign_the_clients_messages(api):
    verifying(api)
    address = ALICE.address.lower()

    def create(code: str, signature: str | None):
        body = {"address": address, "identifier_type": EVM, "name": code, "code": code, "signature": signature}
        return api.post("/affiliates", json=body)

    assert error_of(create("alice", sign(BOB, signatures.creating_code_message("alice"))), 400) == "Invalid signature"
    assert error_of(create("alice", sign(ALICE, "I confirm that I am creating the bob code on Fuul")), 400) == (
        "Invalid signature"
    )
    assert api.get(f"/affiliates/{address}", params={"identifier_type": EVM}).status_code == 404  # nothing made
    created = create("alice", sign(ALICE, signatures.creating_code_message("alice")))
    assert created.status_code == 201, created.text

    def rename(code: str, signature: str):
        body = {"code": code, "user_identifier": address, "identifier_type": EVM, "signature": signature}
        return api.post(f"/affiliates/{address}", json=body)

    assert error_of(rename("alice2", sign(ALICE, signatures.creating_code_message("alice2"))), 400) == (
        "Invalid signature"
    )
    assert rename("alice2", sign(ALICE, signatures.updating_code_message("alice2"))).status_code == 200

    def rebate(rate, signature: str):
        body = {"identifier_type": EVM, "code": "alice2", "signature": signature, "rebate_rate": rate}
        return api.post(f"/affiliates/{address}/rebate-rate", json=body)

    assert error_of(rebate(0.2, sign(ALICE, signatures.rebate_rate_message("alice2", "0.1"))), 400) == (
        "Invalid signature"
    )
    changed = rebate(0.2, sign(ALICE, signatures.rebate_rate_message("alice2", "0.2")))
    assert changed.status_code == 200 and changed.json()["rebate_rate"] == 0.2


def test_tracking_events_naming_a_user_carry_its_signature(api):
    verifying(api)
    code = code_of(api, ALICE)
    assert api.post("/events", json=pageview("trk-sig", code=code)).status_code == 201  # no user: nothing to sign
    event = connect_wallet("trk-sig", 1)
    event["user"] = {"identifier": BOB.address.lower(), "identifier_type": EVM}
    assert error_of(api.post("/events", json=event), 400) == "Invalid signature"
    message = "Accept referral from Fuul"
    forged = {**event, "signature": sign(CAROL, message), "signature_message": message}
    assert error_of(api.post("/events", json=forged), 400) == "Invalid signature"
    assert not referred(api, BOB)
    signed = {**event, "signature": sign(BOB, message), "signature_message": message}
    assert api.post("/events", json=signed).json() == {"ingested_events": 1}
    assert api.get("/referral_codes/status", params=who(BOB)).json()["code"] == code  # referred through the link
