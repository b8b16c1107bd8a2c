"""Referral codes (API.md §2): 7 characters of A–Z0–9 from a cryptographic source; and affiliate codes (API.md §7):
3–32 characters of A–Z a–z 0–9 _ - chosen by their owner. Both live in one namespace per project, matched
case-insensitively (normalize_code)."""

import re
import secrets
import string

CODE_ALPHABET = string.ascii_uppercase + string.digits
CODE_LENGTH = 7


# Fixed path segments the API serves where a code may stand (GET /referral_codes/status beside GET
# /referral_codes/{code}): a code of such a name could never be read by its path, so none is one.
# tests/test_codes_routes.py holds this set to the routes.
RESERVED_CODES = frozenset({"STATUS"})


def generate_code() -> str:
    while (code := "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))) in RESERVED_CODES:
        pass
    return code


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


def affiliate_code_problem(text: str) -> str | None:
    """Why `text` may not be chosen as an affiliate code (API.md §7), or None; a code is stored and answered as
    normalize_code writes it (in capitals)."""
    if _AFFILIATE_CODE.fullmatch(text) is None:
        return f"code {AFFILIATE_CODE_RULE}"
    if normalize_code(text) in RESERVED_CODES:
        return f"code {text} is reserved: a path of the API has that name"
    return None


def is_affiliate_code(text: str) -> bool:
    return affiliate_code_problem(text) is None
