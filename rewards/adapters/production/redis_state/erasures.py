"""ErasureStore on Redis: the requests in a slot of their own (`{erasures}`), and a project's keys rewritten.

The requests: `rw:{erasures}:requests` (hash `<project><US><id>` → JSON {type, identifier (null once done),
pseudonym, requested_ms, done_ms}), `rw:{erasures}:pending` (zset of the pending ones → requested_ms),
`rw:{erasures}:by_user` (hash `<project><US><type>:<identifier>` → the pending request's id), `rw:{erasures}:done`
(zset → done_ms: swept 35 days on); each project's salt in `rw:{p}:erasure_salt`. A change of them is one script.

Erasing walks the project's keys once (SCAN `rw:{p}:*`, skipping by name the keys that never name a user: dedup marks,
filters, configuration), whatever the number of users in the batch; the values of each page of keys are read in one
pipelined round trip per kind (the project's big hashes field by field, by HSCAN), and rewritten, each atomically by a
compare-and-set script (the value must still be what was read, else it is read again): key names
ending in a user (`owner_codes:`, `user_events:`, `track_ids:`, `al:hist:…|<user>`, `debt:…|<user>`) renamed, merged
into the pseudonym's if it has one (sets and sorted sets: their union, the longer time to live; a debt: the sum);
hash fields and sorted-set members that are a user (affiliates, referrals, blocklist, caps' counters, …) renamed,
meeting the pseudonym's own (a user erased before, back since): caps' counters add up, anything else keeps the
pseudonym's; every JSON value (claim checks, held payouts, code uses, webhook deliveries, stored answers, outbox
records) with the identifiers replaced (rewards.domain.erasure.rewrite_json_text), and what the user signed dropped.
Unlike the SQLite adapter's one transaction, a reader may see part of it for the pass's moment; the workers are held
meanwhile (stream_workers.erasures), and each key is whole at every moment.
"""

import json
import re
from collections.abc import Mapping, Sequence

from rewards.adapters.production.redis_keys import PREFIX, ProjectKeys
from rewards.adapters.production.redis_state.base import RedisStateBase, StateChanging
from rewards.domain import erasure
from rewards.domain.erasure import Erasure
from rewards.domain.payouts import User
from rewards.domain.timestamps import now_ms

_SLOT = "{erasures}"
_US = "\x1f"
_SCAN_COUNT = 1000
_ATTEMPTS = 20
# Keys named after a user: the name's tail is `<user>` (after the prefix) or `…|<user>`.
_USER_NAMED = ("owner_codes:", "user_events:", "track_ids:", "al:hist:", "debt:")
# What a key of the layout (redis_keys) is, by its name: read without asking Redis (a name not here is asked).
_KINDS = (
    ("claim_check:", "string"),
    ("held_payout:", "string"),
    ("track_user:", "string"),
    ("code_uses:", "list"),
    ("code:", "small hash"),
    ("idem:", "small hash"),
    ("al:month:", "hash"),
    ("blocklist_by_time", "zset"),
)
# Keys that never name a user (dedup marks, filters, configuration, indexes by id or time): not read.
_NEVER_NAMED = {
    "af",
    "config",
    "project",
    "code_seq",
    "claim_signer",
    "webhooks",
    "outbox",
    "al:deliveries_at",
    "al:released",
    "al:paid",
    "debt_calls_at",
    "wh_failing",
    "wh_version",
    "erasure_salt",
    "code_names",
}
_NEVER_PREFIXED = ("dedup:", "af:", "track_repeat:", "reversal:", "reversal_written:", "wh_due:", "wh_log:", "wh_done:")
# Compare-and-set of one key's part. ARGV[1]: the kind. KEYS[1]: the key (KEYS[2]: a renamed key's new name).


def _slot_key(name: str) -> str:
    return f"{PREFIX}:{_SLOT}:{name}"


class RedisErasureStore(RedisStateBase):
    """The production adapter of rewards.ports.ErasureStore."""

    async def request_erasure(self, project_id: str, user: User) -> str:
        salt_key = ProjectKeys(project_id).erasure_salt()
        await self._redis.set(salt_key, erasure.new_salt().hex(), nx=True)
        salt = bytes.fromhex(_text(await self._redis.get(salt_key)))
        erasure_id = erasure.new_erasure_id()
        request = {
            "type": user.identifier_type, "identifier": user.identifier,
            "pseudonym": erasure.pseudonym(salt, user).identifier, "requested_ms": now_ms(), "done_ms": None,
        }  # fmt: skip
        keys = [_slot_key("requests"), _slot_key("pending"), _slot_key("by_user")]
        args = [project_id + _US + erasure_id, _by_user(project_id, user), json.dumps(request), request["requested_ms"]]
        member = await self._scripts.erasure_request(keys=keys, args=args)
        return (member.decode() if isinstance(member, bytes) else member).split(_US, 1)[1]

    async def erasure_status(self, project_id: str, erasure_id: str) -> str | None:
        stored = await self._redis.hget(_slot_key("requests"), project_id + _US + erasure_id)
        if stored is None:
            return None
        return "pending" if json.loads(stored)["done_ms"] is None else "done"

    async def take_erasures(self, limit: int) -> list[Erasure]:
        keys = [_slot_key("requests"), _slot_key("pending"), _slot_key("by_user")]
        flat = await self._scripts.erasure_take(keys=keys, args=[limit, _US])
        found = []
        for member, text in zip(flat[::2], flat[1::2], strict=True):
            project_id, erasure_id = _text(member).split(_US, 1)
            r = json.loads(text)
            user = User(r["identifier"], r["type"])
            found.append(Erasure(project_id, erasure_id, user, User(r["pseudonym"], r["type"]), r["requested_ms"]))
        return found

    async def finish_erasures(self, erasures: Sequence[Erasure]) -> None:
        keys = [_slot_key("requests"), _slot_key("pending"), _slot_key("by_user"), _slot_key("done")]
        args: list = [now_ms(), erasure.DONE_KEPT_MS]
        for e in erasures:
            args += [e.project_id + _US + e.id, _by_user(e.project_id, e.user)]
        await self._scripts.erasure_finish(keys=keys, args=args)

    async def erase_users(self, project_id: str, renames: Mapping[User, User]) -> None:
        texts = erasure.document_renames(renames)
        prefix = ProjectKeys(project_id)._key("")
        page: list[str] = []
        async for name in self._redis.scan_iter(match=_glob(prefix) + "*", count=_SCAN_COUNT):
            page.append(_text(name))
            if len(page) >= _SCAN_COUNT:
                await self._erase_page(prefix, page, texts)
                page = []
        await self._erase_page(prefix, page, texts)

    async def _erase_page(self, prefix: str, keys: list[str], texts: Mapping[str, str]) -> None:
        """One SCAN page: names renamed; the values of the others read in one pipelined round trip per kind (small
        keys whole, the project's big hashes field by field) and swapped where they name a user."""
        read = []
        for key in keys:
            tail = key[len(prefix) :]
            if tail.startswith(_USER_NAMED):
                renamed = _renamed_tail(tail, texts)
                if renamed is not None:
                    await self._rename_key(key, prefix + renamed)
            elif tail not in _NEVER_NAMED and not tail.startswith(_NEVER_PREFIXED):
                read.append(key)
        by_kind: dict[str, list[str]] = {}
        unknown = [key for key in read if _kind_of(key[len(prefix) :]) is None]
        kinds = dict(zip(unknown, await self._each(unknown, lambda pipe, key: pipe.type(key)), strict=True))
        for key in read:
            by_kind.setdefault(_kind_of(key[len(prefix) :]) or _text(kinds[key]), []).append(key)
        strings = by_kind.get("string", [])
        values = await self._redis.mget(strings) if strings else []  # one slot: the project's
        for key, value in zip(strings, values, strict=True):
            await self._rewrite_string(key, value, texts)
        lists = by_kind.get("list", [])
        for key, items in zip(lists, await self._each(lists, lambda pipe, key: pipe.lrange(key, 0, -1)), strict=True):
            await self._rewrite_list(key, items, texts)
        small = by_kind.get("small hash", [])
        for key, fields in zip(small, await self._each(small, lambda pipe, key: pipe.hgetall(key)), strict=True):
            for field, value in fields.items():
                await self._rewrite_field(key, _text(field), value, texts, counters=False)
            owner = fields.get(b"owner", fields.get("owner"))
            if owner is not None and erasure.renamed_field(_text(owner), texts) is not None:
                await self._redis.hdel(key, "proof")  # what the owner signed: dropped (erasure.PROOF_KEYS)
        for key in by_kind.get("hash", []):
            tail = key[len(prefix) :]
            counters = tail == "al:total" or tail.startswith("al:month:")
            async for field, value in self._redis.hscan_iter(key, count=_SCAN_COUNT):
                await self._rewrite_field(key, _text(field), value, texts, counters)
        for key in by_kind.get("zset", []):
            async for member, _ in self._redis.zscan_iter(key, count=_SCAN_COUNT):
                if (new := erasure.renamed_field(_text(member), texts)) is not None:
                    await self._swap(key, ["member", _text(member), new])

    async def _each(self, keys: list[str], command) -> list:
        if not keys:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            for key in keys:
                command(pipe, key)
            return await pipe.execute()

    async def _swap(self, key: str, args: list):
        """A compare-and-set: 0 when the value changed since it was read (a writer outside the held workers, the
        API): the caller reads it again."""
        return await self._scripts.erasure_swap(keys=[key], args=args)

    async def _rewrite_string(self, key: str, value, texts: Mapping[str, str]) -> None:
        for _ in range(_ATTEMPTS):
            if value is None or (new := erasure.renamed_text(_text(value), texts)) is None:
                return
            if await self._swap(key, ["string", _text(value), new]) == 1:
                return
            value = await self._redis.get(key)
        raise StateChanging(f"erasure: {key} kept changing")

    async def _rewrite_list(self, key: str, items: list, texts: Mapping[str, str]) -> None:
        for _ in range(_ATTEMPTS):
            swapped = True
            for index, item in enumerate(items):
                if (new := erasure.renamed_text(_text(item), texts)) is not None:
                    swapped = await self._swap(key, ["item", index, _text(item), new]) == 1 and swapped
            if swapped:
                return
            items = await self._redis.lrange(key, 0, -1)
        raise StateChanging(f"erasure: {key} kept changing")

    async def _rename_key(self, key: str, renamed: str) -> None:
        for _ in range(_ATTEMPTS):
            answer = await self._swap_pair(key, renamed, ["rename"])
            if not isinstance(answer, list):
                return
            mine, theirs = (_text(value) for value in answer)  # two debts of one currency: one, their sum
            if await self._swap_pair(key, renamed, ["sum", mine, theirs, str(int(mine) + int(theirs))]) == 1:
                return
        raise StateChanging(f"erasure: {key} kept changing")

    async def _swap_pair(self, key: str, renamed: str, args: list):
        return await self._scripts.erasure_swap(keys=[key, renamed], args=args)

    async def _rewrite_field(self, key: str, field: str, value, texts: Mapping[str, str], counters: bool) -> None:
        """One field of a hash: renamed if it is a user (or ends in one), its value rewritten if it names one. A
        renamed field meeting the pseudonym's own: a counter (`counters`: caps' units) adds into it, anything else
        keeps the pseudonym's."""
        new_field = erasure.renamed_counter(field, texts) or erasure.renamed_field(field, texts)
        for _ in range(_ATTEMPTS):
            if value is None:
                return
            value = _text(value)
            new_value = erasure.renamed_text(value, texts)
            if new_field is None and new_value is None:
                return
            theirs = None if new_field is None else await self._redis.hget(key, new_field)
            if theirs is not None:
                theirs = _text(theirs)
                new_value = str(int(theirs) + int(value)) if counters else theirs
            args = ["field", field, value, new_field or field, new_value or value, theirs or ""]
            if await self._swap(key, args) == 1:
                return
            value = await self._redis.hget(key, field)
        raise StateChanging(f"erasure: {key} kept changing")


def _kind_of(tail: str) -> str | None:
    return next((kind for prefix, kind in _KINDS if tail.startswith(prefix)), None)


def _by_user(project_id: str, user: User) -> str:
    return f"{project_id}{_US}{user.identifier_type}:{user.identifier}"


def _glob(text: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _renamed_tail(tail: str, texts: Mapping[str, str]) -> str | None:
    """The name of a key named after a user, renamed: `<prefix><user>`, `al:hist:<side>|<n>:<currency>|<user>`,
    `debt:<currency>|<user>` (an address: no `|` in it, where an email may hold one)."""
    for prefix in _USER_NAMED:
        if tail.startswith(prefix):
            rest = tail[len(prefix) :]
            if prefix == "al:hist:":
                renamed = erasure.renamed_counter(rest, texts)
            elif prefix == "debt:":
                currency, bar, user = rest.partition("|")
                renamed = currency + bar + texts[user] if bar and ":" in user and user in texts else None
            else:
                renamed = texts.get(rest) if ":" in rest else None
            return None if renamed is None else prefix + renamed
    return None
