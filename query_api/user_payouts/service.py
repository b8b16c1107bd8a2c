"""A user's payouts (API.md §7, the published client's G6): SQL over the tables of migration 009, ordered by recipient
(`recipient_payouts`) or by referrer (`referrer_earnings_daily`), so that a read touches only the user's rows.

`conversion_id` and `conversion_name` are both the name of the event that paid (a conversion rule is keyed by its
`event_name`, unique in a configuration); a code use's referral rewards are the conversion `referral_reward`.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from query_api.paging import counted_page
from rewards.domain.amounts import exact_sum
from rewards.domain.claim_checks import OPEN, check_id
from rewards.domain.payouts import User
from rewards.domain.reversals import REVERSAL_PART
from rewards.ports import Referral, ReferralStore, Warehouse
from schemas.clickhouse.values import time_window

POINT = "point"
PAID = "paid"  # the status of every payout in points (a token payout's is its claim check's)
REJECTED = "rejected"  # a payout the rules refused (API.md §8): its reason is the movement's payout_status_details
# A rejected payout's id: its payout's, marked (a cap splits one payout into a paid part and a rejected rest, the two
# rows of one payout_id).
REJECTED_PART = ":rejected"
# Earned as a referrer: commissions (the affiliate's share when a rebate splits one) and the code owner's referral
# reward; `user` payouts (end-user rewards, campaign bonuses, rebates, the referred user's referral reward) are not.
REFERRER_ROLE = "affiliate"
# GET /payouts/by-referrer answers in one list (the published client pages nothing): at most this many referred users.
MAX_REFERRED = 1000


@dataclass(frozen=True)
class Window:
    """Inclusive bounds on when the payouts happened (epoch ms); None: open."""

    start_ms: int | None = None
    end_ms: int | None = None


@dataclass(frozen=True)
class Currency:
    address: str  # `point` for points
    chain_id: int  # 0 for points


def _recipient_rows(project_id: str, user: User, onchain: bool, window: Window) -> tuple[str, dict]:
    """The condition on the user's rows of one currency kind within the window, and its parameters."""
    conditions = [
        "project_id = {project:String}",
        "recipient_identifier_type = {user_type:String}",
        "recipient_identifier = {user_id:String}",
        "currency != 'point'" if onchain else "currency = 'point'",
    ]
    params = {"project": project_id, "user_type": user.identifier_type, "user_id": user.identifier}
    conditions += time_window("happened_at", window.start_ms, window.end_ms, params, end_inclusive=True)
    return " AND ".join(conditions), params


def _currency(row: dict) -> Currency:
    return Currency(row["currency"], int(row["currency_chain_id"]))


@dataclass(frozen=True)
class ConversionTotal:
    conversion: str
    is_referrer: bool
    currency: Currency
    amount: Decimal  # points, or the raw integer of the token's smallest unit


async def by_conversion(
    warehouse: Warehouse, project_id: str, user: User, onchain: bool, window: Window, offset: int, limit: int
) -> tuple[list[ConversionTotal], int]:
    """The user's payouts of one currency kind summed per conversion, role (referrer or not) and currency."""
    where, params = _recipient_rows(project_id, user, onchain, window)
    sql = (
        f"SELECT conversion_name, role = '{REFERRER_ROLE}' AS is_referrer, currency, currency_chain_id,"
        f" toString(sum(amount)) AS amount_text, count() OVER () AS total_count"
        f" FROM recipient_payouts WHERE {where} AND rejection = ''"
        f" GROUP BY conversion_name, is_referrer, currency, currency_chain_id"
        f" ORDER BY conversion_name, is_referrer DESC, currency, currency_chain_id"
    )
    rows, total = await counted_page(warehouse, sql, params, offset, limit)
    return [
        ConversionTotal(r["conversion_name"], bool(r["is_referrer"]), _currency(r), Decimal(r["amount_text"]))
        for r in rows
    ], total


@dataclass(frozen=True)
class Movement:
    payout_id: str
    happened_ms: int
    is_referrer: bool
    conversion: str
    currency: Currency
    amount: Decimal
    status: str  # `paid` for points; the claim check's status for a token; `rejected` (API.md §8)
    rejection: str | None = None  # why it was rejected (rewards.domain.integrity.Rejection)
    reversal: bool = False  # a reversing movement (API.md §9): part of the payout taken back, negative


async def movements(
    warehouse: Warehouse, project_id: str, user: User, onchain: bool, window: Window, offset: int, limit: int
) -> tuple[list[Movement], int]:
    """The user's payouts of one currency kind, one row each, newest first."""
    where, params = _recipient_rows(project_id, user, onchain, window)
    sql = (
        f"SELECT payout_id, toUnixTimestamp64Milli(happened_at) AS happened_ms,"
        f" role = '{REFERRER_ROLE}' AS is_referrer, conversion_name, currency, currency_chain_id,"
        f" toString(amount) AS amount_text, rejection, reversal != '' AS reversed, count() OVER () AS total_count"
        f" FROM recipient_payouts WHERE {where} ORDER BY happened_at DESC, payout_id DESC, rejection"
    )
    rows, total = await counted_page(warehouse, sql, params, offset, limit)
    paid_tokens = [row["payout_id"] for row in rows if onchain and not row["rejection"]]
    # A reversing movement shows its payout's check (its id: the payout's, `:reversal:<reversal id>` added).
    check_ids = {payout: check_id(project_id, payout.partition(REVERSAL_PART)[0]) for payout in paid_tokens}
    statuses = await _check_statuses(warehouse, project_id, user, list(check_ids.values()))

    def status(row: dict) -> str:
        if row["rejection"]:
            return REJECTED
        return statuses.get(check_ids[row["payout_id"]], OPEN) if onchain else PAID

    return [
        Movement(
            payout_id=r["payout_id"] + (REJECTED_PART if r["rejection"] else ""),
            happened_ms=int(r["happened_ms"]),
            is_referrer=bool(r["is_referrer"]),
            conversion=r["conversion_name"],
            currency=_currency(r),
            amount=Decimal(r["amount_text"]),
            status=status(r),
            rejection=r["rejection"] or None,
            reversal=bool(int(r["reversed"])),
        )
        for r in rows
    ], total


async def _check_statuses(warehouse: Warehouse, project_id: str, user: User, ids: list[str]) -> dict[str, str]:
    """The current status of each of the user's claim checks `ids` (each token payout opened one, its id derived from
    the payout's: claim_checks.check_id). A check the warehouse does not hold yet (it is written right after its
    payout) is left out: it is open."""
    if not ids:
        return {}
    rows = await warehouse.query(
        "SELECT id, status FROM claim_checks FINAL WHERE project_id = {project:String}"
        " AND user_identifier_type = {user_type:String} AND user_identifier = {user_id:String}"
        " AND id IN {ids:Array(String)}",
        {"project": project_id, "user_type": user.identifier_type, "user_id": user.identifier, "ids": ids},
    )
    return {row["id"]: row["status"] for row in rows}


# -- by referrer -----------------------------------------------------------------------------------------------


@dataclass
class Referred:
    """What one user referred directly by the referrer brought it in the window (API.md §7: volumes are sums of
    args.value.amount); `direct_*` where the referrer stood at level 1 of the conversion's chain, `commissions` at
    levels 1-4 (the conversions of the user and of its downline)."""

    user: User
    volume: Decimal = Decimal(0)  # the user's own volume, all its conversion events
    direct_volume: Decimal = Decimal(0)
    indirect_volume: Decimal = Decimal(0)
    direct_commissions: dict[Currency, Decimal] = field(default_factory=dict)
    commissions: dict[Currency, Decimal] = field(default_factory=dict)
    joined_ms: int | None = None  # when the referrer first referred the user (all time)
    referral: Referral | None = None  # the user's current referral, when it is the referrer's
    rebate_rate: Decimal | None = None  # of the code of that referral

    @property
    def brought(self) -> bool:
        """Whether the user brought the referrer an eligible volume or a commission (counted when each conversion was
        made: the referral may have been removed since)."""
        return any((self.direct_volume, self.indirect_volume, *self.commissions.values()))

    @property
    def eligible_volume(self) -> Decimal:
        return exact_sum((self.direct_volume, self.indirect_volume))


def _referrer_params(project_id: str, referrer: User, days: tuple[date | None, date | None]) -> tuple[str, dict]:
    """The window's condition on `day`, and the parameters every query of the referrer takes."""
    params = {"project": project_id, "ref_type": referrer.identifier_type, "ref_id": referrer.identifier}
    conditions = ""
    for name, day, operator in (("first_day", days[0], ">="), ("last_day", days[1], "<=")):
        if day is not None:
            conditions += f" AND day {operator} {{{name}:Date32}}"
            params[name] = day.isoformat()
    return conditions, params


_EARNINGS_SQL = (
    "SELECT referred_identifier_type AS t, referred_identifier AS u, currency, currency_chain_id,"
    " toString(sum(direct_volume)) AS direct_volume, toString(sum(indirect_volume)) AS indirect_volume,"
    " toString(sum(direct_commission)) AS direct_commission, toString(sum(commission)) AS commission"
    " FROM referrer_earnings_daily WHERE project_id = {project:String} AND referrer_identifier_type = {ref_type:String}"
    " AND referrer_identifier = {ref_id:String} AND referred_identifier != ''{days}"
    " GROUP BY t, u, currency, currency_chain_id"
)
_REFERRALS_SQL = (
    "SELECT user_identifier_type AS t, user_identifier AS u, toUnixTimestamp64Milli(min(referred_at)) AS joined_ms"
    " FROM referrals WHERE project_id = {project:String} AND referrer_identifier_type = {ref_type:String}"
    " AND referrer_identifier = {ref_id:String} GROUP BY t, u"
)
# The volumes of every user the referrer referred or earned through, read by their sorting key.
_VOLUMES_SQL = (
    "SELECT user_identifier_type AS t, user_identifier AS u, toString(sum(volume)) AS volume FROM user_volume_daily"
    " WHERE project_id = {project:String} AND (user_identifier_type, user_identifier) IN ("
    " SELECT user_identifier_type, user_identifier FROM referrals WHERE project_id = {project:String}"
    " AND referrer_identifier_type = {ref_type:String} AND referrer_identifier = {ref_id:String}"
    " UNION ALL SELECT referred_identifier_type, referred_identifier FROM referrer_earnings_daily"
    " WHERE project_id = {project:String} AND referrer_identifier_type = {ref_type:String}"
    " AND referrer_identifier = {ref_id:String}){days} GROUP BY t, u"
)


async def referred_users(
    warehouse: Warehouse,
    state: ReferralStore,
    project_id: str,
    referrer: User,
    days: tuple[date | None, date | None],
    everyone: bool,
) -> list[Referred]:
    """The users the referrer referred directly, with what each brought it within `days` (inclusive UTC days; None:
    open): those who brought it an eligible volume or a commission there, and those it refers now with a volume there
    (`everyone`: all those it refers now). The most eligible volume first, at most MAX_REFERRED."""
    days_sql, params = _referrer_params(project_id, referrer, days)
    earnings = await warehouse.query(_EARNINGS_SQL.replace("{days}", days_sql), params)
    referrals = await warehouse.query(_REFERRALS_SQL, params)
    volumes = await warehouse.query(_VOLUMES_SQL.replace("{days}", days_sql), params)
    found: dict[User, Referred] = {}

    def of(row: dict) -> Referred:
        user = User(row["u"], row["t"])
        return found.setdefault(user, Referred(user))

    for row in earnings:
        referred, currency = of(row), _currency(row)
        referred.direct_volume = exact_sum((referred.direct_volume, Decimal(row["direct_volume"])))
        referred.indirect_volume = exact_sum((referred.indirect_volume, Decimal(row["indirect_volume"])))
        _add(referred.direct_commissions, currency, Decimal(row["direct_commission"]))
        _add(referred.commissions, currency, Decimal(row["commission"]))
    for row in volumes:
        of(row).volume = Decimal(row["volume"])
    for row in referrals:
        of(row).joined_ms = int(row["joined_ms"])
    await _current_referrals(state, project_id, referrer, list(found.values()))
    kept = [r for r in found.values() if r.brought or (r.referral is not None and (everyone or r.volume))]
    kept.sort(key=lambda r: (r.user.identifier_type, r.user.identifier))
    kept.sort(key=lambda r: (r.eligible_volume, r.volume), reverse=True)  # stable: ties keep the identifiers' order
    return kept[:MAX_REFERRED]


def _add(amounts: dict[Currency, Decimal], currency: Currency, amount: Decimal) -> None:
    # Only paid commissions: a conversion whose commission rounded to nothing leaves its volume under no currency.
    if amount and currency.address:
        amounts[currency] = exact_sum((amounts.get(currency, Decimal(0)), amount))


async def _current_referrals(state: ReferralStore, project_id: str, referrer: User, users: Sequence[Referred]) -> None:
    """Set, on each user the referrer refers now (the state store's referral, whose code is named as it is now), that
    referral and the rebate rate of its code."""
    referrals = await state.referrals_among(project_id, [r.user for r in users])
    for referred in users:
        referral = referrals.get(referred.user)
        if referral is not None and referral.referrer == referrer:
            referred.referral = referral
    codes = sorted({r.referral.code for r in users if r.referral is not None})
    rates = await state.rebate_rates(project_id, codes) if codes else {}
    for referred in users:
        if referred.referral is not None:
            referred.rebate_rate = rates.get(referred.referral.code)
