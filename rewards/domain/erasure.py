"""Erasure (API.md §11): a user's identifier replaced everywhere by a stable pseudonym. Pure functions.

The pseudonym is `erased:` + the first 32 hex digits of HMAC-SHA256(the project's own random salt,
"<type>:<identifier>"): the same user of a project always gets the same one (a user erased twice, or named by two
requests, is one user still), and no one without the salt can tell which identifier a pseudonym stands for (a plain
hash of a public address would be undone by hashing every address). The identifier's type is kept: figures by type
stay whole.
"""

import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

import orjson

from rewards.domain.payouts import User

PREFIX = "erased:"
SALT_BYTES = 32
DONE_KEPT_MS = 35 * 86_400_000  # a finished erasure answers its status this long (then 404), holding no identifier


@dataclass(frozen=True)
class Erasure:
    """A pending erasure: who, and the pseudonym it becomes."""

    project_id: str
    id: str
    user: User
    pseudonym: User
    requested_ms: int


def new_salt() -> bytes:
    return secrets.token_bytes(SALT_BYTES)


def new_erasure_id() -> str:
    return "er_" + secrets.token_hex(16)


def pseudonym(salt: bytes, user: User) -> User:
    digest = hmac.new(salt, f"{user.identifier_type}:{user.identifier}".encode(), hashlib.sha256).hexdigest()
    return User(PREFIX + digest[:32], user.identifier_type)


# What a user signed (API.md §7's signature fields): a signature gives its signer's address back, and the message
# names them; kept with a code use or a code for the record, dropped once the user is erased.
PROOF_KEYS = ("signature", "signature_message", "signature_public_key")


def _without_proofs(value: object, signers: set[str]) -> object:
    """The document with the signature fields dropped from every object that names one of `signers` (a code use of
    an erased user: its own `proof` too)."""
    if isinstance(value, list):
        return [_without_proofs(item, signers) for item in value]
    if not isinstance(value, dict):
        return value
    kept = {key: _without_proofs(item, signers) for key, item in value.items()}
    if any(isinstance(item, str) and item in signers for item in value.values()):
        kept = {key: item for key, item in kept.items() if key not in PROOF_KEYS}
        if isinstance(kept.get("proof"), dict):
            kept["proof"] = {key: item for key, item in kept["proof"].items() if key not in PROOF_KEYS}
    return kept


def document_renames(renames: Mapping[User, User]) -> dict[str, str]:
    """What `rewrite_json_text` replaces: each identifier, and each `<type>:<identifier>` (an affiliate's id, a
    stored user field). By the identifier alone: the types' forms never overlap (an email holds an @, an EVM address is
    0x and 40 hex digits, …), so an identifier names one user of a project."""
    texts = {}
    for user, renamed in renames.items():
        texts[user.identifier] = renamed.identifier
        texts[f"{user.identifier_type}:{user.identifier}"] = f"{renamed.identifier_type}:{renamed.identifier}"
    return texts


def rewrite_json_text(text: str | bytes, renames: Mapping[str, str]) -> str | None:
    """A JSON text (a stored record, a webhook's body, an answer kept for an Idempotency-Key) with every string that
    is exactly one of `renames` (document_renames) replaced, at any depth, and inside a JSON text kept as a string of
    it (its quotes escaped); None when it names none of them. Replaced as text, never parsed and written again, so
    everything else (numbers as written, key order, spacing) stays byte for byte; then what the users signed is
    dropped (PROOF_KEYS), for which the document is parsed, if it holds a signature at all."""
    raw = text.decode() if isinstance(text, bytes) else text
    out = raw
    for old, new in renames.items():
        if old not in out:
            continue
        quoted_old, quoted_new = orjson.dumps(old).decode(), orjson.dumps(new).decode()
        out = out.replace(quoted_old, quoted_new)
        out = out.replace(orjson.dumps(quoted_old).decode()[1:-1], orjson.dumps(quoted_new).decode()[1:-1])
    if out == raw:
        return None
    return _signatures_dropped(out, set(renames.values())) if '"signature' in out else out


def _signatures_dropped(text: str, signers: set[str]) -> str:
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text
    kept = _without_proofs(document, signers)
    return text if kept == document else orjson.dumps(kept).decode()


def renamed_field(field: str, texts: Mapping[str, str]) -> str | None:
    """A stored name that is a user (`<type>:<identifier>`) or ends in one (`…|<user>`), renamed; None if it names
    none of them. `texts`: document_renames."""
    if ":" in field and field in texts:
        return texts[field]
    head, bar, user = field.rpartition("|")
    if bar and ":" in user and user in texts:
        return head + bar + texts[user]
    return None


_COUNTED = re.compile(r"(?:^|\|)(\d+):")


def renamed_counter(key: str, texts: Mapping[str, str]) -> str | None:
    """A cap's counter or history name, `…<side>|<n>:<currency>|<user>` (rewards.domain.allotment; the currency's
    length first, so a `|` in the user's identifier, as an email may hold, is read right), with its user renamed; None
    if it names none of them."""
    found = _COUNTED.search(key)
    if found is None:
        return None
    end = found.end() + int(found.group(1))
    if key[end : end + 1] != "|" or key[end + 1 :] not in texts:
        return None
    return key[: end + 1] + texts[key[end + 1 :]]


_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def renamed_text(text: str, texts: Mapping[str, str]) -> str | None:
    """A stored value with the identifiers replaced: a user name itself, or a JSON document naming them; None if it
    names none. Found by the document's quoted strings (a set lookup each, whatever the number of users erased); a
    document holding another as text (escaped quotes) is searched whole."""
    renamed = renamed_field(text, texts)
    if renamed is not None:
        return renamed
    if "\\" not in text and texts.keys().isdisjoint(_QUOTED.findall(text)):
        return None
    return rewrite_json_text(text, texts)
