"""Referral codes (API.md §2): 7 characters of A–Z0–9 from a cryptographic source."""

import secrets
import string

CODE_ALPHABET = string.ascii_uppercase + string.digits
CODE_LENGTH = 7


def generate_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def normalize_code(code: str) -> str:
    """Codes are matched case-insensitively, in ASCII only: `str.upper()` would make `ſ` an `S`, and stripping
    would make `CODE\n` the code; such texts stay as they are and match no code."""
    return code.upper() if code.isascii() else code


def remaining_uses(max_uses: int | None, current_uses: int) -> int | None:
    return None if max_uses is None else max(max_uses - current_uses, 0)


def is_available(max_uses: int | None, current_uses: int) -> bool:
    return max_uses is None or current_uses < max_uses
