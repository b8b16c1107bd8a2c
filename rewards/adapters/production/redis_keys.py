"""The Redis key layout of the state store.

Every key of a project starts with `rw:{<project_id>}:`: the hash tag puts all of a project's keys in
one Redis Cluster slot, so a Lua script may touch any of them. API keys are looked up by key id alone,
so they live outside any project's slot, as do the outbox relay's index of projects, the index of webhook endpoints
with deliveries (its own slot, `{webhooks}`) and the acknowledgements of key changes; a script touches one of these at
a time. (tests/adapters/test_redis_cluster.py checks that every command the store sends keeps to one slot.)

    rw:apikey:<key_id>                   hash    project_id, secret_hash (sha256 hex), scopes, created_ms, revoked_ms
    rw:{p}:project                       hash    name, created_ms, deleted_ms
    rw:{p}:config                        string  the payout configuration (JSON)
    rw:{p}:affiliates                    hash    <user> → affiliate (JSON)
    rw:{p}:code_seq                      string  creation sequence of the project's codes
    rw:{p}:code:<CODE>                   hash    owner, created_ms, max_uses (absent: unlimited), current_uses, seq;
                                                 an affiliate code (API.md §7): chosen (1), rebate_rate, proof (JSON),
                                                 updated_ms, names (JSON list of its former names, once renamed);
                                                 pending: the outbox entry of its creation or last rename (stale
                                                 once that entry is gone: see redis_scripts' outbox_build_on)
    rw:{p}:code_names                    hash    a renamed code's former name → its current name (names stay taken)
    rw:{p}:affiliate_codes               hash    <user> → the name of the user's affiliate code
    rw:{p}:code_uses:<CODE>              list    uses in order, JSON {use_id, user, at, proof}
    rw:{p}:owner_codes:<user>            zset    code → seq
    rw:{p}:referrals                     hash    <user> → JSON {by: <referrer user>, code, at, use: its use's id}
    rw:{p}:referral_removals             hash    <user> → the outbox entry of the removal of the user's referral
                                                 (stale once that entry is gone), which a new use carries
    rw:{p}:dedup:<dedup_id>              string  accepted | processed | failed | pending:<token>; TTL: the claim's
                                                 while pending, the dedup window once accepted, the hot window
                                                 once processed or failed (never past the dedup window)
    rw:{p}:af                            hash    the archive filter's state (redis_state.archive_filter): run (the
                                                 Redis run_id it was fed on), last, cover (since when it holds every
                                                 written id), g, g_start, g_subs, g_n (its current generation), p_subs
    rw:{p}:af:<generation>:<n>           string  a sub-filter: a Bloom filter of 2^(20+n) bits of event ids written to
                                                 `dedup_ids` (TTL: 3 dedup windows from its generation's start)
    rw:{p}:user_events:<user>            set     event names the user has sent (TTL: the dedup window after
                                                 the user's last event)
    rw:{p}:idem:<Idempotency-Key>        hash    body_hash, token (while pending) or response (24 h TTL)
    rw:{p}:claim_check:<id>              string  the ClaimCheckRecord (JSON)
    rw:{p}:claim_signer                  hash    address, sealed_key (rewards.domain.sealing), updated_ms: the
                                                 project's claim signer (API.md §7), never answered
    rw:{p}:outbox                        zset    outbox entry id → due time (ms): when the relay may publish it
    rw:{p}:outbox_records                hash    outbox entry id → the message to publish (dump_records of the
                                                 records of one state change, written by the change's script)
    rw:{p}:track_repeat:<key>            string  a tracking event's exact-repeat key (API.md §7; TTL: 60 s)
    rw:{p}:track_code:<tracking_id>      string  the referral code the tracking id arrived through (TTL: the
                                                 attribution window from the last pageview naming it)
    rw:{p}:track_user:<tracking_id>      string  the tracking id's user, <user> (TTL: the attribution window from
                                                 its last connect_wallet)
    rw:{p}:blocklist                     hash    <user> → the reason it was blocked (JSON: a text or null) (API.md §8)
    rw:{p}:blocklist_by_time             zset    <user> → when it was blocked (ms): the blocklist's pages
    rw:{p}:track_ids:<user>              zset    every tracking id bound to the user → when that binding expires (ms);
                                                 the key's TTL: its latest (API.md §8's self-referral signal)
    rw:{p}:al:deliveries                 hash    delivery token → "<fingerprint>\n<cuts JSON>": its grants under caps
                                                 and budgets (API.md §8) until its rows are written
                                                 (rewards.domain.allotment)
    rw:{p}:al:deliveries_at              zset    delivery token → when granted (ms): grants never forgotten are
                                                 dropped 35 days on
    rw:{p}:reversal:<dedup_id>           string  an event's reversals (API.md §9): JSON {s: its reversed share, d: its
                                                 reversals' digests, e: the outbox entry of the last} (TTL: the dedup
                                                 window after its last reversal)
    rw:{p}:reversal_written:<dedup_id>   string  the share of the event the workers wrote (rewards.domain.reversals.
                                                 share_text: texts compare as shares; TTL: the dedup window)
    rw:{p}:debt:<currency>|<user>        string  units the user owes in a token (a reversal met a closed or claimed
                                                 check), taken from its next checks; gone once settled
    rw:{p}:webhooks                      hash    webhook endpoint id → its document (JSON, its secret sealed) (API.md
                                                 §10; at most 20)
    rw:{p}:held_payout:<payout id>       string  a payout held for an operator's decision (API.md §9): its payouts row
                                                 (JSON); 'decided' once decided (TTL 35 days: a delivery processed
                                                 again never holds it again)
    rw:{p}:debt_calls                    hash    a worker call's token → its answer (claim checks reduced, debts
                                                 added or settled), so a delivery processed again gets the same
    rw:{p}:debt_calls_at                 zset    token → when (ms): answers kept 35 days
    rw:{p}:al:paid                       hash    currency → units paid in it, of a currency with a budget
    rw:{p}:al:released                   zset    expired claim check id → when its units went back to the budget (ms;
                                                 kept 35 days)
    rw:{p}:al:total                      hash    <side>|<n>:<currency>|<user> → units granted all time (capped
                                                 currencies; n: the currency's length in bytes)
    rw:{p}:al:month:<YYYY-MM>            hash    <side>|<n>:<currency>|<user> → units granted in that UTC month (TTL: 35
                                                 days past the month)
    rw:{p}:al:hist:<side>|<n>:<currency>|<user>  zset  "<delivery>#<id>#<ms>|<event ms>:<units>,…" → its latest event
                                                 time (ms): a rolling cap's grants, one member per user and call
                                                 (before tallies: "<payout id>|<units>" → its event time), kept the
                                                 longest window + 35 days
    rw:{p}:wh_deliveries                 hash    webhook delivery id → its document (JSON, webhook_events.
                                                 delivery_to_json; its next attempt: its wh_due score while pending)
                                                 (API.md §10; rewards.adapters.production.redis_state.webhook_queue)
    rw:{p}:wh_due:<endpoint id>          zset    pending delivery id → when it is due, or its lease ends (ms)
    rw:{p}:wh_log:<endpoint id>          zset    "<created_ms, 15 digits>:<delivery id>" of every delivery held, all
                                                 scored 0: listed newest first by lex order
    rw:{p}:wh_done:<endpoint id>         zset    the same member of each finished delivery → its created_ms: the
                                                 newest RETAIN_PER_ENDPOINT kept, swept past RETAIN_MS
    rw:{p}:wh_failing                    hash    endpoint id → since when every attempt of it failed (ms)
    rw:{p}:wh_version                    string  incremented by each change of the project's deliveries: what the
                                                 global index below keeps the newest answer of
    rw:{p}:erasure_salt                  string  its erasure pseudonyms' salt (hex: redis_state.erasures)
    rw:{webhooks}:ready                  zset    "<project_id><US><endpoint id>" → the endpoint's earliest due (ms),
                                                 of the endpoints with deliveries pending: what a lease reads first
    rw:{webhooks}:endpoints              hash    the same member, of every endpoint holding deliveries → "<wh_version
                                                 of its last answer applied>:<its pending deliveries>"
    rw:outbox_projects                   zset    project_id → last touched (ms, Redis time): the projects whose
                                                 outbox the relay reads (rewards.adapters.production.outbox_relay)
    rw:keys:ack:<uuid>                   list    the processes that applied one key change (a few seconds' TTL)
    rw:ingest_owner:<owner>              string  the epoch of the ingest process now holding these Kafka transactional
                                                 ids (<owner>: their prefix); what its successor retires
    rw:retired_epoch:<epoch>             string  "1": that ingest process is dead and what it published is written;
                                                 its pending claims may be taken over (TTL 2 × PENDING_TTL_S)
    rw:keys:changes                      channel key changes, published to every process (not a key)

<user> is `<identifier_type>:<identifier>`; identifier types never contain a colon. <US> is the unit separator, U+001F.
"""

from dataclasses import dataclass

from rewards.domain.payouts import User

PREFIX = "rw"


def user_field(user: User) -> str:
    return f"{user.identifier_type}:{user.identifier}"


def parse_user_field(field: str) -> User:
    identifier_type, identifier = field.split(":", 1)
    return User(identifier, identifier_type)


def api_key(key_id: str) -> str:
    return f"{PREFIX}:apikey:{key_id}"


def outbox_projects() -> str:
    return f"{PREFIX}:outbox_projects"


def ingest_owner(owner: str) -> str:
    return f"{PREFIX}:ingest_owner:{owner}"


def retired_epoch(epoch: str) -> str:
    return f"{PREFIX}:retired_epoch:{epoch}"


WEBHOOK_SLOT = "{webhooks}"  # the global index of webhook endpoints with deliveries: one slot of its own


def webhook_ready() -> str:
    return f"{PREFIX}:{WEBHOOK_SLOT}:ready"


def webhook_endpoints() -> str:
    return f"{PREFIX}:{WEBHOOK_SLOT}:endpoints"


@dataclass(frozen=True)
class ProjectKeys:
    project_id: str

    def _key(self, *parts: str) -> str:
        return ":".join((PREFIX, "{" + self.project_id + "}", *parts))

    def project(self) -> str:
        return self._key("project")

    def config(self) -> str:
        return self._key("config")

    def affiliates(self) -> str:
        return self._key("affiliates")

    def code_seq(self) -> str:
        return self._key("code_seq")

    def code(self, code: str) -> str:
        return self._key("code", code)

    def code_uses(self, code: str) -> str:
        return self._key("code_uses", code)

    def owner_codes(self, owner: User) -> str:
        return self._key("owner_codes", user_field(owner))

    def referrals(self) -> str:
        return self._key("referrals")

    def dedup(self, dedup_id: str) -> str:
        return self._key("dedup", dedup_id)

    def archive_filter(self) -> str:
        """The archive filter's state; its sub-filters are this key with `:<generation>:<n>` (named by its scripts)."""
        return self._key("af")

    def user_events(self, user: User) -> str:
        return self._key("user_events", user_field(user))

    def idempotency(self, key: str) -> str:
        return self._key("idem", key)

    def claim_check(self, check_id: str) -> str:
        return self._key("claim_check", check_id)

    def claim_signer(self) -> str:
        return self._key("claim_signer")

    def outbox(self) -> str:
        return self._key("outbox")

    def outbox_records(self) -> str:
        return self._key("outbox_records")

    def tracking_repeat(self, key: str) -> str:
        return self._key("track_repeat", key)

    def tracking_code(self, tracking_id: str) -> str:
        return self._key("track_code", tracking_id)

    def tracking_user(self, tracking_id: str) -> str:
        return self._key("track_user", tracking_id)

    def tracking_ids(self, user: User) -> str:
        return self._key("track_ids", user_field(user))

    def code_names(self) -> str:
        return self._key("code_names")

    def affiliate_codes(self) -> str:
        return self._key("affiliate_codes")

    def blocklist(self) -> str:
        return self._key("blocklist")

    def blocklist_by_time(self) -> str:
        return self._key("blocklist_by_time")

    def allotment(self, name: str = "") -> str:
        """A key of caps and budgets (`deliveries`, `deliveries_at`, `paid`, `total`), or with no name the prefix of the
        rest (the month and rolling counters, named by the allot script)."""
        return self._key("al", name)

    def referral_removals(self) -> str:
        return self._key("referral_removals")

    def reversal(self, dedup_id: str) -> str:
        return self._key("reversal", dedup_id)

    def reversal_written(self, dedup_id: str) -> str:
        return self._key("reversal_written", dedup_id)

    def debt(self, currency: str, user: User) -> str:
        return self._key("debt", f"{currency}|{user_field(user)}")

    def webhooks(self) -> str:
        return self._key("webhooks")

    def held_payout(self, payout_id: str) -> str:
        return self._key("held_payout", payout_id)

    def debt_calls(self) -> str:
        return self._key("debt_calls")

    def debt_calls_at(self) -> str:
        return self._key("debt_calls_at")

    def webhook_deliveries(self) -> str:
        return self._key("wh_deliveries")

    def webhook_due(self, endpoint_id: str) -> str:
        return self._key("wh_due", endpoint_id)

    def webhook_log(self, endpoint_id: str) -> str:
        return self._key("wh_log", endpoint_id)

    def webhook_done(self, endpoint_id: str) -> str:
        return self._key("wh_done", endpoint_id)

    def webhook_failing(self) -> str:
        return self._key("wh_failing")

    def webhook_version(self) -> str:
        return self._key("wh_version")

    def erasure_salt(self) -> str:
        return self._key("erasure_salt")
