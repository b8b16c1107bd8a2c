"""`rewards ingest-api`: the ingest edge alone, publishing to Kafka (state in Redis)."""

from fastapi import FastAPI

from ingest_api.app import ROUTERS
from rewards.production.app import production_app
from rewards.settings import Settings


def create() -> FastAPI:
    """The app factory uvicorn calls in every worker process (settings from the environment)."""
    return production_app("Rewards ingest API", ROUTERS, Settings(), publishes=True)
