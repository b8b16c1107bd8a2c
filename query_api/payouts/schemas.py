"""The answers of §1's summary and a user's totals (documented: rewards.web.answers)."""

from pydantic import create_model

from rewards.domain.payouts import PayoutKind
from rewards.web.answers import ALICE, Answer, IdentifierType, decimal_text, text


class Summary(Answer):
    total_payouts: str = decimal_text("Every point paid to every user of the project, all time", "15230.5")


# One decimal string per kind of payout, every kind listed (zeros included).
PointsByKind = create_model(
    "PointsByKind",
    __base__=Answer,
    **{kind.value: (str, decimal_text(f"Points of kind {kind.value}", "0")) for kind in PayoutKind},
)


class UserTotals(Answer):
    user_identifier: str = text("The user", ALICE)
    user_identifier_type: IdentifierType = text("Its identifier type", "evm_address")
    total_points: str = decimal_text("Every point the user earned", "130")
    by_kind: PointsByKind = text(
        "The same, per kind of payout",
        {"affiliate_commission": "80", "referral_reward": "50", "end_user_reward": "0", "campaign_bonus": "0",
         "rebate": "0"},
    )  # fmt: skip
