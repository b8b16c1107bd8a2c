"""Secrets at rest (a project's claim signer key): sealed with Fernet when the operator sets REWARDS_SECRETS_KEY.

A sealed value is text, one of
    `fernet:<token>`  the secret encrypted and authenticated (AES-128-CBC + HMAC-SHA256) with the first key of
                      REWARDS_SECRETS_KEY; any of its keys opens it (MultiFernet: put a new key first to rotate,
                      keep the old ones after it until every secret is set again)
    `plain:<hex>`     the secret as it is, when no secrets key is set: the state store's own protection is then the
                      only one (file permissions, Redis ACLs), as for the API keys' hashes beside it

Messages never hold a secret nor a secrets key, so that an error may reach a log."""

from collections.abc import Sequence

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

FERNET, PLAIN = "fernet:", "plain:"


class SecretUnreadable(RuntimeError):
    """A sealed secret this process cannot open: the operator's configuration is wrong (a 500 and a log line, never
    the secret)."""


def _fernet(secrets_keys: Sequence[str]) -> MultiFernet:
    try:
        return MultiFernet([Fernet(key.encode("ascii")) for key in secrets_keys])
    except (ValueError, UnicodeEncodeError):  # their messages name no key, but stay on the safe side
        raise SecretUnreadable(
            "REWARDS_SECRETS_KEY: each comma-separated key must be 32 url-safe base64-encoded bytes "
            "(python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())')"
        ) from None


def seal(secret: bytes, secrets_keys: Sequence[str]) -> str:
    """`secret` as stored: encrypted with the first of `secrets_keys`, or as it is when there is none."""
    if not secrets_keys:
        return PLAIN + secret.hex()
    return FERNET + _fernet(secrets_keys).encrypt(secret).decode("ascii")


def unseal(sealed: str, secrets_keys: Sequence[str]) -> bytes:
    if sealed.startswith(PLAIN):
        return bytes.fromhex(sealed.removeprefix(PLAIN))
    if not sealed.startswith(FERNET):
        raise SecretUnreadable("a stored secret is in no known form")
    if not secrets_keys:
        raise SecretUnreadable("a stored secret is encrypted and REWARDS_SECRETS_KEY is not set")
    try:
        return _fernet(secrets_keys).decrypt(sealed.removeprefix(FERNET).encode("ascii"))
    except InvalidToken:
        raise SecretUnreadable("a stored secret was encrypted with a key REWARDS_SECRETS_KEY does not hold") from None


def is_encrypted(sealed: str) -> bool:
    return sealed.startswith(FERNET)
