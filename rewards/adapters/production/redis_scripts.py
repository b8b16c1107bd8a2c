"""Lua scripts of the Redis state store: each one changes (or reads) several keys of one project atomically.

They only guard and apply; the domain rules stay in Python (rewards.domain), which reads first and
decides, and a script re-checks whatever a concurrent request could have changed in between. Reads that must be
consistent are scripts too: the store uses no MULTI/WATCH transactions, so that it runs on a Redis Cluster as on
one node (rewards.adapters.production.redis_client). Each script's keys lie in one cluster slot
(tests/adapters/test_redis_cluster.py checks every call the store makes): the webhook queue's global index, in a slot
of its own, is changed by a script of its own (webhook_index) after each project's script.

A state change the warehouse must learn of writes, in the same script, an entry of the project's outbox: the
message to publish (rewards.adapters.production.redis_state), relayed by rewards.adapters.production.outbox_relay if
its request does not publish it. Its undo removes the change and the entry together, and only while the entry is
still its request's (the relay has neither leased nor published it, and no other change was built on it:
outbox_build_on).

Each script is a file of its own in lua/ (its keys and arguments in its first comment lines), read once; a line
`--#include include/NAME.lua` stands for that helper's text (the outbox, the referral chain, Redis time), which this
module's loader puts in its place: Redis runs one self-contained source per script, and Lua has no `require` there.
"""

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from redis.commands.core import AsyncScript

from rewards.adapters.production.redis_client import RedisClient

LUA = Path(__file__).with_name("lua")
_INCLUDE = re.compile(r"^--#include (\S+)$", re.MULTILINE)


@cache
def source(name: str) -> str:
    """The script `name` (lua/NAME.lua) as Redis runs it: its includes replaced by their text, each once."""
    return _with_includes(f"{name}.lua", set())


def _with_includes(path: str, included: set[str]) -> str:
    def include(match: re.Match) -> str:
        helper = match.group(1)
        if helper in included:
            return ""
        included.add(helper)
        return _with_includes(helper, included)

    return _INCLUDE.sub(include, (LUA / path).read_text())


@dataclass(frozen=True)
class Scripts:
    delete_project: AsyncScript
    revoke_key: AsyncScript
    ack_key_change: AsyncScript
    create_affiliate: AsyncScript
    undo_affiliate: AsyncScript
    create_codes: AsyncScript
    undo_codes: AsyncScript
    owner_codes: AsyncScript
    code_by_name: AsyncScript
    read_codes: AsyncScript
    set_max_uses: AsyncScript
    referrer_chains: AsyncScript
    use_code: AsyncScript
    undo_use: AsyncScript
    claim_batch: AsyncScript
    commit_batch: AsyncScript
    abort_batch: AsyncScript
    mark_processed: AsyncScript
    archive_filter_check: AsyncScript
    archive_filter_refeed: AsyncScript
    release_claims: AsyncScript
    register_claim_checks: AsyncScript
    update_claim_checks: AsyncScript
    undo_claim_checks: AsyncScript
    outbox_due_now: AsyncScript
    outbox_delete: AsyncScript
    outbox_lease: AsyncScript
    outbox_touch: AsyncScript
    outbox_index: AsyncScript
    outbox_forget_project: AsyncScript
    create_affiliate_code: AsyncScript
    undo_affiliate_code: AsyncScript
    rename_affiliate_code: AsyncScript
    undo_rename_affiliate_code: AsyncScript
    set_rebate_rate: AsyncScript
    remove_referral: AsyncScript
    undo_remove_referral: AsyncScript
    referral_removal_published: AsyncScript
    block_user: AsyncScript
    unblock_user: AsyncScript
    blocklist_page: AsyncScript
    bind_tracking_id: AsyncScript
    allot: AsyncScript
    allot_tallies: AsyncScript
    release: AsyncScript
    reverse: AsyncScript
    undo_reverse: AsyncScript
    mark_reversed: AsyncScript
    give_back: AsyncScript
    swap_once: AsyncScript
    hold_payouts: AsyncScript
    decide_payouts: AsyncScript
    undo_decide_payouts: AsyncScript
    create_webhook: AsyncScript
    put_webhook: AsyncScript
    webhook_enqueue: AsyncScript
    webhook_lease: AsyncScript
    webhook_settle: AsyncScript
    webhook_page: AsyncScript
    webhook_get: AsyncScript
    webhook_redeliver: AsyncScript
    webhook_forget: AsyncScript
    webhook_sweep: AsyncScript
    webhook_index: AsyncScript
    erasure_request: AsyncScript
    erasure_take: AsyncScript
    erasure_finish: AsyncScript
    erasure_swap: AsyncScript

    @classmethod
    def register(cls, redis: RedisClient) -> "Scripts":
        return cls(**{name: redis.register_script(source(name)) for name in cls.__dataclass_fields__})
