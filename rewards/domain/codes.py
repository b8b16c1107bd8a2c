"""Referral codes (API.md §2): 7 characters of A–Z0–9 from a cryptographic source; and affiliate codes (API.md §7):
3–32 characters of A–Z a–z 0–9 _ - chosen by their owner. Both live in one namespace per project, matched
case-insensitively (normalize_code)."""

import re
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


AFFILIATE_CODE_RULE = "must be 3 to 32 characters of A-Z, a-z, 0-9, _ and -"
_AFFILIATE_CODE = re.compile(r"[A-Za-z0-9_-]{3,32}", re.ASCII)


def is_affiliate_code(text: str) -> bool:
    """Whether `text` may be chosen as an affiliate code (API.md §7); it is stored and answered as normalize_code
    writes it (in capitals)."""
    return _AFFILIATE_CODE.fullmatch(text) is not None
