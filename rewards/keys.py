"""API keys: `rk_<key id>_<secret>`. Only a hash of the secret is stored; comparison is constant-time."""

import hashlib
import hmac
import secrets

SCOPES = ("referral_codes:read", "service_role", "SendTrackingEvent")
_PREFIX = "rk"


def new_key() -> tuple[str, str, bytes]:
    """(the key shown once, its id, the hash to store)."""
    key_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    return f"{_PREFIX}_{key_id}_{secret}", key_id, hash_secret(secret)


def split_key(api_key: str) -> tuple[str, str] | None:
    parts = api_key.split("_", 2)
    if len(parts) != 3 or parts[0] != _PREFIX or not parts[1] or not parts[2]:
        return None
    return parts[1], parts[2]


def hash_secret(secret: str) -> bytes:
    # The secret has 256 bits of entropy, so a fast hash is right here (no password stretching needed).
    return hashlib.sha256(secret.encode()).digest()


def secret_matches(secret: str, stored_hash: bytes) -> bool:
    return hmac.compare_digest(hash_secret(secret), stored_hash)
