"""A project's payout configuration (API.md §6) and its claim signer (§7): the use cases, shared by the HTTP API and
`rewards project config` / `rewards project claim-signer`."""

from collections.abc import Sequence

from rewards.domain.claim_signing import SignerKey
from rewards.domain.payout_config import PayoutConfig, config_from_document
from rewards.ports import ProjectStore, StateStore, Warehouse

VOLUME_CURRENCY_FIXED = (
    "volume_currency cannot change once the project has conversions: the figures counted before would be added to "
    "those of another currency (docs/api.md §6)"
)


class VolumeCurrencyFixed(ValueError):
    """A change of volume_currency refused: the project's figures already count another currency."""


def parse_config(document: object) -> PayoutConfig:
    """The configuration of a JSON document; InvalidConfig names every problem."""
    return config_from_document(document)


def config_json(config: PayoutConfig, signer_address: str | None = None) -> dict:
    """The configuration as answered, with the address of the project's claim signer when it has one (its key never)."""
    shown = config.model_dump(mode="json", exclude_none=True)
    return shown if signer_address is None else {**shown, "claim_signer_address": signer_address}


async def get_config(state: ProjectStore, project_id: str) -> PayoutConfig:
    return await state.get_config(project_id)


async def put_config(state: StateStore, warehouse: Warehouse, project_id: str, config: PayoutConfig) -> None:
    """Store `config`; VolumeCurrencyFixed if it changes the volume currency of a project with conversions."""
    stored = await state.get_config(project_id)
    if config.volume_currency != stored.volume_currency and await has_conversions(warehouse, project_id):
        raise VolumeCurrencyFixed(VOLUME_CURRENCY_FIXED)
    await store_config(state, project_id, stored, config)


async def store_config(state: StateStore, project_id: str, stored: PayoutConfig, config: PayoutConfig) -> None:
    """Replace `stored` with `config`. A budget set in a currency that had none, or removed, drops that currency's paid
    counter first (before a worker can see the new budget): the next payout in it counts from everything the warehouse
    holds paid (stream_workers.allot), not from a count that stopped while the currency had no budget."""
    changed = {budget.currency for budget in stored.budgets} ^ {budget.currency for budget in config.budgets}
    if changed:
        await state.reset_budgets(project_id, sorted(changed))
    await state.put_config(project_id, config)


async def has_conversions(warehouse: Warehouse, project_id: str) -> bool:
    rows = await warehouse.query(
        "SELECT 1 AS found FROM conversions WHERE project_id = {project:String} LIMIT 1", {"project": project_id}
    )
    return bool(rows)


async def signer_address(state: ProjectStore, project_id: str) -> str | None:
    stored = await state.get_claim_signer(project_id)
    return None if stored is None else stored.address


async def put_claim_signer(
    state: ProjectStore, project_id: str, signer: SignerKey | None, secrets_keys: Sequence[str]
) -> None:
    """Keep `signer` as the project's claim signer, its key sealed (encrypted with REWARDS_SECRETS_KEY when set);
    None removes it."""
    await state.put_claim_signer(project_id, None if signer is None else signer.sealed(secrets_keys))
