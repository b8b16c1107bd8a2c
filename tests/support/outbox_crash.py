"""A process killed (SIGKILL) inside a state change's block, before it publishes (tests/adapters/test_redis_outbox.py):
`python -m tests.support.outbox_crash REDIS_URL PROJECT_ID CHANGE ARGS_JSON DUE_S`. It writes the change's payload
on stdout first, so the test knows what the relay must publish. CHANGE and ARGS_JSON:

    use_code          {"code": ..., "user": ...}
    create_codes      {"owner": ..., "quantity": ...}
    create_affiliate  {"user": ...}
    close_checks      {"owner": ..., "ids": [...]}

Users are evm addresses. DUE_S: how long the entry is the request's own (OUTBOX_DUE_S), short in tests.
"""

import asyncio
import json
import os
import signal
import sys

from rewards.adapters.production import redis_state
from rewards.adapters.production.redis_state import base as redis_state_base
from rewards.domain import claim_checks
from rewards.domain.payouts import User
from rewards.ports import Affiliate


def _user(identifier: str) -> User:
    return User(identifier, "evm_address")


def _block(store, project_id: str, change: str, args: dict):
    if change == "use_code":
        return store.use_code(project_id, args["code"], _user(args["user"]), {})
    if change == "create_codes":
        return store.create_codes(project_id, _user(args["owner"]), args["quantity"], None)
    if change == "create_affiliate":
        user = _user(args["user"])
        affiliate = Affiliate(f"evm_address:{user.identifier}", user, "Crash", "active", None, None, "missing", None, 1)
        return store.create_affiliate(project_id, affiliate)
    if change == "close_checks":
        return store.update_claim_checks(project_id, args["ids"], claim_checks.close, _user(args["owner"]))
    raise SystemExit(f"unknown change {change!r}")


async def main(redis_url: str, project_id: str, change: str, args: dict, due_s: float) -> None:
    redis_state_base.OUTBOX_DUE_S = due_s
    store = await redis_state.open_redis_state(redis_url)
    async with _block(store, project_id, change, args) as changed:
        sys.stdout.buffer.write(changed.payload)
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)  # between the change and its publish


if __name__ == "__main__":
    redis_url, project_id, change, args, due_s = sys.argv[1:]
    asyncio.run(main(redis_url, project_id, change, json.loads(args), float(due_s)))
