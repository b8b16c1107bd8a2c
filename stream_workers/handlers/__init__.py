"""A handler per record type: its planning (what it needs of its project's state), its rows, its written key and
what it leaves when set aside. HANDLERS is the table the worker dispatches on (planning in its order)."""

from stream_workers.handlers.base import Handler
from stream_workers.handlers.code_use import CodeUse
from stream_workers.handlers.conversion import Conversion
from stream_workers.handlers.payout_decision import PayoutDecision
from stream_workers.handlers.referral_removal import ReferralRemoved
from stream_workers.handlers.reversal import Reversal
from stream_workers.handlers.stored import Affiliate, ClaimCheck, CodesCreated, TrackingEvent
from stream_workers.handlers.undecodable import Undecodable

HANDLERS: dict[type, Handler] = {
    handler.record_type: handler
    for handler in (
        Conversion(),
        CodeUse(),
        ReferralRemoved(),
        CodesCreated(),
        Affiliate(),
        ClaimCheck(),
        TrackingEvent(),
        Reversal(),
        PayoutDecision(),
        Undecodable(),
    )
}


def handler_of(record) -> Handler:
    try:
        return HANDLERS[type(record)]
    except KeyError:
        raise TypeError(f"not a record of schemas.records: {type(record).__name__}") from None
