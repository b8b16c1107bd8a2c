"""The JSON answers, documented (OpenAPI only): the field types of the contract, and the shapes both APIs answer.

Documentation only: an operation names its answer's model in `responses=` (rewards.web.openapi.success), never as a
`response_model`, so no answer goes through these models. Handlers build their answers as dicts and write them as they
are (exact decimals as JSON numbers through rewards.web.numbers.ExactJSONResponse, or as strings): the models must
follow them, and the fuzz (tests/web/test_fuzz.py) holds every answer to its schema.

An answer's example is assembled from its fields' examples (a nested answer's from its own), so each value is written
once, where its field is declared."""

from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, Field, GetJsonSchemaHandler
from pydantic.fields import FieldInfo
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from rewards.domain.identifiers import IDENTIFIER_TYPES

# Realistic values of the examples: Alice (an EVM address) refers Bob (an email), who buys.
ALICE = "0x00000000000000000000000000000000000a11ce"
BOB = "bob@example.com"
CODE = "Q7K2M9X"  # a generated code: 7 characters of A-Z 0-9
TIME = "2026-11-22T09:12:03.123Z"
USDC = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
CHECK_ID = "0193a5b2-7c1e-7d4f-9a2b-3c4d5e6f7a8b"
TX_HASH = "0x5c504ed432cb51138bcf09aa5e8a410dd4a1e204ef84bfed1be16dfba1b22060"
PROJECT_ID = "3f2b8c1e-5d4a-4f6b-9c7d-2e1a0b9c8d7f"

EXACT = (
    "an exact decimal written as a JSON number, digit for digit (never rounded through a float; up to 18 "
    "fractional digits): parse it as a decimal to keep every digit"
)
DECIMAL_TEXT = r"^[0-9]+(\.[0-9]+)?$"
RAW_TEXT = r"^[0-9]+$"

IdentifierType = Literal[IDENTIFIER_TYPES]


def text(meaning: str, example: object, **options) -> Any:
    """A field of an answer, its meaning and an example; `default=None`: a key the answer holds only sometimes."""
    return Field(description=meaning, examples=[example], **options)


def exact_number(meaning: str, example: float | int = 12.5, **options) -> Any:
    """A field holding an exact decimal the published client declares `number` (rewards.web.numbers)."""
    return text(f"{meaning}: {EXACT}", example, json_schema_extra={"format": "decimal"}, **options)


def decimal_text(meaning: str, example: str = "12.5", **options) -> Any:
    """A field holding an amount as the contract writes it (API.md §0): a decimal string, no exponent, no trailing
    zeros."""
    described = f"{meaning}: an exact decimal as a string (no exponent, no trailing zeros)"
    return text(described, example, pattern=DECIMAL_TEXT, **options)


def raw_amount(meaning: str, example: str = "100500000", **options) -> Any:
    """A token amount: a raw integer of the token's smallest unit, as a string."""
    described = f"{meaning}: a raw integer in the token's smallest unit, as a string"
    return text(described, example, pattern=RAW_TEXT, **options)


def timestamp(meaning: str, example: str | None = TIME, **options) -> Any:
    described = f"{meaning} (ISO 8601 UTC with milliseconds)"
    return text(described, example, json_schema_extra={"format": "date-time"}, **options)


# -- examples assembled from the fields' ------------------------------------------------------------------------

_NONE = object()


def example_of(model: type[BaseModel], seen: tuple = ()) -> dict:
    """An example of `model`: each field's first example, a nested model's own example, a Literal's first value."""
    example = {}
    for name, field in model.model_fields.items():
        value = _field_example(field, field.annotation, (*seen, model))
        if value is not _NONE:
            example[field.alias or name] = value
    return example


def _field_example(field: FieldInfo | None, annotation: Any, seen: tuple) -> Any:
    if field is not None and field.examples:
        return field.examples[0]
    for option in _options(annotation):
        if isinstance(option, type) and issubclass(option, BaseModel):
            own = option.model_config.get("json_schema_extra")
            if isinstance(own, dict) and own.get("examples"):
                return own["examples"][0]
            return _NONE if option in seen else example_of(option, seen)
        if get_origin(option) is Literal:
            return get_args(option)[0]
        if get_origin(option) is list:
            item = _field_example(None, get_args(option)[0], seen)
            return [] if item is _NONE else [item]
    return _NONE


def _options(annotation: Any) -> tuple:
    if get_origin(annotation) is Annotated:
        return _options(get_args(annotation)[0])
    if get_origin(annotation) in (Union, type(int | None)):
        return tuple(option for option in get_args(annotation) if option is not type(None))
    return (annotation,)


class Answer(BaseModel):
    """A documented answer: its example is its fields' (`examples` in its model_config replaces it)."""

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        schema = handler(core_schema)
        own = handler.resolve_ref_schema(schema)
        for field in own.get("properties", {}).values():
            if "default" in field and field["default"] is None:
                del field["default"]  # a key the answer holds only sometimes: absent, never null
        own.setdefault("examples", [example_of(cls)])
        return schema


# -- what both APIs answer --------------------------------------------------------------------------------------


class UserIdentity(Answer):
    user_identifier: str = text("The user's identifier, in its canonical form (lowercase for EVM and email)", ALICE)
    user_identifier_type: IdentifierType = text("The identifier's type (API.md §0)", "evm_address")


class CheckCurrency(Answer):
    """A claim check's currency (API.md §5)."""

    currency_address: str = text("The token's address", USDC)
    currency_chain_id: int = text("The chain's id", 1)
    currency_name: str = text("The token's name", "USDC")
    currency_decimals: int = text("The token's decimals", 6)


class ClaimCheckAnswer(Answer):
    """A claim check (API.md §5): an amount of an on-chain currency owed to a user."""

    id: str = text("The check's id", CHECK_ID)
    user_identifier: str = text("Its user's identifier", ALICE)
    user_identifier_type: IdentifierType = text("Its user's identifier type", "evm_address")
    currency_address: str = CheckCurrency.model_fields["currency_address"]
    currency_chain_id: int = CheckCurrency.model_fields["currency_chain_id"]
    currency_name: str = CheckCurrency.model_fields["currency_name"]
    currency_decimals: int = CheckCurrency.model_fields["currency_decimals"]
    amount: str = raw_amount("The amount")
    reason: Literal["affiliate_payout", "end_user_payout"] = text("Why it is owed", "affiliate_payout")
    status: Literal["open", "closed", "claimed", "expired", "pending_acceptance"] = text(
        "`open` (accruing), `closed` (claimable), `claimed`, `expired` (closed, not claimed in time: API.md §8), "
        "`pending_acceptance` (its user has not accepted it yet: API.md §9)",
        "closed",
    )
    hash: str | None = text("The claim's transaction hash (claimed checks)", None)
    created_at: str = timestamp("When its first payout's event happened")
    claimed_at: str | None = timestamp("When it was claimed", None)
    expires_at: str | None = timestamp("When it expires, if closed under the project's claim_check_expiry", None)


class ClaimForm(Answer):
    """The signed form an on-chain claim of one closed check needs (the published client's `ClaimResponse`, README
    "Signed claim checks"); unsigned (`signatures` empty, `deadline` 0) when no EVM contract can pay the check."""

    project_address: str = text("The claim contract (the EIP-712 verifyingContract; the zero address unset)", ALICE)
    to: str = text("Who is paid", ALICE)
    currency: str = text("The token's address", USDC)
    currency_type: Literal[0, 1] = text("0: the chain's native currency, 1: an ERC-20 token", 1)
    amount: str = raw_amount("The amount")
    reason: Literal[0, 1] = text("0: affiliate payout, 1: end-user payout", 0)
    token_id: str = text("Always `0` (fungible tokens)", "0")
    deadline: int = text("Unix seconds after which the signature is void; 0 when unsigned", 1764068400)
    proof: str = text("keccak256 of the check's id", "0x" + "5e" * 32)
    signatures: list[str] = text("The claim signer's EIP-712 signature; empty when unsigned", ["0x" + "ab" * 65])
    claim_check_id: str = text("The check's id", CHECK_ID)
    chain_id: int = text("The chain to claim on (the EIP-712 chainId)", 1)


class AffiliateTier(Answer):
    id: str = text("The tier's id in the payout configuration", "gold")
    name: str = text("Its name", "Gold")
    rank: int = text("Its rank", 2)


class AffiliateAnswer(Answer):
    """An affiliate (API.md §4) and its figures: volumes and earnings are decimal strings, rates numbers."""

    id: str = text("`<identifier type>:<identifier>`", f"evm_address:{ALICE}")
    user_identifier: str = text("The affiliate's identifier", ALICE)
    user_identifier_type: IdentifierType = text("Its type", "evm_address")
    name: str | None = text("Its name", "Alice")
    status: Literal["active", "pending", "suspended"] = text("Its status", "active")
    region: str | None = text("Its region label", "EU")
    audience: str | None = text("Its audience label", "traders")
    tax_status: Literal["verified", "pending", "exempt", "missing"] = text("Its tax status", "verified")
    tier: AffiliateTier | None = Field(description="Its effective tier (its own, else the default); null without one")
    created_at: str = timestamp("When it registered")
    codes: list[str] = text("Its referral codes, newest first", [CODE])
    referred_users: int = text("Users it referred (level 1), all time", 3)
    total_volume: str = decimal_text("The sum of r1_volume to r4_volume", "1250")
    r1_volume: str = decimal_text("Base amounts of conversions of users it referred", "1000")
    r2_volume: str = decimal_text("At level 2", "200")
    r3_volume: str = decimal_text("At level 3", "50")
    r4_volume: str = decimal_text("At level 4", "0")
    total_earnings: str = decimal_text("Points it earned as an affiliate", "130")
    r1: float = text("Its tier's level-1 rate, 0 to 1 (a JSON number)", 0.2)
    r2: float = text("Level 2", 0.1)
    r3: float = text("Level 3", 0.05)
    r4: float = text("Level 4", 0.02)


class CodeFigures(Answer):
    """The figures of a code the published client reads beside it (API.md §7)."""

    rebate_rate: float | None = exact_number("The share (0 to 1) of each level-1 commission given to the user", 0.1)
    clicks: int = text("Pageviews through any of its names", 42)
    total_users: int = text("Users referred through it (less removed referrals)", 3)
    total_earnings: float = exact_number("Points its owner earned through it", 130)


class TierView(Answer):
    """A tier as the published client shows it."""

    id: str = text("The tier's id", "gold")
    name: str = text("Its name", "Gold")
    slug: str = text("Its id again", "gold")
    rank: int = text("Its rank", 2)


class Health(Answer):
    status: Literal["ok"] = text("The storage engines answer", "ok")
