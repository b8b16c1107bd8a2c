"""Signature verification of the published client's signed writes (API.md §7: a per-project setting, off by default).

With the project's `verify_signatures` on, every write the client signs for a user must carry that user's valid
signature over the message that authorizes exactly that write, whatever the key (a project turning it on wants proof
of the wallet's owner, from a browser or a backend). Each message names the operation, everything the write changes
(the whole code, the user whose referral goes, the tracking id bound, the rate) and the project, on a line of its own,
so a signature made for one code, one operation, one user or one project authorizes nothing else:

    operation              the message (then a newline and "Project: {project_id}")             signer
    useReferralCode        I confirm that I am using the referral code {code}                     the user
    deleteReferral         I confirm that I am removing the referral of {user} by the code {code} user or referrer
    createAffiliateCode    I confirm that I am creating the {code} code on Fuul                   the affiliate
    updateAffiliateCode    I confirm that I am updating my code to {code} on Fuul                 the affiliate
    updateRebateRate       I confirm that I am updating the rebate rate of {code} to {rate} on Fuul
                           ({rate} in its shortest decimal form: 0.1, 0.15)                       the affiliate
    tracking events        I confirm the {name} event of {user} with the tracking id {tracking_id} the user
    naming a user          (identifyUser's is named connect_wallet)

The first lines of the create and update messages are the client's own JSDoc; the project line is this service's
(the client's messages name no project, so a signature given to one project could otherwise be replayed to another).
Where the client sends the signed text (`signature_message`: use, removal, tracking events) it must be that message;
it is compared case-insensitively (codes and addresses are), but a user identifier of a case-sensitive type (Solana,
XRPL, Stellar) exactly. Where it sends none (create, update, rebate), the signature is verified over the message.

What verifies: an `evm_address` by EIP-191 `personal_sign` (eth-account recovers the signer; what wallets' signMessage
produce), a `solana_address` by Ed25519 over the message's UTF-8 bytes, the address being the public key (the signature
in base58, hex or base64). Nothing else can: a smart-contract wallet's EIP-1271 signature needs a chain call this
service does not make, and sui, xrpl, stellar and email users have no scheme here; for them the answer is "Invalid
signature", so a project whose users are of those types keeps the setting off.
"""

import base64
import binascii
import re
from dataclasses import dataclass

import base58
from cryptography.exceptions import InvalidSignature as _BadEd25519
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from rewards.domain.errors import DomainError
from rewards.domain.payouts import User

MESSAGE = "Invalid signature"  # the client's InvalidSignatureError is this message, compared case-insensitively
CASE_INSENSITIVE_TYPES = frozenset({"evm_address", "sui_address", "email"})  # stored lowercase (API.md §0)


class InvalidSignature(DomainError):
    def __init__(self) -> None:
        super().__init__(MESSAGE)


@dataclass(frozen=True)
class Signed:
    """The message that authorizes one write: its text, and which of its parts are compared exactly."""

    parts: tuple[tuple[str, bool], ...]  # (text, case-sensitive)

    @property
    def text(self) -> str:
        return "".join(text for text, _ in self.parts)

    def matches(self, message: str) -> bool:
        pattern = "".join(re.escape(text) if exact else f"(?i:{re.escape(text)})" for text, exact in self.parts)
        return re.fullmatch(pattern, message) is not None


def _message(project_id: str, *parts: tuple[str, bool]) -> Signed:
    return Signed((*parts, ("\nProject: " + project_id, False)))


def _loose(text: str) -> tuple[str, bool]:
    return (text, False)


def _identifier(user: User) -> tuple[str, bool]:
    return (user.identifier, user.identifier_type not in CASE_INSENSITIVE_TYPES)


def using_code_message(project_id: str, code: str) -> Signed:
    return _message(project_id, _loose(f"I confirm that I am using the referral code {code}"))


def removing_referral_message(project_id: str, user: User, code: str) -> Signed:
    return _message(
        project_id,
        _loose("I confirm that I am removing the referral of "),
        _identifier(user),
        _loose(f" by the code {code}"),
    )


def creating_code_message(project_id: str, code: str) -> Signed:
    return _message(project_id, _loose(f"I confirm that I am creating the {code} code on Fuul"))


def updating_code_message(project_id: str, code: str) -> Signed:
    return _message(project_id, _loose(f"I confirm that I am updating my code to {code} on Fuul"))


def rebate_rate_message(project_id: str, code: str, rate: str) -> Signed:
    return _message(project_id, _loose(f"I confirm that I am updating the rebate rate of {code} to {rate} on Fuul"))


def tracking_event_message(project_id: str, name: str, user: User, tracking_id: str) -> Signed:
    return _message(
        project_id,
        _loose(f"I confirm the {name} event of "),
        _identifier(user),
        _loose(" with the tracking id "),
        (tracking_id, True),
    )


def require_signed(signers: tuple[User, ...], expected: Signed, signature: str | None, sent: str | None = None) -> None:
    """Raise InvalidSignature unless `signature` is one of `signers`' over the message `expected`: over `sent` (the
    text the client sent) when it sends one, which must then be that message; else over the message's text."""
    if not signature:
        raise InvalidSignature()
    message = expected.text if sent is None else sent
    if not expected.matches(message):
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
    from eth_account import Account  # imported when first needed: ~0.5 s of every process's start otherwise
    from eth_account.messages import encode_defunct

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
