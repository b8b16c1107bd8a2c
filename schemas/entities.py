"""The entities the service records, each declared once: its fields, and for each field how the event log's record
carries it, the warehouse column that stores it and how a JSON answer shows it.

Derived from these declarations: the record models of `schemas.records` (a published contract), the warehouse rows
of `stream_workers.rows`, the affiliate object (`rewards.ports.Affiliate`) and the JSON answers that show an entity
as it is (`rewards.domain.affiliates.affiliate_json`, `rewards.domain.claim_checks.check_json`).
tests/schemas/test_entities.py holds the ClickHouse DDL (schemas/clickhouse/*.sql) to the columns declared here.

To add a field: declare it here and, if the warehouse stores it, add its column in a new migration. A record is a
published contract: a field added to one has a default (the records already on the log lack it), and a field is
never removed or changed.
"""

import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, make_dataclass
from typing import Any

REQUIRED = ...  # the default of a field that has none (pydantic's mark)
LOW_CARDINALITY = "LowCardinality(String)"
TIME_COLUMN = "DateTime64(3, 'UTC')"

# How a field's value changes between the record, its column and a JSON answer.
PLAIN = "plain"  # it does not
TIME = "time"  # epoch milliseconds in the record; a DateTime64 column; ISO 8601 in an answer
DOCUMENT = "document"  # a JSON value (a dict) in the record; its JSON text in the column
EACH = "each"  # a list in the record; the warehouse stores one row per item, each item in the column


@dataclass(frozen=True)
class Field:
    name: str  # in the record
    type: Any  # in the record
    column: str | None = "String"  # the ClickHouse type of the column that stores it (None: not stored)
    column_name: str = ""  # "": `name`
    default: Any = REQUIRED
    kind: str = PLAIN
    answer_name: str | None = ""  # its name in a JSON answer ("": `name`; None: not shown)
    user: str | None = None  # the user this field is half of (`<user>_identifier`, `<user>_identifier_type`)

    def __post_init__(self):
        if not self.column_name:
            object.__setattr__(self, "column_name", self.name)
        if self.answer_name == "":
            object.__setattr__(self, "answer_name", self.name)


PROJECT_ID = Field("project_id", str, answer_name=None)


def optional_text(name: str) -> Field:
    return Field(name, str | None, "Nullable(String)", default=None)


def time_ms(name: str, column_name: str, optional: bool = False) -> Field:
    """A time in epoch milliseconds: its column and its answer named `column_name`."""
    names = {"column_name": column_name, "answer_name": column_name, "kind": TIME}
    if optional:
        return Field(name, int | None, f"Nullable({TIME_COLUMN})", default=None, **names)
    return Field(name, int, TIME_COLUMN, **names)


def document(name: str) -> Field:
    return Field(name, dict, default={}, kind=DOCUMENT)


def user(name: str, column_prefix: str = "") -> tuple[Field, Field]:
    """A user's two fields, `<name>_identifier` and `<name>_identifier_type`, stored as `<column_prefix>_...`."""
    prefix = column_prefix or name
    return (
        Field(f"{name}_identifier", str, column_name=f"{prefix}_identifier", user=name),
        Field(f"{name}_identifier_type", str, LOW_CARDINALITY, column_name=f"{prefix}_identifier_type", user=name),
    )


@dataclass(frozen=True)
class Entity:
    type: str  # the record's `type` on the log
    record_name: str  # its model in schemas.records
    table: str  # the warehouse table of its rows
    fields: tuple[Field, ...]
    doc: str | None = None  # the record model's docstring
    # Columns not carried by the record, name → type: the warehouse fills them (DEFAULT), or the workers derive them.
    computed_columns: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def stored(self) -> tuple[Field, ...]:
        return tuple(field for field in self.fields if field.column is not None)

    @property
    def defaults(self) -> dict[str, Any]:
        return {field.name: field.default for field in self.fields if field.default is not REQUIRED}

    def columns(self) -> dict[str, str]:
        """The table's columns, name → ClickHouse type as system.columns writes it."""
        return {**{field.column_name: field.column for field in self.stored}, **self.computed_columns}

    @functools.cached_property
    def answer(self) -> Callable[[Mapping[str, Any], Callable[[int], str]], dict]:
        """answer(values, time_text): the entity as a JSON answer shows it, from its record fields' `values` (times
        as `time_text` writes them). Compiled: a page of a listing answers many."""
        items = [f"{field.answer_name!r}: {_answered(field)}" for field in self.fields if field.answer_name is not None]
        return compiled("answer(values, time_text)", "{" + ", ".join(items) + "}", {})

    @functools.cached_property
    def values_of(self) -> Callable[[object], dict]:
        """values_of(entity): the record fields but the project's, of an object of `object_class()`. Compiled."""
        items = [f"{field.name!r}: entity.{_attribute(field)}" for field in self.fields if field is not PROJECT_ID]
        return compiled("values_of(entity)", "{" + ", ".join(items) + "}", {})

    def attributes(self, user_type: type) -> dict[str, Any]:
        """What an object of the entity holds, name → type: its fields but the project's, a user's two as one."""
        attributes: dict[str, Any] = {}
        for field in self.fields:
            if field.user is not None:
                attributes[field.user] = user_type
            elif field is not PROJECT_ID:
                attributes[field.name] = field.type
        return attributes

    def object_class(self, name: str, user_type: type, module: str) -> type:
        """A frozen dataclass of `attributes()`, in the order of the fields."""
        cls = make_dataclass(name, list(self.attributes(user_type).items()), frozen=True)
        cls.__module__ = module
        return cls


def _answered(field: Field) -> str:
    """The expression of a field's value in a JSON answer."""
    value = f"values[{field.name!r}]"
    if field.kind != TIME:
        return value
    return f"time_text({value})" if field.default is REQUIRED else f"None if {value} is None else time_text({value})"


def _attribute(field: Field) -> str:
    """Where an object of the entity holds the field: a user's two as `<user>.identifier(_type)`."""
    return field.name if field.user is None else f"{field.user}.{field.name.removeprefix(field.user + '_')}"


def compiled(signature: str, expression: str, namespace: dict[str, Any]) -> Callable:
    """The function `def <signature>: return <expression>`, compiled once: a function derived from the declarations
    that costs what one written out would (dataclasses derives its __init__ the same way). `namespace`: the globals
    the expression uses."""
    name = signature.partition("(")[0]
    code = compile(f"def {signature}:\n    return {expression}\n", f"<derived {name}>", "exec")
    exec(code, namespace)
    return namespace[name]


CONVERSION = Entity(
    "conversion",
    "ConversionRecord",
    table="conversions",
    fields=(
        PROJECT_ID,
        Field("batch_id", str),
        Field("dedup_id", str),
        Field("name", str),
        *user("user"),
        time_ms("timestamp_ms", "timestamp"),
        time_ms("received_ms", "received_at"),
        document("args"),
        document("metadata"),
    ),
    # The args' amounts as the volume and revenue figures count them, under the project's configuration of the moment
    # (stream_workers.rows.counted_columns; migration 012).
    computed_columns={"counted_volume": "Decimal(76, 18)", "counted_revenue": "Decimal(76, 18)"},
)

# A code's use: the referral of its user by its owner.
CODE_USE = Entity(
    "code_use",
    "CodeUseRecord",
    table="referrals",
    fields=(
        PROJECT_ID,
        Field("use_id", str),
        Field("code", str),
        *user("owner", column_prefix="referrer"),
        *user("user"),
        time_ms("used_at_ms", "referred_at"),
        # the code's limit when used: the workers refuse a use past it (absent: none)
        Field("max_uses", int | None, column=None, default=None),
    ),
)

CODES_CREATED = Entity(
    "codes_created",
    "CodesCreatedRecord",
    table="referral_codes",
    doc="Referral codes created for an owner (the affiliate listing searches them).",
    fields=(
        PROJECT_ID,
        Field("codes", list[str], column_name="code", kind=EACH),
        *user("owner"),
        time_ms("created_at_ms", "created_at"),
    ),
)

AFFILIATE = Entity(
    "affiliate",
    "AffiliateRecord",
    table="affiliates",
    fields=(
        PROJECT_ID,
        Field("id", str),
        *user("user"),
        optional_text("name"),
        Field("status", str, LOW_CARDINALITY),
        optional_text("region"),
        optional_text("audience"),
        Field("tax_status", str, LOW_CARDINALITY),
        optional_text("tier"),
        time_ms("created_at_ms", "created_at"),
    ),
    computed_columns={"user_key": "UInt128"},
)

CLAIM_CHECK = Entity(
    "claim_check",
    "ClaimCheckRecord",
    table="claim_checks",
    doc="The whole state of a claim check after a change (closed, claimed); `version` orders the changes.",
    fields=(
        PROJECT_ID,
        Field("id", str),
        *user("user"),
        Field("currency_address", str),
        Field("currency_chain_id", int, "Int64"),
        Field("currency_name", str),
        Field("currency_decimals", int, "UInt8"),
        Field("amount", str, "UInt256"),  # raw integer in the token's smallest unit
        Field("reason", str, LOW_CARDINALITY),  # affiliate_payout | end_user_payout
        Field("status", str, LOW_CARDINALITY),  # open | closed | claimed | expired
        optional_text("hash"),
        Field("source_id", str, answer_name=None),
        time_ms("created_at_ms", "created_at"),
        time_ms("claimed_at_ms", "claimed_at", optional=True),
        Field("version", int, "UInt32", answer_name=None),
        # When a check closed under claim_check_expiry expires (API.md §8); null: never. (Last: added by migration 014.)
        time_ms("expires_at_ms", "expires_at", optional=True),
    ),
)

# A tracking event of the published client (API.md §7: a pageview, a connect_wallet, or another name that does not
# pay): no dedup id, its user only when the request names one (else ''), the time the service received it.
TRACKING_EVENT = Entity(
    "tracking_event",
    "TrackingEventRecord",
    table="tracking_events",
    doc="A tracking event of the published client (API.md §7): a pageview, a connect_wallet, or another name that "
    "does not pay.",
    fields=(
        PROJECT_ID,
        Field("id", str),  # the service's id of the request
        Field("name", str),
        Field("tracking_id", str),  # metadata.tracking_id: the browser's id
        Field("user_identifier", str, default="", user="user"),
        Field("user_identifier_type", str, LOW_CARDINALITY, default="", user="user"),
        # The referral code the event counts for ('' none): the code a pageview names (a click), the code whose
        # use a connect_wallet made (an attribution).
        Field("code", str, default=""),
        time_ms("received_ms", "received_at"),
        document("args"),
        document("metadata"),
        optional_text("signature"),
        optional_text("signature_message"),
        optional_text("signature_public_key"),
        Field("account_chain_id", int | None, "Nullable(Int64)", default=None),
    ),
)

# A user's referral removed (API.md §7 `deleteReferral`): the user may be referred again; what was paid stays. The
# warehouse counts it out of the referrer's and the code's referred users (schemas/clickhouse/007_*.sql).
REFERRAL_REMOVAL = Entity(
    "referral_removed",
    "ReferralRemovedRecord",
    table="referral_removals",
    doc="A user's referral removed (API.md §7 deleteReferral): the user may be referred again; payouts made stay.",
    fields=(
        PROJECT_ID,
        Field("id", str),  # the removal's own id
        Field("use_id", str),  # the code use that made the referral ('' if the state store does not know it)
        Field("code", str),  # the code the referral was through (one of its names)
        *user("referrer"),
        *user("user"),
        time_ms("referred_at_ms", "referred_at"),  # when the referral was made (the referrals row's referred_at)
        time_ms("removed_at_ms", "removed_at"),
    ),
)

# A share of an event's payouts taken back (API.md §9: a refund, a chargeback, a cancelled order). The state store
# settles an event's reversals in order: `reversed_before` and `reversed_after` are the event's reversed share before
# and after this one, from which the workers take back each payout's part exactly (rewards.domain.reversals).
REVERSAL = Entity(
    "reversal",
    "ReversalRecord",
    table="reversals",
    doc="A share of an event's payouts taken back (API.md §9): the event's reversed share goes from reversed_before "
    "to reversed_after (decimal strings, 0 to 1).",
    fields=(
        PROJECT_ID,
        Field("id", str),  # the reversal's own id
        Field("dedup_id", str),  # its event's
        Field("reason", str),
        Field("fraction", str, "Decimal(76, 18)"),
        Field("reversed_before", str, "Decimal(76, 18)"),
        Field("reversed_after", str, "Decimal(76, 18)"),
        time_ms("reversed_at_ms", "reversed_at"),
    ),
)

# An operator's decision on a payout held for approval (API.md §9): `payout` is the payout as its event paid it (its
# payouts row), which the workers then pay (approved) or refuse (rejected, `rejected_by_operator`).
PAYOUT_DECISION = Entity(
    "payout_decision",
    "PayoutDecisionRecord",
    table="payout_decisions",
    doc="An operator's decision on a payout held for approval (API.md §9): approved (then paid) or rejected.",
    fields=(
        PROJECT_ID,
        Field("id", str),  # the decision's own id
        Field("payout_id", str),
        Field("decision", str, LOW_CARDINALITY),  # approved | rejected
        optional_text("reason"),
        time_ms("decided_at_ms", "decided_at"),
        document("payout"),
    ),
)

ENTITIES = (
    CONVERSION, CODE_USE, CODES_CREATED, AFFILIATE, CLAIM_CHECK, TRACKING_EVENT, REFERRAL_REMOVAL, REVERSAL,
    PAYOUT_DECISION,
)  # fmt: skip
