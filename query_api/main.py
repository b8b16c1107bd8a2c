"""`rewards query-api`: the dashboards' reads alone, from ClickHouse (keys and configs in Redis)."""

from fastapi import FastAPI

from query_api.app import ROUTERS
from rewards.production.app import production_app
from rewards.settings import Settings


def create() -> FastAPI:
    """The app factory uvicorn calls in every worker process (settings from the environment)."""
    return production_app("Rewards query API", ROUTERS, Settings(), publishes=False)
