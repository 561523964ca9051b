"""The API's endpoints, one module per resource, gathered into one router (in document order)."""

from __future__ import annotations

from fastapi import APIRouter

from faithjudge.api.routes import config, jobs, probes, score

__all__ = ["router"]

router = APIRouter()
for module in (score, jobs, config, probes):
    router.include_router(module.router)
