"""Signed claim checks (API.md §7): what an on-chain claim contract needs to pay a closed check, signed with the
project's claim signer key as EIP-712 typed data (eth-account computes the hash and the signature).

One form per check (the published client's `ClaimResponse`): its `proof` is keccak256 of the check's id, so a contract
that records each proof it paid pays every check at most once, however many forms were asked for it. A check no EVM
contract can pay (its user or its token's address is not an EVM address, or its amount passes uint256) still closes,
as API.md §5 has it, and its form is unsigned: `signatures` empty, `deadline` 0.

The typed data, exactly (docs/security.md, "Signed claim checks", says the same, for a contract's authors):

    domain   {name: "Rewards Claim", version: "1", chainId: <the currency's chain id>,
              verifyingContract: <the project's claim_contract_address, else the zero address>}
    types    EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)
             Claim(address projectAddress,address to,address currency,uint8 currencyType,uint256 amount,uint8 reason,
                   uint256 tokenId,uint256 deadline,bytes32 proof)
    message  projectAddress = verifyingContract; to = the user's EVM address; currency = the token's address;
             currencyType = 1 (ERC-20; 0 for the native coin, named by the zero address or 0xeeee…eeee);
             amount = the check's raw amount (the token's smallest unit); reason = 0 affiliate payout, 1 end-user
             payout; tokenId = 0; deadline = unix seconds (form_deadline); proof = keccak256(utf8(check id))

The signature is 65 bytes, r ‖ s ‖ v with v 27 or 28, over keccak256(0x19 0x01 ‖ domainSeparator ‖ hashStruct(message)):
what OpenZeppelin's EIP712 `_hashTypedDataV4` and ECDSA.recover check.
"""

import re
from dataclasses import dataclass

from rewards.domain import sealing
from rewards.domain.claim_checks import CLOSED, ClaimCheck
from rewards.domain.errors import DomainError, ErrorKind

DOMAIN_NAME, DOMAIN_VERSION = "Rewards Claim", "1"
ZERO_ADDRESS = "0x" + "0" * 40
NATIVE_ADDRESSES = frozenset({ZERO_ADDRESS, "0x" + "e" * 40})
CURRENCY_NATIVE, CURRENCY_ERC20 = 0, 1
REASON_CODES = {"affiliate_payout": 0, "end_user_payout": 1}
TOKEN_ID = 0  # fungible tokens only
FORM_HOURS = 24  # a form is valid until the top of the hour at least this long after it was made
EVM_USER = "evm_address"

EIP712_DOMAIN = [
    {"name": "name", "type": "string"},
    {"name": "version", "type": "string"},
    {"name": "chainId", "type": "uint256"},
    {"name": "verifyingContract", "type": "address"},
]
CLAIM = [
    {"name": "projectAddress", "type": "address"},
    {"name": "to", "type": "address"},
    {"name": "currency", "type": "address"},
    {"name": "currencyType", "type": "uint8"},
    {"name": "amount", "type": "uint256"},
    {"name": "reason", "type": "uint8"},
    {"name": "tokenId", "type": "uint256"},
    {"name": "deadline", "type": "uint256"},
    {"name": "proof", "type": "bytes32"},
]
CLAIM_TYPE = "Claim(" + ",".join(f"{field['type']} {field['name']}" for field in CLAIM) + ")"

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
_KEY = re.compile(r"(?:0x)?([0-9a-fA-F]{64})")
_CURVE_ORDER = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141  # secp256k1's n
KEY_RULE = "must be a secp256k1 private key: 64 hex digits, 0x optional"


class ClaimSignerNotConfigured(DomainError):
    kind = ErrorKind.CONFLICT

    def __init__(self) -> None:
        super().__init__("claim signer not configured")


class InvalidSignerKey(DomainError):
    """The message names the rule, never the value."""

    kind = ErrorKind.INVALID

    def __init__(self, field: str = "claim_signer_key") -> None:
        super().__init__(f"{field} {KEY_RULE}")


class CheckNotSignable(DomainError):
    """A form asked for a check that is not closed (a caller's mistake: every form is of a closed check)."""

    kind = ErrorKind.CONFLICT


class SignerKey:
    """A claim signer's private key and its address. Its repr names the address only, so the key reaches no log."""

    __slots__ = ("_secret", "address")

    def __init__(self, secret: bytes):
        if len(secret) != 32 or not 0 < int.from_bytes(secret, "big") < _CURVE_ORDER:
            raise InvalidSignerKey
        from eth_account import Account  # imported when first needed: ~0.5 s of every process's start otherwise

        self._secret = secret
        self.address: str = Account.from_key(secret).address.lower()

    def __repr__(self) -> str:
        return f"SignerKey(address={self.address})"

    def sealed(self, secrets_keys) -> "StoredSigner":
        return StoredSigner(address=self.address, sealed_key=sealing.seal(self._secret, secrets_keys))

    def sign(self, typed_data: dict) -> str:
        from eth_account import Account
        from eth_account.messages import encode_typed_data

        signed = Account.sign_message(encode_typed_data(full_message=typed_data), self._secret)
        return "0x" + bytes(signed.signature).hex()


@dataclass(frozen=True)
class StoredSigner:
    """What the state store keeps of a project's signer: its address (shown), and its key sealed (never shown)."""

    address: str
    sealed_key: str

    def __repr__(self) -> str:
        return f"StoredSigner(address={self.address})"


def parse_signer_key(value: object, field: str = "claim_signer_key") -> SignerKey:
    """A signer key from its text (a key file's trailing newline allowed); InvalidSignerKey otherwise."""
    match = _KEY.fullmatch(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise InvalidSignerKey(field)
    return SignerKey(bytes.fromhex(match[1]))


def open_signer(stored: StoredSigner | None, secrets_keys) -> SignerKey:
    """The project's signer, or ClaimSignerNotConfigured; a key this process cannot unseal is SecretUnreadable."""
    if stored is None:
        raise ClaimSignerNotConfigured
    return SignerKey(sealing.unseal(stored.sealed_key, secrets_keys))


def is_evm_address(text: str) -> bool:
    return _ADDRESS.fullmatch(text) is not None


def is_signable(check: ClaimCheck) -> bool:
    """Whether an EVM contract can pay the check: its user and its token are EVM addresses, its amount fits uint256."""
    return (
        check.user.identifier_type == EVM_USER
        and is_evm_address(check.user.identifier)
        and is_evm_address(check.currency.address)
        and 0 <= check.amount < 2**256
    )


def form_deadline(now_ms: int) -> int:
    """The deadline of a form made at `now_ms`, unix seconds: the top of the hour FORM_HOURS to FORM_HOURS + 1 hours
    later. Forms made within one clock hour are identical (ECDSA signatures here are deterministic, RFC 6979)."""
    return (now_ms // 3_600_000 + FORM_HOURS + 1) * 3600


def proof_of(check_id: str) -> bytes:
    """keccak256 of the check's id (UTF-8): the form's `proof`, one per check."""
    from eth_utils import keccak

    return keccak(text=check_id)


def currency_type(address: str) -> int:
    return CURRENCY_NATIVE if address.lower() in NATIVE_ADDRESSES else CURRENCY_ERC20


def domain(chain_id: int, contract: str | None) -> dict:
    return {"name": DOMAIN_NAME, "version": DOMAIN_VERSION, "chainId": chain_id,
            "verifyingContract": contract or ZERO_ADDRESS}  # fmt: skip


def claim_message(check: ClaimCheck, contract: str | None, deadline: int) -> dict:
    token = check.currency.address
    return {
        "projectAddress": contract or ZERO_ADDRESS,
        "to": check.user.identifier,
        "currency": token.lower() if is_evm_address(token) else token,
        "currencyType": currency_type(check.currency.address),
        "amount": check.amount,
        "reason": REASON_CODES[check.reason],
        "tokenId": TOKEN_ID,
        "deadline": deadline,
        "proof": proof_of(check.id),
    }


def typed_data(check: ClaimCheck, contract: str | None, deadline: int) -> dict:
    """The EIP-712 document signed for `check` (eth-account's `full_message` form)."""
    return {
        "types": {"EIP712Domain": EIP712_DOMAIN, "Claim": CLAIM},
        "primaryType": "Claim",
        "domain": domain(check.currency.chain_id, contract),
        "message": claim_message(check, contract, deadline),
    }


def claim_form(check: ClaimCheck, signer: SignerKey, contract: str | None, deadline: int) -> dict:
    """The published client's `ClaimResponse` for one closed check, signed (unsigned, with deadline 0, when no EVM
    contract can pay it); ours beside it: `claim_check_id`, and `chain_id` (the domain's chainId: the chain to claim
    on)."""
    if check.status != CLOSED:
        raise CheckNotSignable(f"claim check {check.id} is {check.status}: only closed checks are signed")
    signable = is_signable(check)
    deadline = deadline if signable else 0
    document = typed_data(check, contract, deadline)
    message = document["message"]
    return {
        "project_address": message["projectAddress"],
        "to": message["to"],
        "currency": message["currency"],
        "currency_type": message["currencyType"],
        "amount": str(check.amount),
        "reason": message["reason"],
        "token_id": str(TOKEN_ID),
        "deadline": deadline,
        "proof": "0x" + message["proof"].hex(),
        "signatures": [signer.sign(document)] if signable else [],
        "claim_check_id": check.id,
        "chain_id": check.currency.chain_id,
    }


def claim_forms(checks: list[ClaimCheck], signer: SignerKey, contract: str | None, now_ms: int) -> list[dict]:
    """A form per check, all with the same deadline but those of checks that expire (CPU: about half a millisecond
    each)."""
    deadline = form_deadline(now_ms)
    return [claim_form(check, signer, contract, check_deadline(check, deadline)) for check in checks]


def check_deadline(check: ClaimCheck, form_deadline_s: int) -> int:
    """A form's deadline: the check's expiry (API.md §8: past it the check is `expired`, and no contract may pay it),
    or the forms' hourly deadline for a check that never expires."""
    return form_deadline_s if check.expires_ms is None else check.expires_ms // 1000
