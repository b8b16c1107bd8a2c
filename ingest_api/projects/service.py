"""A project's payout configuration (API.md §6): the use cases, shared by the HTTP API and `rewards project config`."""

from rewards.domain.payout_config import PayoutConfig, config_from_document
from rewards.ports import ProjectStore


def parse_config(document: object) -> PayoutConfig:
    """The configuration of a JSON document; InvalidConfig names every problem."""
    return config_from_document(document)


def config_json(config: PayoutConfig) -> dict:
    return config.model_dump(mode="json", exclude_none=True)


async def get_config(state: ProjectStore, project_id: str) -> PayoutConfig:
    return await state.get_config(project_id)


async def put_config(state: ProjectStore, project_id: str, config: PayoutConfig) -> None:
    await state.put_config(project_id, config)
