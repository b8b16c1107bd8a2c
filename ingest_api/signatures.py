"""The per-project signature setting (API.md §7) applied to the ingest edge's signed writes: the project's
configuration says whether to check; rewards.domain.signatures says what is signed and how it verifies."""

from rewards.domain.payouts import User
from rewards.domain.signatures import Signed, require_signed
from rewards.ports import ProjectStore


async def check_signed(
    state: ProjectStore,
    project_id: str,
    signers: tuple[User, ...],
    expected: Signed,
    signature: str | None,
    sent: str | None = None,
) -> None:
    """InvalidSignature when the project verifies signatures and this one is not valid (require_signed)."""
    if (await state.get_config(project_id)).verify_signatures:
        require_signed(signers, expected, signature, sent)
