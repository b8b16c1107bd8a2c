"""Signed claim checks (rewards.domain.claim_signing) and secrets at rest (rewards.domain.sealing), without a server:
the typed data a contract recomputes, the signer recovered from a form, and keys that never show."""

import json
import sqlite3

import pytest
from cryptography.fernet import Fernet
from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_utils import keccak

from rewards.domain import claim_checks as cc
from rewards.domain import claim_signing as cs
from rewards.domain import sealing
from rewards.domain.payout_config import PayoutConfig, TokenCurrency
from rewards.domain.payouts import User
from tests.support.cli import rewards

KEY = "0x" + "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
SIGNER = Account.from_key(KEY).address
CONTRACT = "0x" + "c1" * 20
USDC = TokenCurrency(address="0xA0b86991c6218b36c1d19d4a2e9eB0cE3606eB48", chain_id=8453, name="USDC", decimals=6)


def closed_check(n: int = 1, **fields) -> cc.ClaimCheck:
    check = cc.ClaimCheck(
        id=cc.check_id("p", f"payout-{n}"), user=User("0x" + "ab" * 20, "evm_address"), currency=USDC,
        amount=15_000_000 * n, reason="affiliate_payout", status=cc.CLOSED, hash=None, source_id=f"e-{n}",
        created_ms=1_700_000_000_000, claimed_ms=None, version=2,
    )  # fmt: skip
    return cc.ClaimCheck(**{**check.__dict__, **fields})


def recover(form: dict, chain_id: int = USDC.chain_id) -> str:
    """What a contract does: rebuild the typed data from the form's own fields, and recover who signed it."""
    document = {
        "types": {"EIP712Domain": cs.EIP712_DOMAIN, "Claim": cs.CLAIM},
        "primaryType": "Claim",
        "domain": {"name": "Rewards Claim", "version": "1", "chainId": chain_id,
                   "verifyingContract": form["project_address"]},
        "message": {"projectAddress": form["project_address"], "to": form["to"], "currency": form["currency"],
                    "currencyType": form["currency_type"], "amount": int(form["amount"]), "reason": form["reason"],
                    "tokenId": int(form["token_id"]), "deadline": form["deadline"], "proof": form["proof"]},
    }  # fmt: skip
    (signature,) = form["signatures"]
    return Account.recover_message(encode_typed_data(full_message=document), signature=signature)


def test_a_form_recovers_to_the_signer_and_carries_the_clients_fields():
    signer = cs.parse_signer_key(KEY)
    check = closed_check()
    now = 1_800_000_123_456
    form = cs.claim_form(check, signer, CONTRACT, cs.form_deadline(now))
    assert recover(form) == SIGNER
    assert form == {
        "project_address": CONTRACT, "to": "0x" + "ab" * 20, "currency": USDC.address.lower(), "currency_type": 1,
        "amount": "15000000", "reason": 0, "token_id": "0", "deadline": form["deadline"],
        "proof": "0x" + keccak(text=check.id).hex(), "signatures": form["signatures"], "claim_check_id": check.id,
        "chain_id": 8453,
    }  # fmt: skip
    assert len(bytes.fromhex(form["signatures"][0][2:])) == 65 and form["signatures"][0][-2:] in ("1b", "1c")
    # valid 24 to 25 hours, ending on the hour; identical within a clock hour (RFC 6979 signatures)
    assert form["deadline"] % 3600 == 0 and 24 * 3600 < form["deadline"] - now // 1000 <= 25 * 3600
    assert cs.claim_form(check, signer, CONTRACT, cs.form_deadline(now + 1000)) == form
    end_user = cs.claim_form(replace_check(check, reason="end_user_payout"), signer, None, form["deadline"])
    assert end_user["reason"] == 1 and end_user["project_address"] == cs.ZERO_ADDRESS  # no contract configured
    assert recover(end_user) == SIGNER
    assert recover({**form, "amount": "15000001"}) != SIGNER  # any field changed: another signer recovered
    assert recover(form, chain_id=1) != SIGNER


def replace_check(check: cc.ClaimCheck, **fields) -> cc.ClaimCheck:
    return cc.ClaimCheck(**{**check.__dict__, **fields})


def test_the_typed_data_is_the_documented_one():
    assert cs.CLAIM_TYPE == (
        "Claim(address projectAddress,address to,address currency,uint8 currencyType,uint256 amount,uint8 reason,"
        "uint256 tokenId,uint256 deadline,bytes32 proof)"
    )
    document = cs.typed_data(closed_check(), CONTRACT, 1_900_000_000)
    assert document["domain"] == {"name": "Rewards Claim", "version": "1", "chainId": 8453,
                                  "verifyingContract": CONTRACT}  # fmt: skip
    native = closed_check(currency=TokenCurrency(address="0x" + "e" * 40, chain_id=1, name="ETH", decimals=18))
    assert cs.typed_data(native, CONTRACT, 1)["message"]["currencyType"] == cs.CURRENCY_NATIVE


def test_what_no_evm_contract_can_pay_has_an_unsigned_form():
    signer = cs.parse_signer_key(KEY)
    with pytest.raises(cs.CheckNotSignable, match="only closed"):
        cs.claim_form(closed_check(status=cc.OPEN), signer, CONTRACT, 1)
    solana = TokenCurrency(address="EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v", chain_id=1, name="USDC", decimals=6)
    email = User("a@example.com", "email")
    for check in (closed_check(currency=solana), closed_check(amount=2**256), closed_check(user=email)):
        assert not cs.is_signable(check)
        form = cs.claim_form(check, signer, CONTRACT, 1_900_000_000)
        assert (form["signatures"], form["deadline"], form["claim_check_id"]) == ([], 0, check.id)
        assert (form["to"], form["amount"]) == (check.user.identifier, str(check.amount))
    assert cs.claim_form(closed_check(currency=solana), signer, None, 1)["currency"] == solana.address  # as it is
    assert cs.is_signable(closed_check(amount=2**256 - 1))
    with pytest.raises(cs.ClaimSignerNotConfigured, match=r"^claim signer not configured$"):
        cs.open_signer(None, ())


@pytest.mark.parametrize(
    "bad", ["", "0x", KEY[:-1], KEY + "0", KEY.replace("4c", "zz"), "0x" + "0" * 64, "f" * 64, 12, None, [KEY]]
)
def test_a_bad_key_is_named_never_echoed(bad):
    with pytest.raises(cs.InvalidSignerKey) as raised:
        cs.parse_signer_key(bad)
    assert str(raised.value) == "claim_signer_key must be a secp256k1 private key: 64 hex digits, 0x optional"


def test_a_key_reads_from_a_file_and_never_shows():
    signer = cs.parse_signer_key(KEY[2:] + "\n")  # a key file: no 0x, a final newline
    assert signer.address == SIGNER.lower()
    for shown in (repr(signer), str(signer), repr(signer.sealed(()))):
        assert KEY[2:] not in shown.lower()


def test_sealing_with_and_without_a_secrets_key():
    secret = bytes.fromhex(KEY[2:])
    assert sealing.seal(secret, ()) == "plain:" + KEY[2:]
    assert sealing.unseal(sealing.seal(secret, ()), ("ignored",)) == secret
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    sealed = sealing.seal(secret, (old,))
    assert sealed.startswith("fernet:") and KEY[2:] not in sealed and sealing.is_encrypted(sealed)
    assert sealing.unseal(sealed, (new, old)) == secret  # rotation: the new key first, the old one still opens
    assert sealing.unseal(sealing.seal(secret, (new, old)), (new,)) == secret
    for keys, reason in (((), "not set"), ((new,), "does not hold"), (("not-a-fernet-key",), "url-safe base64")):
        with pytest.raises(sealing.SecretUnreadable, match=reason) as raised:
            sealing.unseal(sealed, keys)
        assert old not in str(raised.value) and "not-a-fernet-key" not in str(raised.value)
    stored = cs.parse_signer_key(KEY).sealed((old,))
    assert stored.address == SIGNER.lower() and cs.open_signer(stored, (old,)).address == SIGNER.lower()


def test_the_claim_contract_is_configuration():
    config = PayoutConfig.model_validate({"claim_contract_address": CONTRACT.upper().replace("0X", "0x")})
    assert config.claim_contract_address == CONTRACT
    with pytest.raises(ValueError, match="must be an EVM address"):
        PayoutConfig.model_validate({"claim_contract_address": "0x1234"})


def _cli(*args: str, data_dir, secrets_key: str | None = None):
    return rewards(*args, data_dir=data_dir, env=None if secrets_key is None else {"REWARDS_SECRETS_KEY": secrets_key})


def test_the_command_line_sets_the_signer_from_a_file(tmp_path):
    data = tmp_path / "data"
    project = json.loads(_cli("project", "create", "--name", "signer", data_dir=data).stdout)["project_id"]
    key_file = tmp_path / "claim-signer.key"
    key_file.write_text(KEY[2:] + "\n")
    secrets_key = Fernet.generate_key().decode()
    done = _cli("project", "claim-signer", "--project", project, "--key-file", str(key_file), data_dir=data,
                secrets_key=secrets_key)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"project_id": project, "claim_signer_address": SIGNER.lower(), "encrypted": True}
    with sqlite3.connect(data / "state.sqlite3") as db:
        ((address, sealed),) = db.execute("SELECT address, sealed_key FROM claim_signers").fetchall()
    assert address == SIGNER.lower() and sealing.unseal(sealed, (secrets_key,)).hex() == KEY[2:]
    key_file.write_text(KEY[2:-1] + "\n")  # one digit short
    refused = _cli("project", "claim-signer", "--project", project, "--key-file", str(key_file), data_dir=data)
    assert refused.returncode == 1 and "64 hex digits" in refused.stderr
    assert KEY[2:-1] not in refused.stderr + refused.stdout
    unknown = _cli("project", "claim-signer", "--project", "0" * 32, "--remove", data_dir=data)
    assert unknown.returncode == 1 and "not found" in unknown.stderr
    removed = _cli("project", "claim-signer", "--project", project, "--remove", data_dir=data)
    assert json.loads(removed.stdout)["claim_signer_address"] is None
    with sqlite3.connect(data / "state.sqlite3") as db:
        assert db.execute("SELECT count(*) FROM claim_signers").fetchone() == (0,)
