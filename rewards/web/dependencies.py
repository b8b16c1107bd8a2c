"""What a handler uses, declared in its signature as typed dependencies (`state: StateDep`, `principal: Caller`): the
engines this process runs on (rewards.web.backends, opened once at start-up) and the principal of the request's key
(rewards.web.auth.guard: the key authenticated, its scope checked, its call counted). None reads a parameter of the
request, so none adds anything to the OpenAPI document.

Each is an `async def` reading what start-up opened: FastAPI runs a plain `def` dependency in its thread pool."""

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from rewards.ports import (
    AffiliateFigures,
    CodeFigures,
    CodeTrafficFigures,
    EventLog,
    Principal,
    StateStore,
    Warehouse,
    WebhookSender,
)
from rewards.settings import Settings
from rewards.web.auth import guard
from rewards.web.backends import backends_of
from rewards.web.backpressure import Backpressure

# -- the principal ------------------------------------------------------------------------------------------------
# An operation with a scope of its own or a rate limit declares its principal beside it:
# `Annotated[Principal, Depends(guard(scope, operation))]`. One guard per alias: FastAPI resolves a dependency once a
# request, so a handler and its query class (query_api.user_payouts.schemas.UserQuery) both naming Caller authenticate
# the key once.

Caller = Annotated[Principal, Depends(guard(None))]  # any key of the project
ServiceCaller = Annotated[Principal, Depends(guard("service_role"))]  # a key with the service_role scope


# -- the engines --------------------------------------------------------------------------------------------------


async def state_store(request: Request) -> StateStore:
    return backends_of(request).state


async def warehouse(request: Request) -> Warehouse:
    return backends_of(request).warehouse


async def event_log(request: Request) -> EventLog:
    """The log state changes are published on (ingest processes only: None in the query API)."""
    return backends_of(request).log


async def backpressure(request: Request) -> Backpressure | None:
    """The backlog's measure where this process has one (the processes that accept events)."""
    return backends_of(request).backpressure


async def settings(request: Request) -> Settings:
    return backends_of(request).settings


async def affiliate_figures(request: Request) -> AffiliateFigures:
    return backends_of(request).figures


async def code_traffic(request: Request) -> CodeTrafficFigures | None:
    return backends_of(request).traffic


async def code_figures(request: Request) -> CodeFigures | None:
    return backends_of(request).code_figures


async def webhook_sender(request: Request) -> WebhookSender:
    return backends_of(request).webhook_sender


StateDep = Annotated[StateStore, Depends(state_store)]
WebhookSenderDep = Annotated[WebhookSender, Depends(webhook_sender)]
WarehouseDep = Annotated[Warehouse, Depends(warehouse)]
EventLogDep = Annotated[EventLog, Depends(event_log)]
BackpressureDep = Annotated[Backpressure | None, Depends(backpressure)]
SettingsDep = Annotated[Settings, Depends(settings)]
AffiliateFiguresDep = Annotated[AffiliateFigures, Depends(affiliate_figures)]
CodeTrafficDep = Annotated[CodeTrafficFigures | None, Depends(code_traffic)]
CodeFiguresDep = Annotated[CodeFigures | None, Depends(code_figures)]


# -- the ingest fast path -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Intake:
    """What accepting events uses, as one dependency: each one FastAPI resolves costs the hot path some microseconds
    a request (about 7 on the 2-core development machine)."""

    state: StateStore
    log: EventLog
    backpressure: Backpressure | None
    attribution_window_s: float  # how long a tracking event's id stays bound to its code and user


async def intake(request: Request) -> Intake:
    backends = backends_of(request)
    return Intake(backends.state, backends.log, backends.backpressure, backends.settings.attribution_window)


IntakeDep = Annotated[Intake, Depends(intake)]
