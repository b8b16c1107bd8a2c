"""The state of projects and their people copied into Redis (runtime.moving.state): projects, API keys, payout
configurations and claim signers; affiliates; codes (their names, former names, uses, owners' indexes, the creation
sequence) and referrals; dedup marks, users' event names and Idempotency-Key records; claim checks; tracking bindings;
the blocklist; erasures and their salts. Each key as the Redis store writes it (rewards.adapters.production.redis_keys),
its value encoded by the store's own helpers where it has them, and its time to live from the row's own times.

Not copied, having no SQLite counterpart: the archive filter (absent, it answers "not authoritative" and every fresh id
is asked of the warehouse, as for a new project), the outbox, referral removals awaiting publication, codes' `pending`
entries (an entry that is gone is one published) and the ingest processes' epochs.
"""

import json

from rewards.adapters.embedded.sqlite_state.affiliates import _affiliate
from rewards.adapters.production import redis_keys
from rewards.adapters.production.redis_keys import ProjectKeys, parse_user_field, user_field
from rewards.adapters.production.redis_state.affiliates import _affiliate_json
from rewards.adapters.production.redis_state.base import _json, _ms
from rewards.adapters.production.redis_state.erasures import _US, _by_user, _slot_key
from rewards.domain.payouts import User
from runtime.moving.state import Moving, TableCopy, copy_rows, resealed

_DEDUP_STATUSES = ("accepted", "processed", "failed")  # dedup.processed: 0, 1, 2 (sqlite_state.ingest)


def _user(row, type_column: str = "user_type", id_column: str = "user_id") -> User:
    return User(row[id_column], row[type_column])


def _present(**fields) -> dict:
    """A hash's fields, those that are None left out (the store never writes them)."""
    return {name: value for name, value in fields.items() if value is not None}


# -- projects, API keys, configurations, claim signers --------------------------------------------------------------


async def _projects(moving: Moving) -> int:
    def write(pipe, row):
        fields = _present(name=row["name"], created_ms=row["created_ms"], deleted_ms=row["deleted_ms"])
        pipe.hset(ProjectKeys(row["id"]).project(), mapping=fields)

    return await copy_rows(moving, "SELECT id, name, created_ms, deleted_ms FROM projects", write)


async def _api_keys(moving: Moving) -> int:
    def write(pipe, row):
        fields = _present(
            project_id=row["project_id"],
            secret_hash=bytes(row["secret_hash"]).hex(),
            scopes=_json(json.loads(row["scopes"])),
            created_ms=row["created_ms"],
            revoked_ms=row["revoked_ms"],
        )
        pipe.hset(redis_keys.api_key(row["id"]), mapping=fields)

    return await copy_rows(moving, "SELECT * FROM api_keys", write)


async def _configs(moving: Moving) -> int:
    def write(pipe, row):
        pipe.set(ProjectKeys(row["project_id"]).config(), row["document"])

    return await copy_rows(moving, "SELECT project_id, document FROM configs", write)


async def _claim_signers(moving: Moving) -> int:
    def write(pipe, row):
        sealed_key = resealed(moving, row["sealed_key"])
        fields = {"address": row["address"], "sealed_key": sealed_key, "updated_ms": row["updated_ms"]}
        pipe.hset(ProjectKeys(row["project_id"]).claim_signer(), mapping=fields)

    return await copy_rows(moving, "SELECT * FROM claim_signers", write)


# -- affiliates, codes, code uses, referrals --------------------------------------------------------------------------


async def _affiliates(moving: Moving) -> int:
    def write(pipe, row):
        user = _user(row)
        pipe.hset(ProjectKeys(row["project_id"]).affiliates(), user_field(user), _affiliate_json(_affiliate(user, row)))

    return await copy_rows(moving, "SELECT * FROM affiliates", write)


_CODES = """
SELECT c.*, (SELECT json_group_array(n.name) FROM code_names n WHERE n.project_id = c.project_id AND n.code = c.code)
    AS names
FROM codes c
"""


def _code_fields(row) -> dict:
    names = sorted(json.loads(row["names"]))
    return _present(
        owner=user_field(_user(row, "owner_type", "owner_id")),
        created_ms=row["created_ms"],
        current_uses=row["current_uses"],
        seq=row["seq"],
        max_uses=row["max_uses"],
        chosen=1 if row["chosen"] else None,
        rebate_rate=row["rebate_rate"],  # exact decimal text, as the store writes it (format_amount)
        proof=None if row["proof"] is None else _json(json.loads(row["proof"])),
        updated_ms=row["updated_ms"],
        names=_json(names) if names else None,
    )


async def _codes(moving: Moving) -> int:
    def write(pipe, row):
        k, owner = ProjectKeys(row["project_id"]), _user(row, "owner_type", "owner_id")
        pipe.hset(k.code(row["code"]), mapping=_code_fields(row))
        pipe.zadd(k.owner_codes(owner), {row["code"]: row["seq"]})
        if row["chosen"]:
            pipe.hset(k.affiliate_codes(), user_field(owner), row["code"])

    def write_seq(pipe, row):
        pipe.set(ProjectKeys(row["project_id"]).code_seq(), row["seq"])

    def write_name(pipe, row):
        pipe.hset(ProjectKeys(row["project_id"]).code_names(), row["name"], row["code"])

    copied = await copy_rows(moving, _CODES, write)
    await copy_rows(moving, "SELECT project_id, MAX(seq) AS seq FROM codes GROUP BY project_id", write_seq)
    return copied + await copy_rows(moving, "SELECT project_id, name, code FROM code_names", write_name)


async def _code_uses(moving: Moving) -> int:
    previous = None

    def write(pipe, row):
        nonlocal previous
        key = ProjectKeys(row["project_id"]).code_uses(row["code"])
        if key != previous:  # each list written whole: a move run again after a failure does not repeat its uses
            pipe.delete(key)
            previous = key
        use = {"use_id": row["use_id"], "user": user_field(_user(row)), "at": row["used_ms"]}
        pipe.rpush(key, _json({**use, "proof": json.loads(row["proof"])}))

    # In order of use, as the store appends them (rowid: the order of uses within one ms).
    return await copy_rows(moving, "SELECT rowid, * FROM code_uses ORDER BY project_id, code, used_ms, rowid", write)


# A referral made before its use was recorded beside it: its use found by its time, as sqlite_state's removal does.
_REFERRALS = """
SELECT r.*, COALESCE(r.use_id, (SELECT u.use_id FROM code_uses u WHERE u.project_id = r.project_id
    AND u.code = r.code AND u.user_type = r.user_type AND u.user_id = r.user_id AND u.used_ms = r.referred_ms)) AS use
FROM referrals r
"""


async def _referrals(moving: Moving) -> int:
    def write(pipe, row):
        edge = {
            "by": user_field(_user(row, "referrer_type", "referrer_id")),
            "code": row["code"],
            "at": row["referred_ms"],
        }
        if row["use"] is not None:
            edge["use"] = row["use"]
        pipe.hset(ProjectKeys(row["project_id"]).referrals(), user_field(_user(row)), _json(edge))

    return await copy_rows(moving, _REFERRALS, write)


# -- dedup marks, users' event names, Idempotency-Key records ---------------------------------------------------------


async def _dedup(moving: Moving) -> int:
    """An accepted id lives the dedup window from its acceptance; a processed or failed one the hot window from its
    mark, which SQLite does not keep: its acceptance stands for it (the workers mark within moments). Past the hot
    window the warehouse's `dedup_ids` answers for it, as it would have in production."""
    window_ms = _ms(moving.settings.dedup_window)
    hot_ms = _ms(min(moving.settings.dedup_hot_window, moving.settings.dedup_window))

    def write(pipe, row):
        status = _DEDUP_STATUSES[row["processed"]]
        pipe.set(ProjectKeys(row["project_id"]).dedup(row["dedup_id"]), status, pxat=row["expires_ms"])

    sql = """
    SELECT * FROM (SELECT project_id, dedup_id, processed,
        created_ms + CASE processed WHEN 0 THEN ? ELSE ? END AS expires_ms FROM dedup) WHERE expires_ms > ?
    """
    return await copy_rows(moving, sql, write, (window_ms, hot_ms, moving.now_ms))


async def _user_events(moving: Moving) -> int:
    """A user's set of event names lives the window after the user's last event. Names older than the window are not
    copied (SQLite no longer answers them)."""
    window_ms = _ms(moving.settings.dedup_window)

    def write(pipe, row):
        key = ProjectKeys(row["project_id"]).user_events(_user(row))
        pipe.sadd(key, row["name"])
        pipe.pexpireat(key, row["last_ms"] + window_ms)

    sql = """
    SELECT project_id, user_type, user_id, name,
        MAX(seen_ms) OVER (PARTITION BY project_id, user_type, user_id) AS last_ms
    FROM user_events WHERE seen_ms > ?
    """
    return await copy_rows(moving, sql, write, (moving.now_ms - window_ms,))


async def _idempotency(moving: Moving) -> int:
    ttl_ms = _ms(moving.settings.idempotency_ttl)

    def write(pipe, row):
        key = ProjectKeys(row["project_id"]).idempotency(row["key"])
        pipe.hset(key, mapping={"body_hash": row["body_hash"], "response": bytes(row["response"])})
        pipe.pexpireat(key, row["created_ms"] + ttl_ms)

    sql = "SELECT * FROM idempotency WHERE response IS NOT NULL AND created_ms > ?"
    return await copy_rows(moving, sql, write, (moving.now_ms - ttl_ms,))


# -- claim checks, tracking, blocklist --------------------------------------------------------------------------------


async def _claim_checks(moving: Moving) -> int:
    def write(pipe, row):
        pipe.set(ProjectKeys(row["project_id"]).claim_check(row["id"]), row["record"])  # the same ClaimCheckRecord JSON

    return await copy_rows(moving, "SELECT project_id, id, record FROM claim_checks", write)


_TRACKING_KEYS = {
    "repeat": ProjectKeys.tracking_repeat,
    "code": ProjectKeys.tracking_code,
    "user": ProjectKeys.tracking_user,
}


async def _tracking(moving: Moving) -> int:
    """Bindings of a tracking id (`repeat`, `code`, `user`: a string each) and a user's bindings (`user_tracking`,
    keyed `<user><US><tracking id>`: the user's track_ids zset, kept until its latest expiry)."""

    def write(pipe, row):
        value = "1" if row["kind"] == "repeat" else row["value"]  # a repeat's value: SQLite's token, Redis's "1"
        pipe.set(_TRACKING_KEYS[row["kind"]](ProjectKeys(row["project_id"]), row["key"]), value, pxat=row["expires_ms"])

    def write_user(pipe, row):
        key = ProjectKeys(row["project_id"]).tracking_ids(parse_user_field(row["user"]))
        pipe.zadd(key, {row["value"]: row["expires_ms"]})
        pipe.pexpireat(key, row["latest_ms"])

    bindings = "SELECT * FROM tracking WHERE kind IN ('repeat', 'code', 'user') AND expires_ms > ?"
    copied = await copy_rows(moving, bindings, write, (moving.now_ms,))
    users = """
    SELECT project_id, user, value, expires_ms, MAX(expires_ms) OVER (PARTITION BY project_id, user) AS latest_ms
    FROM (SELECT *, substr(key, 1, instr(key, char(31)) - 1) AS user FROM tracking
          WHERE kind = 'user_tracking' AND expires_ms > ?)
    """
    return copied + await copy_rows(moving, users, write_user, (moving.now_ms,))


async def _blocklist(moving: Moving) -> int:
    def write(pipe, row):
        k, user = ProjectKeys(row["project_id"]), user_field(_user(row))
        pipe.hset(k.blocklist(), user, json.dumps(row["reason"]))
        pipe.zadd(k.blocklist_by_time(), {user: row["created_ms"]})

    return await copy_rows(moving, "SELECT * FROM blocklist", write)


# -- erasures ---------------------------------------------------------------------------------------------------------


async def _erasure_salts(moving: Moving) -> int:
    def write(pipe, row):
        pipe.set(ProjectKeys(row["project_id"]).erasure_salt(), bytes(row["salt"]).hex())

    return await copy_rows(moving, "SELECT * FROM erasure_salts", write)


def _erasure_request(row) -> str:
    request = {
        "type": row["user_type"], "identifier": row["user_id"], "pseudonym": row["pseudonym"],
        "requested_ms": row["requested_ms"], "done_ms": row["done_ms"],
    }  # fmt: skip
    return json.dumps(request)


async def _erasures(moving: Moving) -> int:
    """The requests, in the `{erasures}` slot: each one's JSON; a pending one in `pending` and, until a round took it,
    its user's in `by_user` (a request then answers it); a finished one in `done` (swept 35 days on by a round)."""

    def write(pipe, row):
        member = row["project_id"] + _US + row["id"]
        pipe.hset(_slot_key("requests"), member, _erasure_request(row))
        if row["done_ms"] is not None:
            pipe.zadd(_slot_key("done"), {member: row["done_ms"]})
            return
        pipe.zadd(_slot_key("pending"), {member: row["requested_ms"]})
        if row["taken_ms"] is None:
            pipe.hset(_slot_key("by_user"), _by_user(row["project_id"], _user(row)), member)

    return await copy_rows(moving, "SELECT * FROM erasures", write)


# Projects and API keys last: what the target's check looks for, so a move that failed before them may run again
# (every other copy writes its keys whole, so a second run leaves them as one would).
COPIES: list[TableCopy] = [
    TableCopy(("configs",), _configs),
    TableCopy(("claim_signers",), _claim_signers),
    TableCopy(("affiliates",), _affiliates),
    TableCopy(("codes", "code_names"), _codes),
    TableCopy(("code_uses",), _code_uses),
    TableCopy(("referrals",), _referrals),
    TableCopy(("dedup",), _dedup),
    TableCopy(("user_events",), _user_events),
    TableCopy(("idempotency",), _idempotency),
    TableCopy(("claim_checks",), _claim_checks),
    TableCopy(("tracking",), _tracking),
    TableCopy(("blocklist",), _blocklist),
    TableCopy(("erasure_salts",), _erasure_salts),
    TableCopy(("erasures",), _erasures),
    TableCopy(("api_keys",), _api_keys),
    TableCopy(("projects",), _projects),
]
