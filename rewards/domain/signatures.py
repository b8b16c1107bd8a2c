"""Signature verification of the published client's signed writes (API.md §7: a per-project setting, off by default).

With the project's `verify_signatures` on, every write the client signs for a user must carry that user's valid
signature, whatever the key (a project turning it on wants proof of the wallet's owner, from a browser or a backend):

    operation              signed message                                                         signer
    useReferralCode        signature_message, which must name the code                            the user
    deleteReferral         signature_message, which must name the code                            user or referrer
    createAffiliateCode    "I confirm that I am creating the {code} code on Fuul"                 the affiliate
    updateAffiliateCode    "I confirm that I am updating my code to {code} on Fuul"               the affiliate
    updateRebateRate       "I confirm that I am updating the rebate rate of {code} to {rate} on Fuul"
                           ({rate} in its shortest decimal form: 0.1, 0.15; signed by the affiliate)
    tracking events        signature_message (identifyUser's `message`), when the event names a   the user
    naming a user          user

The create and update messages are the client's own JSDoc; it documents none for the rebate rate, so that line is
this service's (README "Using the published client"). A message that must name the code holds it case-insensitively:
a signature given for one code cannot be replayed to use another.

What verifies: an `evm_address` by EIP-191 `personal_sign` (eth-account recovers the signer; what wallets' signMessage
produce), a `solana_address` by Ed25519 over the message's UTF-8 bytes, the address being the public key (the signature
in base58, hex or base64). Nothing else can: a smart-contract wallet's EIP-1271 signature needs a chain call this
service does not make, and sui, xrpl, stellar and email users have no scheme here; for them the answer is "Invalid
signature", so a project whose users are of those types keeps the setting off.
"""

import base64
import binascii

import base58
from cryptography.exceptions import InvalidSignature as _BadEd25519
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from eth_account import Account
from eth_account.messages import encode_defunct

from rewards.domain.errors import DomainError
from rewards.domain.payouts import User

MESSAGE = "Invalid signature"  # the client's InvalidSignatureError is this message, compared case-insensitively


class InvalidSignature(DomainError):
    def __init__(self) -> None:
        super().__init__(MESSAGE)


def creating_code_message(code: str) -> str:
    return f"I confirm that I am creating the {code} code on Fuul"


def updating_code_message(code: str) -> str:
    return f"I confirm that I am updating my code to {code} on Fuul"


def rebate_rate_message(code: str, rate: str) -> str:
    return f"I confirm that I am updating the rebate rate of {code} to {rate} on Fuul"


def require_signed(
    signers: tuple[User, ...], message: str | None, signature: str | None, naming: str | None = None
) -> None:
    """Raise InvalidSignature unless `signature` is one of `signers`' over `message` (which, with `naming`, must hold
    that text, case-insensitively)."""
    if not message or not signature:
        raise InvalidSignature()
    if naming is not None and naming.lower() not in message.lower():
        raise InvalidSignature()
    if not any(signed_by(signer, message, signature) for signer in signers):
        raise InvalidSignature()


def signed_by(user: User, message: str, signature: str) -> bool:
    match user.identifier_type:
        case "evm_address":
            return _evm_signer(message, signature) == user.identifier
        case "solana_address":
            return _ed25519_valid(base58.b58decode(user.identifier), message, signature)
        case _:
            return False


def _evm_signer(message: str, signature: str) -> str | None:
    try:
        return Account.recover_message(encode_defunct(text=message), signature=signature).lower()
    except Exception:  # eth-account raises several kinds for a malformed signature: every one means "not signed"
        return None


def _ed25519_valid(public_key: bytes, message: str, signature: str) -> bool:
    raw = _signature_bytes(signature)
    if raw is None:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(raw, message.encode())
    except (_BadEd25519, ValueError):
        return False
    return True


def _signature_bytes(text: str) -> bytes | None:
    """An Ed25519 signature's 64 bytes, from the encodings Solana wallets' apps send (base58, hex, base64)."""
    decoders = (
        base58.b58decode,
        lambda t: bytes.fromhex(t.removeprefix("0x")),
        lambda t: base64.b64decode(t, validate=True),
    )
    for decode in decoders:
        try:
            raw = decode(text)
        except (ValueError, binascii.Error):
            continue
        if len(raw) == 64:
            return raw
    return None
