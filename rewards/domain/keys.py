"""API keys: `rk_<key id>_<secret>`. Only a hash of the secret is stored; comparison is constant-time."""

import hashlib
import hmac
import math
import secrets
import time
from typing import Any

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


class KeyCache:
    """Keys resolved lately, kept per process for at most `ttl_s`, so that a request costs no read of the state
    store's engine to authenticate.

    Whoever revokes a key or deletes a project tells every process (rewards.adapters.production.redis_state: a Redis
    pub/sub message), whose follower then calls `drop_key` or `drop_project`. An entry is served only while the
    follower has heard from the engine within `live_s`: `heard(at)` says that every message published before
    `at` has been applied. So a revocation reaches this process within `live_s` even if its message is lost with
    the follower's connection; before the first `heard` and after `suspend` nothing is served (and a `suspend`
    forgets every entry: messages may have been missed).

    An entry holds the key's stored hash, never the key: a hit compares the secret with it in constant time, as
    the state store does. Only keys that resolved are kept (unknown ones are not), at most `max_entries`.
    `generation` changes with every drop: a resolution read before a drop must not be put after it (`put` with
    the generation read before the engine was asked)."""

    def __init__(self, ttl_s: float, live_s: float, max_entries: int = 10_000, clock=time.monotonic):
        self._ttl_s, self._live_s, self._max = ttl_s, live_s, max_entries
        self._clock = clock
        self._entries: dict[str, tuple[bytes, Any, float]] = {}  # key id → (secret hash, principal, expiry)
        self._heard_at = -math.inf
        self.generation = 0

    def get(self, key_id: str, secret: str) -> Any | None:
        """The principal of a live entry whose hash the secret matches, else None (ask the engine)."""
        entry = self._entries.get(key_id)
        if entry is None:
            return None
        now = self._clock()
        if now > entry[2] or now - self._heard_at > self._live_s or not secret_matches(secret, entry[0]):
            return None
        return entry[1]

    def put(self, key_id: str, secret_hash: bytes, principal: Any, generation: int) -> None:
        if generation != self.generation:
            return  # a drop came between the engine's answer and now: that answer may be stale
        if len(self._entries) >= self._max and key_id not in self._entries:
            self._entries.clear()
        self._entries[key_id] = (secret_hash, principal, self._clock() + self._ttl_s)

    def drop_key(self, key_id: str) -> None:
        self.generation += 1
        self._entries.pop(key_id, None)

    def drop_project(self, project_id: str) -> None:
        self.generation += 1
        for key_id in [k for k, (_, principal, _) in self._entries.items() if principal.project_id == project_id]:
            del self._entries[key_id]

    def heard(self, at: float) -> None:
        """Every change published before `at` (this cache's clock) has been applied."""
        self._heard_at = max(self._heard_at, at)

    def suspend(self) -> None:
        """Messages may be missed from now on: forget everything, serve nothing until `heard` again."""
        self.generation += 1
        self._entries.clear()
        self._heard_at = -math.inf

    def __len__(self) -> int:
        return len(self._entries)
