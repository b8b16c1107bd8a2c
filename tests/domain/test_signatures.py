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
from tests.conftest import SERVICE
from tests.ingest_api.test_tracking import CONFIG, connect_wallet, pageview
from tests.web.test_auth import error_of

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


PROJECT = "0b5e6f1c-6c1e-4d3a-9d3e-3b7c2f6a9e01"


def another_project(project_id: str) -> str:
    """An id that differs from `project_id` (its first character changed, whatever it is)."""
    return ("1" if project_id[0] != "1" else "2") + project_id[1:]


def test_require_signed_wants_the_signature_over_exactly_its_message():
    expected = signatures.using_code_message(PROJECT, "abc123")
    message = expected.text.upper().replace("PROJECT:", "Project:")  # codes and ids compare case-insensitively
    require_signed((evm_user(ALICE),), expected, sign(ALICE, message), message)
    require_signed((evm_user(BOB), evm_user(ALICE)), expected, sign(ALICE, expected.text))  # any signer; no text sent
    for signature, sent in ((None, expected.text), ("", expected.text)):
        with pytest.raises(InvalidSignature, match=r"^Invalid signature$"):
            require_signed((evm_user(ALICE),), expected, signature, sent)


@pytest.mark.parametrize(
    "signed",
    [
        signatures.using_code_message(PROJECT, "abc123_LONG"),  # a longer code holding this one
        signatures.using_code_message(PROJECT, "bc12"),  # a code inside this one
        signatures.using_code_message(another_project(PROJECT), "abc123"),
        signatures.creating_code_message(PROJECT, "abc123"),  # another operation naming the same code
        signatures.removing_referral_message(PROJECT, User("0x" + "b" * 40, EVM), "abc123"),
    ],
    ids=["longer-code", "shorter-code", "other-project", "other-operation", "removal"],
)
def test_a_signature_authorizes_nothing_but_its_own_message(signed):
    """The class of issue 26: a message naming the code somewhere is not a message authorizing its use."""
    expected = signatures.using_code_message(PROJECT, "abc123")
    with pytest.raises(InvalidSignature):  # sent as is
        require_signed((evm_user(ALICE),), expected, sign(ALICE, signed.text), signed.text)
    with pytest.raises(InvalidSignature):  # or claimed to be over the expected text
        require_signed((evm_user(ALICE),), expected, sign(ALICE, signed.text), expected.text)
    padded = expected.text + " " + signed.text
    with pytest.raises(InvalidSignature):  # the right words with more around them
        require_signed((evm_user(ALICE),), expected, sign(ALICE, padded), padded)


def test_case_sensitive_identifiers_compare_exactly():
    solana = User("7EcDhSYGxXyscszYEp35KHN8vvw3svAuLKTzXwCFLtV", "solana_address")
    expected = signatures.removing_referral_message(PROJECT, solana, "abc")
    assert expected.matches(expected.text) and expected.matches(expected.text.replace("abc", "ABC"))
    assert not expected.matches(expected.text.replace(solana.identifier, solana.identifier.lower()))
    evm_address = User("0x" + "ab" * 20, EVM)
    checksummed = Account.from_key(bytes([9]) * 32).address
    expected = signatures.tracking_event_message(PROJECT, "connect_wallet", User(checksummed.lower(), EVM), "trk-A")
    assert expected.matches(expected.text.replace(checksummed.lower(), checksummed))  # an EVM address in any case
    assert not expected.matches(expected.text.replace("trk-A", "trk-a"))  # a tracking id exactly
    assert evm_address.identifier in signatures.removing_referral_message(PROJECT, evm_address, "c").text


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


def signed_use(api, code: str, account, message: str):
    return use(api, code, account, message, sign(account, message))


def test_use_and_removal_need_the_users_signature_of_their_message(api):
    verifying(api)
    code = code_of(api, ALICE)
    message = signatures.using_code_message(api.project_id, code).text
    assert error_of(use(api, code, BOB), 400) == "Invalid signature"  # none
    assert error_of(use(api, code, BOB, message, sign(CAROL, message)), 400) == "Invalid signature"  # another's
    other = signatures.using_code_message(api.project_id, "XYZ").text
    assert error_of(signed_use(api, code, BOB, other), 400) == "Invalid signature"  # not this code
    loose = f"I am using referral code {code}"  # naming the code, but not the message of a use in this project
    assert error_of(signed_use(api, code, BOB, loose), 400) == "Invalid signature"
    assert not referred(api, BOB)  # refused: nothing changed
    assert signed_use(api, code, BOB, message).status_code == 200
    assert referred(api, BOB)

    query = {**who(BOB), "referrer_identifier": ALICE.address.lower(), "referrer_identifier_type": EVM}
    url = f"/referral_codes/{code}/referrals"
    unsigned = api.request("DELETE", url, params=query, json={})
    assert error_of(unsigned, 400) == "Invalid signature" and referred(api, BOB)
    for_carol = signatures.removing_referral_message(api.project_id, evm_user(CAROL), code).text
    misdirected = {"signature": sign(ALICE, for_carol), "signature_message": for_carol}  # another user's removal
    assert error_of(api.request("DELETE", url, params=query, json=misdirected), 400) == "Invalid signature"
    removal = signatures.removing_referral_message(api.project_id, evm_user(BOB), code).text
    by_referrer = {"signature": sign(ALICE, removal), "signature_message": removal}  # the referrer may sign it too
    assert api.request("DELETE", url, params=query, json=by_referrer).status_code == 200
    assert not referred(api, BOB)


def affiliate_code(api, account, code: str, verify: bool) -> None:
    body = {"address": account.address.lower(), "identifier_type": EVM, "name": code, "code": code}
    body["signature"] = sign(account, signatures.creating_code_message(api.project_id, code).text) if verify else None
    created = api.post("/affiliates", json=body)
    assert created.status_code == 201, created.text


def test_a_use_signed_for_a_longer_code_does_not_use_a_code_inside_it(api):
    """Issue 26's probe: Bob signed a use of XYZ_LONG (Alice's); Carol's code XYZ is inside that message."""
    verifying(api)
    affiliate_code(api, ALICE, "XYZ_LONG", verify=True)
    affiliate_code(api, CAROL, "XYZ", verify=True)
    for_long = signatures.using_code_message(api.project_id, "XYZ_LONG").text
    assert error_of(signed_use(api, "XYZ", BOB, for_long), 400) == "Invalid signature"
    assert error_of(use(api, "XYZ", BOB, None, sign(BOB, for_long)), 400) == "Invalid signature"
    assert not referred(api, BOB)
    assert signed_use(api, "XYZ_LONG", BOB, for_long).status_code == 200
    assert api.get("/referral_codes/status", params=who(BOB)).json()["code"] == "XYZ_LONG"


def test_a_signature_given_to_one_project_is_refused_by_another(make_api, admin):
    first, second = make_api(SERVICE), make_api(SERVICE, project_id=admin.project())
    for api in (first, second):
        verifying(api)
    affiliate_code(first, ALICE, "shared", verify=True)
    affiliate_code(second, CAROL, "shared", verify=True)
    for_first = signatures.using_code_message(first.project_id, "shared").text
    assert error_of(signed_use(second, "shared", BOB, for_first), 400) == "Invalid signature"  # replayed elsewhere
    assert not referred(second, BOB)
    replayed = {"address": ALICE.address.lower(), "identifier_type": EVM, "name": "a", "code": "alice"}
    replayed["signature"] = sign(ALICE, signatures.creating_code_message(first.project_id, "alice").text)
    assert error_of(second.post("/affiliates", json=replayed), 400) == "Invalid signature"
    assert signed_use(first, "shared", BOB, for_first).status_code == 200


def test_affiliate_code_writes_sign_their_messages(api):
    verifying(api)
    address = ALICE.address.lower()
    project = api.project_id

    def create(code: str, signature: str | None):
        body = {"address": address, "identifier_type": EVM, "name": code, "code": code, "signature": signature}
        return api.post("/affiliates", json=body)

    def signed(account, message) -> str:
        return sign(account, message.text)

    assert error_of(create("alice", signed(BOB, signatures.creating_code_message(project, "alice"))), 400) == (
        "Invalid signature"
    )
    for other in (signatures.creating_code_message(project, "bob"), signatures.updating_code_message(project, "alice")):
        assert error_of(create("alice", signed(ALICE, other)), 400) == "Invalid signature"
    client_line = "I confirm that I am creating the alice code on Fuul"  # the client's JSDoc line alone: no project
    assert error_of(create("alice", sign(ALICE, client_line)), 400) == "Invalid signature"
    assert api.get(f"/affiliates/{address}", params={"identifier_type": EVM}).status_code == 404  # nothing made
    created = create("alice", signed(ALICE, signatures.creating_code_message(project, "alice")))
    assert created.status_code == 201, created.text

    def rename(code: str, signature: str):
        body = {"code": code, "user_identifier": address, "identifier_type": EVM, "signature": signature}
        return api.post(f"/affiliates/{address}", json=body)

    assert error_of(rename("alice2", signed(ALICE, signatures.creating_code_message(project, "alice2"))), 400) == (
        "Invalid signature"
    )
    assert rename("alice2", signed(ALICE, signatures.updating_code_message(project, "alice2"))).status_code == 200

    def rebate(rate, signature: str):
        body = {"identifier_type": EVM, "code": "alice2", "signature": signature, "rebate_rate": rate}
        return api.post(f"/affiliates/{address}/rebate-rate", json=body)

    for other in (
        signatures.rebate_rate_message(project, "alice2", "0.1"),  # another rate
        signatures.rebate_rate_message(project, "alice", "0.2"),  # another code
        signatures.rebate_rate_message(another_project(project), "alice2", "0.2"),
    ):
        assert error_of(rebate(0.2, signed(ALICE, other)), 400) == "Invalid signature"
    changed = rebate(0.2, signed(ALICE, signatures.rebate_rate_message(project, "alice2", "0.2")))
    assert changed.status_code == 200 and changed.json()["rebate_rate"] == 0.2


def test_tracking_events_naming_a_user_carry_its_signature(api):
    verifying(api)
    code = code_of(api, ALICE)
    assert api.post("/events", json=pageview("trk-sig", code=code)).status_code == 201  # no user: nothing to sign
    event = connect_wallet("trk-sig", 1)
    event["user"] = {"identifier": BOB.address.lower(), "identifier_type": EVM}
    assert error_of(api.post("/events", json=event), 400) == "Invalid signature"
    message = signatures.tracking_event_message(api.project_id, "connect_wallet", evm_user(BOB), "trk-sig").text
    forged = {**event, "signature": sign(CAROL, message), "signature_message": message}
    assert error_of(api.post("/events", json=forged), 400) == "Invalid signature"
    other_id = signatures.tracking_event_message(api.project_id, "connect_wallet", evm_user(BOB), "trk-other").text
    rebound = {**event, "signature": sign(BOB, other_id), "signature_message": other_id}  # bound to another id
    assert error_of(api.post("/events", json=rebound), 400) == "Invalid signature"
    loose = "Accept referral from Fuul"
    assert error_of(api.post("/events", json={**event, "signature": sign(BOB, loose), "signature_message": loose}), 400)
    assert not referred(api, BOB)
    signed = {**event, "signature": sign(BOB, message), "signature_message": message}
    assert api.post("/events", json=signed).json() == {"ingested_events": 1}
    assert api.get("/referral_codes/status", params=who(BOB)).json()["code"] == code  # referred through the link
