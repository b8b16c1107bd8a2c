"""The ports: one small interface per engine role, each with an embedded and a production adapter.

- StateStore: Redis's role (keys, configuration, referral codes and graph, dedup, idempotency), the union of
  one small port per aggregate: ProjectStore, AffiliateStore, ReferralStore, IngestStore, ClaimCheckStore,
  TrackingStore, IntegrityStore, AllotmentStore, ReversalStore, ApprovalStore, WebhookStore, ErasureStore.
  A caller that needs one aggregate takes its port; tests/contract/ holds the contract of each.
- EventLog / EventSource: Kafka's role (the durable log between the ingest edge and the workers).
- Warehouse: ClickHouse's role (conversions, payouts and the materialized views read by queries).
- PlanStore: where the workers record each batch's end before writing it (stream_workers.plans says why).

A batch is accepted inside `StateStore.ingest(...)`: the claim of its dedup ids and its publication
on the log succeed together or not at all (an exception inside the block undoes the claim). Every
other state change that the warehouse must learn of (codes, code uses, affiliates, claim checks) is
a context manager of the same kind, yielding a `Change`: the caller publishes its `payload` inside the
block, and the change and its payload reach the log together (the embedded store: that publish joins its
SQLite transaction; the production store: its change script also writes the payload to an outbox, which a
relay publishes if the caller dies before it does, or fails in a way that may have published it: then the
change is not undone, the block's exception is swallowed so the request succeeds, and the workers drop a
repeat).

Every failure of `EventLog.publish` raises `LogUnavailable`, whatever the engine: raised inside such a
block it undoes the block's change (unless, as above, the change stands), and the HTTP services answer it 503
with `Retry-After` (`rewards.web.handlers`), so a client's retry of the same request is safe.
"""

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Generic, Protocol, TypeVar

from rewards.domain.affiliates import Affiliate, Figures
from rewards.domain.allotment import Ask, Grant, Limits, Tally
from rewards.domain.claim_checks import ClaimCheck
from rewards.domain.claim_signing import StoredSigner
from rewards.domain.erasure import Erasure
from rewards.domain.payout_config import PayoutConfig
from rewards.domain.payouts import User
from rewards.domain.referrals import CodeRecord, CodeStats
from rewards.domain.reversals import Owed, Reversal, TakeBack
from rewards.domain.tracking import CodeTraffic
from rewards.domain.webhook_events import Delivery as WebhookDelivery
from rewards.domain.webhooks import Attempt, Endpoint
from schemas.records import AnyRecord, CodeUseRecord

Record = AnyRecord
_T = TypeVar("_T")


@dataclass(frozen=True)
class Principal:
    key_id: str
    project_id: str
    scopes: frozenset[str]
    project_deleted: bool


@dataclass(frozen=True)
class ProjectInfo:
    project_id: str
    name: str
    created_ms: int
    deleted_ms: int | None


@dataclass(frozen=True)
class KeyInfo:
    """What an operator may see of an API key: never its secret, nor its hash."""

    key_id: str
    scopes: tuple[str, ...]
    created_ms: int
    revoked_ms: int | None


@dataclass(frozen=True)
class Referral:
    code: str
    referrer: User
    referred_at_ms: int


@dataclass(frozen=True)
class Change(Generic[_T]):
    """What a state change's block sees: `value`, and `payload`, the one message to publish in the block
    (`schemas.records.dump_records` of the change's records), None when nothing changed. The payload may begin with
    the records of an earlier change this one depends on whose publish is still pending (the production store makes
    that change stand, e.g. a referral removal before the user's new use): publish it whole, in its order."""

    value: _T
    payload: bytes | None


@dataclass
class IngestClaim:
    replay: bytes | None = None  # the stored response of an earlier request with this Idempotency-Key
    fresh: list[int] = field(default_factory=list)  # indexes of the batch's events whose dedup ids were new
    response: bytes | None = None  # what to store for the Idempotency-Key, set by the caller

    def respond(self, body: bytes) -> None:
        self.response = body


class ProjectStore(Protocol):
    """Projects, their API keys and their payout configuration."""

    async def create_project(self, name: str) -> str: ...
    async def delete_project(self, project_id: str) -> bool: ...
    async def project_exists(self, project_id: str) -> bool: ...
    async def get_project(self, project_id: str) -> ProjectInfo | None:
        """The project, deleted or not; None if it never existed."""

    async def list_projects(self) -> list[ProjectInfo]:
        """Every project, deleted ones too, oldest first (an operator's listing: on Redis, a scan of the keyspace)."""

    async def create_key(self, project_id: str, scopes: Sequence[str]) -> str: ...
    async def revoke_key(self, api_key: str) -> bool: ...
    async def revoke_key_id(self, key_id: str) -> bool:
        """Revoke the key of this id (an operator who lost the key itself); False if unknown or already revoked."""

    async def list_keys(self, project_id: str) -> list[KeyInfo]:
        """The project's keys, revoked ones too, oldest first (on Redis, a scan of the keyspace)."""

    async def resolve_key(self, api_key: str) -> Principal | None: ...
    async def get_config(self, project_id: str) -> PayoutConfig: ...
    async def put_config(self, project_id: str, config: PayoutConfig) -> None: ...
    async def put_claim_signer(self, project_id: str, signer: StoredSigner | None) -> None:
        """Keep the project's claim signer (API.md §7: its address, and its key as rewards.domain.sealing sealed it),
        apart from the configuration document; None removes it."""

    async def get_claim_signer(self, project_id: str) -> StoredSigner | None: ...


class AffiliateStore(Protocol):
    def create_affiliate(self, project_id: str, affiliate: Affiliate) -> AbstractAsyncContextManager[Change[bool]]:
        """value: whether the affiliate was created (False: the user is one already, nothing to publish);
        payload: its AffiliateRecord."""

    async def get_affiliate(self, project_id: str, user: User) -> Affiliate | None: ...
    async def affiliates_among(self, project_id: str, users: Sequence[User]) -> dict[User, Affiliate]:
        """The affiliates among `users`, in one round trip (users who are not affiliates are left out)."""


class ReferralStore(Protocol):
    """Referral codes and the referral graph their uses make."""

    def create_codes(
        self, project_id: str, owner: User, quantity: int, max_uses: int | None
    ) -> AbstractAsyncContextManager[Change[list[CodeRecord]]]:
        """value: the new codes; payload: their CodesCreatedRecord."""

    async def list_codes(
        self, project_id: str, owner: User, offset: int, limit: int
    ) -> tuple[list[CodeRecord], int]: ...
    async def codes_of(self, project_id: str, owners: Sequence[User]) -> dict[User, list[str]]:
        """The codes of each owner, newest first (owners without codes are left out)."""

    async def get_code(self, project_id: str, code: str) -> CodeRecord | None: ...
    async def set_max_uses(self, project_id: str, code: str, max_uses: int | None) -> CodeRecord: ...
    def use_code(
        self, project_id: str, code: str, user: User, proof: dict
    ) -> AbstractAsyncContextManager[Change[tuple[CodeRecord, CodeUseRecord]]]:
        """value: the code after the use, and the use; payload: the use (its CodeUseRecord)."""

    async def referral_of(self, project_id: str, user: User) -> Referral | None: ...
    async def referrer_chains(self, project_id: str, users: Sequence[User], depth: int) -> dict[User, list[User]]:
        """Each user's referrers, nearest first, up to `depth` (stopping at the top or at a cycle), in one
        round trip; a user nobody referred gets []."""

    # Affiliate codes (API.md §7): a code chosen by its owner, one per user, in the namespace of referral codes.

    def create_affiliate_code(
        self, project_id: str, owner: User, code: str, rebate_rate: Decimal | None, proof: dict
    ) -> AbstractAsyncContextManager[Change[CodeRecord]]:
        """Create `owner`'s affiliate code `code` (rewards.domain.codes.is_affiliate_code; without limit of uses), with
        the signature fields `proof` stored beside it. Raises CodeInUse when a code of the project has that name or
        had it, AddressInUse when the owner has an affiliate code already. payload: its CodesCreatedRecord."""

    def rename_affiliate_code(
        self, project_id: str, owner: User, code: str, proof: dict
    ) -> AbstractAsyncContextManager[Change[CodeRecord]]:
        """Give `owner`'s affiliate code the name `code`: everything of it (uses, referrals, rebate rate) stays, and its
        former names stay its own (they still find it; the warehouse's figures of the code are under all of them).
        Raises AffiliateCodeNotFound when the owner has none, CodeInUse when another code has or had the name.
        payload: a CodesCreatedRecord of the new name (the listing searches it), None when the name is unchanged."""

    async def set_rebate_rate(
        self, project_id: str, owner: User, code: str, rebate_rate: Decimal | None, proof: dict
    ) -> CodeRecord:
        """Set the rebate rate of `owner`'s code `code` (any of its names); AffiliateCodeNotFound when it is not
        the owner's. Only conversions processed after the change pay it."""

    def remove_referral(
        self, project_id: str, user: User, code: str, referrer: User
    ) -> AbstractAsyncContextManager[Change[Referral]]:
        """Remove `user`'s referral, which must be by `referrer` through `code` (any of its names), else
        ReferralNotFound: the user may be referred again. The code's uses stay counted (its max_uses caps uses).
        value: the referral removed; payload: its ReferralRemovedRecord."""

    async def referrals_among(self, project_id: str, users: Sequence[User]) -> dict[User, Referral]:
        """The referral of each of `users` who has one (their codes by their current names), in a round trip or two."""

    async def rebate_rates(self, project_id: str, codes: Sequence[str]) -> dict[str, Decimal]:
        """The rebate rate of each of `codes` (current names, as referrals_among gives them) that has one."""


class IngestStore(Protocol):
    """Events: the claim of a batch's dedup ids and Idempotency-Key, and what became of each event."""

    def ingest(
        self,
        project_id: str,
        dedup_ids: list[str],
        users_and_names: list[tuple[User, str]],
        idempotency: tuple[str, str] | None,
    ) -> AbstractAsyncContextManager[IngestClaim]:
        """An Idempotency-Key already used with another body raises IdempotencyKeyReused."""

    async def event_status(self, project_id: str, dedup_id: str) -> str | None:
        """accepted | processed | failed, or None when the project never accepted it."""

    async def has_event(self, project_id: str, user: User, name: str) -> bool: ...
    async def mark_processed(self, project_id: str, dedup_ids: list[str]) -> None: ...
    async def mark_failed(self, project_id: str, dedup_ids: list[str]) -> None:
        """The events were set aside as dead letters: their status is `failed` from now on."""

    async def processed_among(self, project_id: str, dedup_ids: list[str]) -> set[str]:
        """Those of `dedup_ids` already processed or failed: a record published twice is handled once."""


class ClaimCheckStore(Protocol):
    async def register_claim_checks(self, project_id: str, checks: Sequence[ClaimCheck]) -> None:
        """Add checks opened by the workers; a check already known is left as it is."""

    def update_claim_checks(
        self,
        project_id: str,
        ids: Sequence[str],
        change: Callable[[ClaimCheck], ClaimCheck],
        owner: User | None,
    ) -> AbstractAsyncContextManager[Change[list[ClaimCheck]]]:
        """Apply `change` to every check of `ids` (of `owner` when given), all or none; the block sees
        the changed checks (value) and their ClaimCheckRecords (payload). An unknown id raises
        ClaimCheckNotFound; `change` may raise a conflict."""

    async def get_claim_checks(self, project_id: str, ids: Sequence[str]) -> list[ClaimCheck]:
        """The current state of each of `ids` that the project has, in their order (unknown ids are left out)."""


class TrackingStore(Protocol):
    """What the tracking events of the published client (API.md §7) remember, each for a bounded time (its TTL,
    given by the caller): the exact repeats of the last minute, and the referral code and the user each tracking id
    was bound to (the attribution window)."""

    def first_within(self, project_id: str, key: str, window_s: float) -> AbstractAsyncContextManager[bool]:
        """Record `key` for `window_s` unless it is recorded; the block sees whether this call recorded it (False: a
        repeat within the window). If the block raises, the record is forgotten (what it published did not reach the
        log), unless the exception says the publication may have gone through (`maybe_published`)."""

    async def bind_code(self, project_id: str, tracking_id: str, code: str, ttl_s: float) -> None:
        """The tracking id arrived through `code`, for `ttl_s` (a later code replaces it: the last one named wins)."""

    async def bind_user(self, project_id: str, tracking_id: str, user: User, ttl_s: float) -> str | None:
        """The tracking id is `user`'s, for `ttl_s` (a later user replaces it); returns the code it arrived through,
        None if none (or that binding has expired)."""

    async def tracked_user(self, project_id: str, tracking_id: str) -> User | None:
        """The user the tracking id is bound to, None if none (or that binding has expired)."""

    async def tracking_ids_of(self, project_id: str, users: Sequence[User]) -> dict[User, set[str]]:
        """Every tracking id each user was bound to whose binding has not expired (a later user replacing it on the
        tracking id leaves it among the first user's): users with none are left out."""


@dataclass(frozen=True)
class BlockedUser:
    user: User
    reason: str | None
    created_ms: int


class IntegrityStore(Protocol):
    """A project's blocklist (API.md §8): read by the workers for every delivery, so a change applies to everything
    processed after it."""

    async def block_user(self, project_id: str, user: User, reason: str | None) -> BlockedUser:
        """Put `user` on the blocklist (again: its reason replaced, its time kept)."""

    async def unblock_user(self, project_id: str, user: User) -> bool:
        """Take `user` off the blocklist; False if it was not on it."""

    async def blocklist_page(self, project_id: str, offset: int, limit: int) -> tuple[list[BlockedUser], int]:
        """A page of the blocklist, the latest blocked first, and how many it holds."""

    async def blocklisted_among(self, project_id: str, users: Sequence[User]) -> set[User]:
        """Those of `users` on the blocklist."""


class AllotmentStore(Protocol):
    """The counters of caps and budgets (API.md §8) and their one atomic step: rewards.domain.allotment's rule, run
    where the counters are, so that no number of workers ever lets a cap or budget be exceeded."""

    async def allot_tallies(
        self,
        project_id: str,
        delivery: str,
        limits: Limits,
        tallies: Sequence[Tally],
        seeds: Mapping[str, int] | None = None,
    ) -> list[str]:
        """Each tally's verdict (rewards.domain.allotment.allot_tallies: WHOLE, EXHAUSTED or ONE_BY_ONE), the WHOLE ones
        counted, in one atomic step; kept under `delivery` like `allot`'s grants. Raises UnseededBudgets, counting
        nothing, when a budget's paid counter is absent and `seeds` (units paid, by currency) does not give it."""

    async def allot(
        self,
        project_id: str,
        delivery: str,
        limits: Limits,
        asks: Sequence[Ask],
        seeds: Mapping[str, int] | None = None,
    ) -> list[Grant]:
        """Each ask's grant (rewards.domain.allotment.allot_each: one after the other), decided and counted in one
        atomic step, and kept under the delivery's token: the same delivery asking the same again gets the same
        grants, counted once (asking otherwise, it is counted again: more than was paid, never less). Raises
        UnseededBudgets as `allot_tallies` does."""

    async def forget_grants(self, project_id: str, deliveries: Sequence[str]) -> None:
        """Drop the grants of deliveries whose rows are written (their records are then never computed again)."""

    async def release(self, project_id: str, check_id: str, currency: str, units: int) -> bool:
        """An expired claim check's units back to its currency's budget (its paid counter, if it has one, never below
        0), once per check id (remembered for RELEASES_KEPT_MS); True when this call released it."""

    async def give_back(self, project_id: str, token: str, limits: Limits, tallies: Sequence[Tally]) -> bool:
        """A reversal's units back to caps and budgets (rewards.domain.allotment.given_back), once per `token`
        (remembered RELEASES_KEPT_MS); a counter never goes below 0, and one that does not exist stays so. True when
        this call gave them back."""

    async def budgets_paid(self, project_id: str, currencies: Sequence[str]) -> dict[str, int]:
        """The units each of `currencies` counts paid, of those with a paid counter."""

    async def reset_budgets(self, project_id: str, currencies: Sequence[str]) -> None:
        """Drop the paid counters of `currencies` (a budget set or removed: the next payout seeds it again)."""


class ReversalStore(Protocol):
    """Reversals (API.md §9): each event's reversed share and the reversals applied to it (their digests), kept for
    the dedup window after its last reversal."""

    def reverse(
        self, project_id: str, reversals: Sequence[Reversal], reversed_at_ms: int
    ) -> AbstractAsyncContextManager[Change[int]]:
        """Settle `reversals` against their events' shares (rewards.domain.reversals.settle), all or none: the block
        sees how many were newly applied (value) and their ReversalRecords (payload; None when none was). Raises
        PastWhole or TooMany naming an event."""

    async def take_back(
        self, project_id: str, token: str, items: Sequence[TakeBack]
    ) -> tuple[list[ClaimCheck], list[int]]:
        """Token payouts' parts taken back (rewards.domain.reversals.take_back), atomically and once per `token` (the
        same answer again, kept 35 days): the open checks reduced (their new versions, stored) and each item's debt
        added."""

    async def settle_debts(self, project_id: str, token: str, asks: Sequence[Owed]) -> list[int]:
        """New checks' amounts against their recipients' debts (rewards.domain.reversals.settle_debts), atomically
        and once per `token`: what each settles."""

    async def mark_reversed(self, project_id: str, shares: Mapping[str, Decimal]) -> None:
        """The workers wrote the reversals of each event up to its share in `shares` (a share never goes down)."""

    async def reversed_shares(self, project_id: str, dedup_ids: Sequence[str]) -> dict[str, Decimal]:
        """The share written (mark_reversed) of each of `dedup_ids` that has one: GET /events/status answers
        `reversed` or `partially_reversed` once the figures show it."""


class ApprovalStore(Protocol):
    """Payouts held for an operator's decision (API.md §9), each decided once: a decided payout stays known as such
    (35 days), so a delivery processed again never holds it again."""

    async def hold_payouts(self, project_id: str, held: Sequence[dict]) -> None:
        """Hold payouts (their pending_payouts rows, by `payout_id`); one held or decided already is left as it is."""

    def decide_payouts(
        self, project_id: str, payout_ids: Sequence[str], decision: str, reason: str | None, decided_at_ms: int
    ) -> AbstractAsyncContextManager[Change[int]]:
        """Decide each of `payout_ids` (approved or rejected), all or none: NotPending names the first that is not
        held (unknown, or decided already). The block sees how many (value) and their PayoutDecisionRecords."""


class WebhookStore(Protocol):
    """A project's webhook endpoints (API.md §10), their secrets sealed (rewards.domain.sealing)."""

    async def create_webhook(self, project_id: str, endpoint: Endpoint) -> None:
        """Add it; TooManyEndpoints when the project has MAX_ENDPOINTS already (checked atomically)."""

    async def list_webhooks(self, project_id: str) -> list[Endpoint]:
        """Every endpoint of the project, oldest first."""

    async def get_webhook(self, project_id: str, endpoint_id: str) -> Endpoint | None: ...

    async def put_webhook(self, project_id: str, endpoint: Endpoint) -> bool:
        """Replace an endpoint that exists (False: none has its id)."""

    async def delete_webhook(self, project_id: str, endpoint_id: str) -> bool: ...


class WebhookQueue(Protocol):
    """Webhook deliveries (API.md §10, rewards.domain.webhook_events.Delivery): a queue per endpoint, each ordered by
    when its deliveries are due, and the log of recent ones the API lists. A delivery is known by its project and id
    (its `webhook-id`); endpoint ids are unique across projects."""

    async def enqueue(self, deliveries: Sequence[WebhookDelivery]) -> int:
        """Hold each delivery (pending, due at its `next_attempt_ms`) unless one with its project and id is held
        already, whatever its state: the log read again after a crash enqueues nothing twice. How many were new."""

    async def lease(
        self, now_ms: int, limit: int, per_endpoint: int, busy: Mapping[str, int], lease_ms: int
    ) -> list[WebhookDelivery]:
        """Up to `limit` pending deliveries due by `now_ms`, each endpoint's earliest due first, at most
        `per_endpoint` minus `busy.get(endpoint id, 0)` (its attempts in flight in this process) of an endpoint, so
        an endpoint with a long backlog never fills the batch. Each comes back due at `now_ms + lease_ms` (its
        lease, in the store too): not leased again before then unless settled, so a dispatcher that died mid-send
        leaves it to be tried again after its lease."""

    async def settle(self, deliveries: Sequence[WebhookDelivery], now_ms: int) -> dict[str, int | None]:
        """Record attempted deliveries as they now are (rewards.domain.webhook_events.after_attempt: succeeded,
        pending and due again, or failed); a delivery no longer held (its endpoint deleted) is not made again. For
        each endpoint among them: since when every attempt of it failed (None: the last succeeded), kept across
        calls; finished deliveries past RETAIN_PER_ENDPOINT of their endpoint are let go, oldest first."""

    async def list_deliveries(
        self, project_id: str, endpoint_id: str, offset: int, limit: int
    ) -> tuple[list[WebhookDelivery], int]:
        """A page of an endpoint's deliveries, newest first (by creation time, then id, both descending): up to
        `limit` of them past the first `offset`; and how many deliveries the endpoint holds in all."""

    async def get_delivery(self, project_id: str, endpoint_id: str, delivery_id: str) -> WebhookDelivery | None: ...

    async def redeliver(
        self, project_id: str, endpoint_id: str, delivery_id: str, now_ms: int
    ) -> WebhookDelivery | None:
        """A delivery pending again, due now with 3 days of retries (rewards.domain.webhook_events.redelivered);
        None: the endpoint holds no delivery of that id."""

    async def forget_endpoint(self, project_id: str, endpoint_id: str) -> None:
        """Every delivery of a deleted endpoint, and its failing-since time, gone."""

    async def sweep_deliveries(self, now_ms: int) -> int:
        """Finished deliveries created more than RETAIN_MS ago let go; how many."""

    async def pending_deliveries(self) -> int:
        """Deliveries pending across every project (a gauge)."""


class WebhookSender(Protocol):
    """Calls of a customer's webhook URL (API.md §10), guarded: rewards.adapters.webhook_sender."""

    async def send(self, url: str, secret: str, webhook_id: str, body: bytes) -> Attempt:
        """POST one signed message; what came of it (never raises for the receiver's doing)."""

    async def close(self) -> None:
        """Its kept connections closed."""


class ErasureStore(Protocol):
    """Erasures (API.md §11): the requests, and the state store's half of carrying one out (the warehouse's is
    rewards.adapters.warehouse_erasure; stream_workers.erasures runs both with the writers held)."""

    async def request_erasure(self, project_id: str, user: User) -> str:
        """Record a request to erase `user` (its pseudonym made from the project's salt, made on first use); its id.
        A user whose request is pending and not yet taken by a round gets that request's id."""

    async def erasure_status(self, project_id: str, erasure_id: str) -> str | None:
        """`pending` or `done`; None if the project has no such erasure (or it finished more than 35 days ago)."""

    async def take_erasures(self, limit: int) -> list[Erasure]:
        """Up to `limit` pending erasures of every project, the oldest first (taken before: again, until done), each
        now taken: a request for the same user made after this is a new one."""

    async def erase_users(self, project_id: str, renames: Mapping[User, User]) -> None:
        """Every user of `renames` renamed to its pseudonym wherever the store holds it (keys, values and the
        documents it keeps), in one atomic change; a pseudonym already held (a user erased before, back since) takes
        the renamed user's data beside its own."""

    async def finish_erasures(self, erasures: Sequence[Erasure]) -> None:
        """Mark them done, forgetting the identifiers they held; drop those done more than 35 days ago."""


class WriterHold(Protocol):
    """Holding the warehouse's writers of every process still (the production shape's; the embedded default holds
    its one worker with a lock): rewards.adapters.production.writer_hold."""

    def writing(self) -> AbstractAsyncContextManager:
        """A writer's lease for one write (its `check()` raises once the lease may be gone: no insert after that):
        waits while the writers are held."""

    def held(self) -> AbstractAsyncContextManager:
        """Every writer still until the block ends (WritersHeldElsewhere: another holder has them)."""

    async def close(self) -> None: ...


class WritersHeldElsewhere(Exception):
    """Another process holds the warehouse's writers still (its erasure runs): try again later."""


class StateStore(
    ProjectStore,
    AffiliateStore,
    ReferralStore,
    IngestStore,
    ClaimCheckStore,
    TrackingStore,
    IntegrityStore,
    AllotmentStore,
    ReversalStore,
    ApprovalStore,
    WebhookStore,
    WebhookQueue,
    ErasureStore,
    Protocol,
):
    """Every aggregate of Redis's role, in one engine: what each adapter implements."""

    async def ping(self) -> None: ...
    async def close(self) -> None: ...


class Unavailable(Exception):
    """A request refused because an engine did not take or answer it, or the pipeline is too far behind: nothing
    changed, and the same request may be sent again. The HTTP layer answers every kind alike (one handler in
    rewards.web.handlers): 503, `Retry-After`, and the kind's `answer`."""

    answer = "Service Unavailable: retry later"
    log_line: str | None = None  # logged as a warning with each refusal (None: the refusal is not logged)


class LogUnavailable(Unavailable):
    """The event log did not take a publication, or cannot tell whether it did (its answer was lost):
    what every `EventLog.publish` raises on failure. The state-store block around the publish undoes
    its change; the HTTP layer answers 503 with `Retry-After`."""

    answer = "Service Unavailable: the event log did not take the write; nothing changed, retry later"
    log_line = "event log unavailable; answered 503"


class EventLog(Protocol):
    """The producer side. Inside `StateStore.ingest`/`use_code`, publication joins their transaction."""

    shards: int  # how many partitions one project's conversions spread over (schemas.topics.shard_of); 1: none

    async def publish(self, project_id: str, payload: bytes) -> None:
        """Publish one message: a batch of records as `schemas.records` serializes them (dump_records), in its
        project's order. Raises LogUnavailable when the message is not (or not surely) published."""

    async def publish_shards(self, project_id: str, payloads: dict[int, bytes]) -> None:
        """Publish one message per shard (0 <= shard < `shards`), all or none: a batch's conversions, spread."""


@dataclass(frozen=True)
class Delivery:
    token: str  # stable across redeliveries: the warehouse's insert deduplication token
    records: list[Record]


class EventSource(Protocol):
    """The consumer side: deliveries in log order, at least once, until committed."""

    async def poll(self, max_deliveries: int, timeout_s: float) -> list[Delivery]: ...
    async def commit(self, deliveries: Sequence[Delivery]) -> None: ...


class DeadLetterLog(Protocol):
    """Where the workers also publish what they set aside (the warehouse's `dead_letters` table holds it
    in any case): the production shape's `rewards.events.dlq` topic. At least once."""

    async def publish(self, dead_letters: list[dict]) -> None:
        """Publish `dead_letters` rows (stream_workers.rows.dead_letter_row), one message each."""


class DedupArchive(Protocol):
    """The dedup ids the warehouse holds (`dedup_ids`, fed by the workers' inserts), for a state store that
    keeps exact ids for a short hot window only (Redis): past it, the archive answers until the dedup window
    ends. The embedded store keeps its whole window itself and has none."""

    async def known_among(self, project_id: str, dedup_ids: Sequence[str], window_s: float) -> dict[str, str]:
        """Those of `dedup_ids` first accepted within the last `window_s`: id → `processed` | `failed`.
        Raises ArchiveUnavailable when the warehouse does not answer."""

    async def written_since(self, project_id: str, since_ms: int) -> list[str]:
        """The event ids written with an acceptance after `since_ms`: what re-feeds an archive filter (Redis
        restarted: rewards.adapters.production.redis_state.archive_filter)."""

    async def close(self) -> None: ...


class ArchiveUnavailable(Unavailable):
    """The dedup archive (the warehouse's `dedup_ids`) did not answer: the batch is refused whole (503, `Retry-After`),
    its claims undone; answered and logged as the warehouse's outage, not the log's (an operator looks at the engine
    that failed)."""

    answer = "Service Unavailable: the dedup archive (the warehouse) did not answer; nothing changed, retry later"
    log_line = "dedup archive (warehouse) unavailable; answered 503"


class AffiliateFigures(Protocol):
    """What a user earned and brought as an affiliate so far (the warehouse's views): what the ingest edge answers
    beside a registration (a user may have referred and earned before registering)."""

    async def all_time(self, project_id: str, user: User) -> Figures: ...


class CodeTrafficFigures(Protocol):
    """Referral codes' figures from tracking events (the warehouse's `code_traffic` views): clicks and attributions."""

    async def of_codes(self, project_id: str, codes: Sequence[str]) -> dict[str, CodeTraffic]:
        """Each code's figures so far (zeros for a code without any)."""


class CodeFigures(Protocol):
    """Referral and affiliate codes' figures from the warehouse (its `code_stats` view): users referred through each
    code (less those whose referral was removed) and what its owner earned through it."""

    async def of_codes(self, project_id: str, codes: Sequence[CodeRecord]) -> dict[str, CodeStats]:
        """Each code's figures (by its current name), summed over all its names; zeros for a code without any."""


class Warehouse(Protocol):
    async def migrate(self) -> None:
        """Bring the schema to the latest migration (rewards/adapters/migrations.py), recording each one applied."""

    async def insert(self, table: str, rows: list[dict], dedup_token: str) -> None: ...
    async def query(self, sql: str, params: dict | None = None) -> list[dict]: ...
    async def command(self, sql: str) -> None:
        """Run one statement that answers no rows (DDL, `INSERT ... SELECT`): a migration's steps."""

    async def close(self) -> None: ...


class PlanStore(Protocol):
    """Batch plans (stream_workers.plans): where each batch of a partition ends, recorded before it is written."""

    async def claim(self, key: str, last_offset: int) -> tuple[int, bool]:
        """Record `last_offset` as the end of the batch `key` unless one is recorded already.
        Returns the recorded end and whether it was recorded by this call."""

    async def close(self) -> None: ...
