"""Erasure (API.md §11): a user's identifier replaced everywhere by a stable pseudonym. Pure functions.

The pseudonym is `erased:` + the first 32 hex digits of HMAC-SHA256(the project's own random salt,
"<type>:<identifier>"): the same user of a project always gets the same one (a user erased twice, or named by two
requests, is one user still), and no one without the salt can tell which identifier a pseudonym stands for (a plain
hash of a public address would be undone by hashing every address). The identifier's type is kept: figures by type
stay whole.
"""

import hashlib
import hmac
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


def is_pseudonym(identifier: str) -> bool:
    return identifier.startswith(PREFIX)


def rewrite_document(value: object, renames: Mapping[str, str]) -> object:
    """A JSON document (a stored record, a webhook's body, a dead letter) with every string that is exactly an erased
    identifier replaced by its pseudonym, at any depth. By the identifier alone: the types' forms never overlap (an
    email holds an @, an EVM address is 0x and 40 hex digits, …), so an identifier names one user of a project."""
    if isinstance(value, str):
        if value[:1] in ("{", "[") and (text := rewrite_json_text(value, renames)) is not None:
            return text  # a document kept as text inside another (a webhook's body, a stored answer)
        return renames.get(value, value)
    if isinstance(value, list):
        return [rewrite_document(item, renames) for item in value]
    if isinstance(value, dict):
        return {renames.get(key, key): rewrite_document(item, renames) for key, item in value.items()}
    return value


def document_renames(renames: Mapping[User, User]) -> dict[str, str]:
    """What `rewrite_document` replaces: each identifier, and each `<type>:<identifier>` (an affiliate's id, a
    stored user field)."""
    texts = {}
    for user, renamed in renames.items():
        texts[user.identifier] = renamed.identifier
        texts[f"{user.identifier_type}:{user.identifier}"] = f"{renamed.identifier_type}:{renamed.identifier}"
    return texts


def rewrite_json_text(text: str | bytes, renames: Mapping[str, str]) -> str | None:
    """`rewrite_document` of a JSON text; None when it names none of the identifiers (or is not JSON)."""
    raw = text.decode() if isinstance(text, bytes) else text
    if not any(identifier in raw for identifier in renames):
        return None
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    rewritten = rewrite_document(document, renames)
    return None if rewritten == document else orjson.dumps(rewritten).decode()
