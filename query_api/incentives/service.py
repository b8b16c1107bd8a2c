"""The payout configuration GET /payouts/terms-by-tier and GET /conversions render (query_api.incentives.schemas): the
project's, as the state store holds it (ProjectStore.get_config)."""

from rewards.domain.payout_config import PayoutConfig
from rewards.ports import ProjectStore


async def project_config(state: ProjectStore, project_id: str) -> PayoutConfig:
    return await state.get_config(project_id)
