"""What a delivery's payouts ask of caps and budgets, gathered while its records are computed: per project, one tally
per user, side and currency (rewards.domain.allotment.Tally) of the payouts a cap or budget governs, which the allot
step (stream_workers.allot) asks the state store to decide at once. Their rows are written meanwhile as if every
payout were paid whole; the allot step cuts those it must."""

from rewards.domain.allotment import END_USER, REFERRER, Limits, Tally, currency_key, to_units
from rewards.domain.integrity import Rejection
from rewards.domain.payouts import Payout, User


def row_key(row: dict, limits: Limits) -> tuple[User, str, str] | None:
    """The tally (user, side, currency) a payout row counts in, as `Pending.tally` counts a payout; None: no cap or
    budget governs its currency (read back from rows: the allot step's one-by-one payouts, reversals' give-backs)."""
    if (currency := limits.key_if_governed(currency_key(row["currency"]))) is None:
        return None
    side = REFERRER if row["role"] == "affiliate" else END_USER
    return User(row["recipient_identifier"], row["recipient_identifier_type"]), side, currency


class Pending:
    """A project's tallies in one delivery (nothing else of its payouts is kept: a delivery's every object alive
    until it is written costs the garbage collector's walks)."""

    def __init__(self):
        self.tallies: dict[tuple[User, str, str], Tally] = {}

    def tally(self, payouts: list[Payout], verdicts: list[Rejection | None] | None, at_ms: int, limits: Limits) -> None:
        """Count a source's payouts that a cap or budget governs (not rejected already, not 0) in their tallies."""
        tallies, governs = self.tallies, limits.key_if_governed
        for index, payout in enumerate(payouts):
            currency = governs(payout.currency)
            if currency is None or not payout.amount or (verdicts is not None and verdicts[index] is not None):
                continue
            side = REFERRER if payout.role == "affiliate" else END_USER  # what it is earned as (API.md §8)
            key = (payout.recipient, side, currency)
            if (tally := tallies.get(key)) is None:
                tally = tallies[key] = Tally(*key)
            units = to_units(payout.amount, currency)
            tally.units += units  # (Tally.add, written out: a per-payout hot path)
            tally.times[at_ms] = tally.times.get(at_ms, 0) + units
