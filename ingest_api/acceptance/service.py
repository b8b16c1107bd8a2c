"""Pending acceptance (API.md §9): a project with `require_acceptance` opens its token payouts' claim checks as
`pending_acceptance`; the user accepts them all at once with an EIP-191 signature of a message naming the project,
and they are open (then claimable as usual). Knows nothing of HTTP."""

from rewards.domain import claim_checks, signatures
from rewards.domain.claim_checks import ClaimCheck
from rewards.domain.payouts import User
from rewards.ports import ClaimCheckStore, EventLog, Warehouse

MAX_ACCEPTED = 1000  # checks accepted per call (a user accepting again accepts the rest)

# The user's checks still pending, their latest versions (claim_checks is sorted by project and user).
_PENDING = """
SELECT id FROM claim_checks FINAL
WHERE project_id = {project:String} AND user_identifier_type = {user_type:String}
  AND user_identifier = {user_id:String} AND status = 'pending_acceptance'
ORDER BY created_at, id LIMIT {limit:UInt32}
"""


def check_signed(project_id: str, user: User, message: str, signature: str) -> None:
    """InvalidSignature unless `message` names the project and `signature` is the user's EIP-191 signature of it."""
    if project_id.lower() not in message.lower() or not signatures.signed_by(user, message, signature):
        raise signatures.InvalidSignature()


async def accept(
    state: ClaimCheckStore, log: EventLog, warehouse: Warehouse, project_id: str, user: User
) -> int:  # fmt: skip
    """The user's pending checks accepted (open now): how many this call moved."""
    params = {"project": project_id, "user_type": user.identifier_type, "user_id": user.identifier,
              "limit": MAX_ACCEPTED}  # fmt: skip
    ids = [row["id"] for row in await warehouse.query(_PENDING, params)]
    if not ids:
        return 0
    accepted: set[str] = set()

    def change(check: ClaimCheck) -> ClaimCheck:
        now = claim_checks.accept(check)
        if now is not check:
            accepted.add(check.id)
        return now

    async with state.update_claim_checks(project_id, ids, change, user) as changed:
        await log.publish(project_id, changed.payload)
    return len(accepted)
