"""The web layer's ceiling: the same HTTP stack as the ingest API (uvicorn, FastAPI, orjson) answering a
constant after reading and parsing the same body. `uvicorn bench.baseline_app:create --factory`."""

import orjson
from fastapi import FastAPI, Request


def create() -> FastAPI:
    app = FastAPI()

    @app.post("/api/v1/events/batch")
    async def batch(request: Request) -> dict:
        orjson.loads(await request.body())
        return {"ingested_events": 100}

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok"}

    return app
