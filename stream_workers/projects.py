"""What a delivery's records need of their projects' state: each project's configuration, then what each record
type's handler reads for its records (`plan`), a few round trips per project and delivery rather than per record."""

from pydantic import ValidationError

from rewards.domain import allotment
from rewards.domain import payouts as engine
from rewards.ports import ProjectStore, StateStore, Warehouse
from stream_workers.handlers import HANDLERS, Handler, handler_of
from stream_workers.handlers.base import Project, Unusable


async def projects_of(records: list, state: StateStore, warehouse: Warehouse) -> dict[str, Project | Unusable]:
    """Each project's state, by project id; a project whose stored configuration cannot be read is Unusable."""
    own: dict[str, dict[Handler, list]] = {}  # each project's records, by handler, in order
    for record in records:
        if (handler := handler_of(record)).reads_project:
            own.setdefault(record.project_id, {}).setdefault(handler, []).append(record)
    configs = {project_id: await _config_of(project_id, state) for project_id in own}
    projects: dict[str, Project | Unusable] = {}
    for project_id, rules in configs.items():
        if isinstance(rules, Unusable):
            projects[project_id] = rules
            continue
        project = projects[project_id] = Project(rules, limits=allotment.limits_of(rules.config))
        for handler in HANDLERS.values():
            await handler.plan(project_id, project, own[project_id].get(handler, []), state, warehouse)
        if project.screened:
            project.blocklisted = await state.blocklisted_among(project_id, list(project.screened))
    return projects


async def _config_of(project_id: str, state: ProjectStore) -> engine.Rules | Unusable:
    try:
        return engine.Rules(await state.get_config(project_id))
    except ValidationError as exc:  # the stored document, not the store: reading it again would fail again
        return Unusable(f"the project's stored payout configuration is invalid: {exc}"[:1000])
