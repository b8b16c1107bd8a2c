"""User identifiers (API.md §0): validation and canonical form. Pure functions."""

import base64
import binascii
import re

import base58

IDENTIFIER_TYPES = (
    "evm_address",
    "solana_address",
    "sui_address",
    "xrpl_address",
    "stellar_address",
    "email",
)

# Patterns are used with fullmatch (`$` would accept a final newline), and the email one refuses control
# characters besides whitespace: an identifier is stored and compared as text everywhere.
_EVM = re.compile(r"0x[0-9a-fA-F]{40}")
_SUI = re.compile(r"0x[0-9a-fA-F]{64}")
_XRPL = re.compile(r"r[1-9A-HJ-NP-Za-km-z]{24,34}")
_XRPL_ALPHABET = set(base58.RIPPLE_ALPHABET.decode())
_EMAIL_PART = r"[^@\s\x00-\x1f\x7f-\x9f]+"
_EMAIL = re.compile(rf"{_EMAIL_PART}@{_EMAIL_PART}\.{_EMAIL_PART}")
_STELLAR_ACCOUNT_VERSION = 6 << 3  # StrKey version byte of an account id ("G...")


class InvalidIdentifier(ValueError):
    pass


def canonical_identifier(identifier: str, identifier_type: str) -> str:
    """Return the stored form of a valid identifier, or raise InvalidIdentifier."""
    if identifier_type not in IDENTIFIER_TYPES:
        raise InvalidIdentifier(f"user_identifier_type must be one of: {', '.join(IDENTIFIER_TYPES)}")
    if not isinstance(identifier, str) or not _is_valid(identifier, identifier_type):
        raise InvalidIdentifier(f"user_identifier is not a valid {identifier_type}")
    if identifier_type in ("evm_address", "sui_address", "email"):
        return identifier.lower()
    return identifier


def _is_valid(identifier: str, identifier_type: str) -> bool:
    match identifier_type:
        case "evm_address":
            return bool(_EVM.fullmatch(identifier))
        case "sui_address":
            return bool(_SUI.fullmatch(identifier))
        case "solana_address":
            return _is_solana(identifier)
        case "xrpl_address":
            return bool(_XRPL.fullmatch(identifier)) and set(identifier) <= _XRPL_ALPHABET
        case "stellar_address":
            return _is_stellar_account(identifier)
        case "email":
            return len(identifier) <= 320 and bool(_EMAIL.fullmatch(identifier))
    return False


def _is_solana(identifier: str) -> bool:
    if not 32 <= len(identifier) <= 44:
        return False
    try:
        return len(base58.b58decode(identifier)) == 32
    except ValueError:
        return False


def _is_stellar_account(identifier: str) -> bool:
    if len(identifier) != 56 or not identifier.startswith("G"):
        return False
    try:
        raw = base64.b32decode(identifier)
    except (binascii.Error, ValueError):
        return False
    payload, checksum = raw[:-2], raw[-2:]
    # StrKey's checksum is CRC16-XModem, little-endian; binascii.crc_hqx is that CRC.
    return payload[0] == _STELLAR_ACCOUNT_VERSION and binascii.crc_hqx(payload, 0).to_bytes(2, "little") == checksum
