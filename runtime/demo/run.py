"""The demo's steps: a fresh project made in the state store (as `rewards project create`, `key create` and
`project claim-signer` make one), then everything else through the HTTP API of the running server, as a shop's own
back end would: the configuration, affiliates and their codes, code uses, conversions, closing and claiming claim
checks. Each step shows a progress bar on stderr."""

import math
import random
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from tqdm import tqdm

from ingest_api.projects.service import put_claim_signer
from rewards.domain.claim_signing import InvalidSignerKey, SignerKey
from rewards.domain.timestamps import now_ms
from runtime.demo import program
from runtime.demo.client import ApiError, Client, DemoError
from runtime.demo.program import CONFIG, PROJECT_NAME, People, who

BATCH = 100  # events per POST /events/batch: the contract's most
BATCHES_PER_KEY = 10  # a key sends 10 batches a minute (API.md §0): the demo sends with one ingestion key per 10
CLOSING_USERS = 4  # affiliates whose open claim checks are closed; the first one's are then claimed
PROCESSING_TIMEOUT_S = 300.0

# Runs an async action on the server's state store (runtime.commands.common.with_state) and answers its result.
OnState = Callable[[Callable], object]


@dataclass(frozen=True)
class Setup:
    project_id: str
    service_key: str
    ingest_keys: list[str]  # SendTrackingEvent keys, revoked once the conversions are in
    signer_address: str


def run(url: str, conversions: int, seed: int, on_state: OnState, secrets_keys: Sequence[str]) -> dict:
    """Build the demo project on the server at `url`; answers what to open it with."""
    client = Client(url)
    client.check_server()
    rng = random.Random(seed)
    group = program.people(rng)
    events = program.conversions(rng, group, conversions, now_ms())
    batches = [events[i : i + BATCH] for i in range(0, len(events), BATCH)]
    keys = math.ceil(len(batches) / BATCHES_PER_KEY)
    setup = on_state(partial(_create_project, ingest_keys=keys, secrets_keys=secrets_keys))
    api = client.with_key(setup.service_key)
    try:
        _configure(api, url)
        _build_referrals(api, group)
        _send(client, setup.ingest_keys, batches)
        _wait_processed(api, batches)
        closed, claimed = _settle_claim_checks(api, group, rng)
    except BaseException:  # a demo half made is no demo: its project goes (its keys then answer 404), and it says so
        on_state(partial(_delete_project, setup.project_id))
        print(f"rewards demo: the half-made project {setup.project_id} was deleted", file=sys.stderr)
        raise
    finally:
        on_state(partial(_revoke, setup.ingest_keys))
    return {
        "project_id": setup.project_id,
        "project_name": PROJECT_NAME,
        "api_key": setup.service_key,
        "console_url": f"{client.base_url}/console",
        "claim_signer_address": setup.signer_address,
        "affiliates": len(group.affiliates),
        "users": len(group.users()),
        "conversions": len(events),
        "claim_checks": {"closed": closed, "claimed": claimed},
    }


async def _create_project(state, ingest_keys: int, secrets_keys: Sequence[str]) -> Setup:
    project_id = await state.create_project(PROJECT_NAME)
    try:
        service_key = await state.create_key(project_id, ["service_role"])
        keys = [await state.create_key(project_id, ["SendTrackingEvent"]) for _ in range(ingest_keys)]
        signer = _random_signer()  # kept sealed in the state store only, as `rewards project claim-signer` keeps it
        await put_claim_signer(state, project_id, signer, secrets_keys)
    except BaseException:
        await state.delete_project(project_id)  # its keys answer 404 from now on
        raise
    return Setup(project_id, service_key, keys, signer.address)


async def _delete_project(project_id: str, state) -> None:
    await state.delete_project(project_id)


def _random_signer() -> SignerKey:
    while True:
        try:
            return SignerKey(secrets.token_bytes(32))
        except InvalidSignerKey:  # past the curve's order: about one draw in 2^128
            continue


async def _revoke(api_keys: list[str], state) -> None:
    for api_key in api_keys:
        await state.revoke_key(api_key)


def _progress(description: str, total: int, unit: str) -> tqdm:
    return tqdm(total=total, desc=description, unit=unit, file=sys.stderr)


def _configure(api: Client, url: str) -> None:
    try:
        api.put("/projects/config", CONFIG)
    except ApiError as exc:
        if exc.status != 401:
            raise
        raise DemoError(
            f"the server at {url} does not know the key just made: it runs on another data dir or state store"
            " (pass its --data-dir, or the REDIS_URL of the production shape)"
        ) from exc


def _build_referrals(api: Client, group: People) -> None:
    """Registers the affiliates, gives each a referral code, and uses the codes: each affiliate below the top uses
    its recruiter's, each referred end user its affiliate's."""
    uses = [(a.recruiter, a.address) for a in group.affiliates if a.recruiter]
    uses += [(affiliate, user) for affiliate, users in group.referred.items() for user in users]
    with _progress("referrals", 2 * len(group.affiliates) + len(uses), "call") as bar:
        codes = {}
        for affiliate in group.affiliates:
            api.post("/affiliates", {**who(affiliate.address), **affiliate.attributes})
            codes[affiliate.address] = api.post("/referral_codes", {**who(affiliate.address), "quantity": 1})[0]["code"]
            bar.update(2)
        for owner, user in uses:
            api.patch(f"/referral_codes/{codes[owner]}/use", who(user))
            bar.update(1)


def _send(client: Client, ingest_keys: list[str], batches: list[list[dict]]) -> None:
    with _progress("conversions", sum(map(len, batches)), "event") as bar:
        for n, batch in enumerate(batches):
            client.with_key(ingest_keys[n // BATCHES_PER_KEY]).post("/events/batch", {"events": batch})
            bar.update(len(batch))


def _wait_processed(api: Client, batches: list[list[dict]]) -> None:
    """Until every batch's last event is processed (its payouts queryable)."""
    pending = [batch[-1]["dedup_id"] for batch in batches]
    deadline = time.monotonic() + PROCESSING_TIMEOUT_S
    with _progress("processing", len(pending), "batch") as bar:
        while pending:
            done = [d for d in pending if api.get("/events/status", dedup_id=d)["status"] == "processed"]
            bar.update(len(done))
            pending = [d for d in pending if d not in done]
            if pending and time.monotonic() > deadline:
                raise DemoError(f"{len(pending)} batches not processed in {PROCESSING_TIMEOUT_S:.0f} s")
            if pending:
                time.sleep(0.2)


def _settle_claim_checks(api: Client, group: People, rng: random.Random) -> tuple[int, int]:
    """The newest open claim checks (a page: up to 100) of the first CLOSING_USERS affiliates that have some, from the
    top of the tree down, are closed as a payout run would close them; the first one's are then claimed, as a chain
    indexer reports a claim."""
    closed: list[list[str]] = []
    with _progress("claim checks", CLOSING_USERS + 1, "user") as bar:
        for affiliate in group.affiliates:
            listed = api.get("/claim-checks/rewards-payouts", status="open", page_size=100, **who(affiliate.address))
            ids = [check["id"] for check in listed["results"]]
            if ids:
                api.post("/claim-checks/close", {**who(affiliate.address), "claim_check_ids": ids})
                closed.append(ids)
                bar.update(1)
            if len(closed) == CLOSING_USERS:
                break
        if not closed:
            return 0, 0
        claim = {"hash": program.transaction_hash(rng), "claim_check_ids": closed[0]}
        claimed = api.post("/claim-checks/claims", claim)["claimed"]
        bar.update(1)
    return sum(map(len, closed)), claimed
