"""``/health``, ``/v1/models`` and ``/v1/models/{name}``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from lokal.serve import wire
from lokal.serve.state import ServeState, model_not_found

__all__ = ["router"]

router = APIRouter()


def _model(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "lokal"}


@router.get("/health")
async def health(request: Request) -> dict[str, Any]:
    # answered without the key, as llama.cpp's server and vLLM do (orchestrators probe it
    # without credentials); the models and queues only to a request with the key
    state: ServeState = request.app.state.lokal
    try:
        state.authorize(request)
    except wire.APIError:
        return {"status": "ok"}
    return {
        "status": "ok",
        "models": state.names,
        "unavailable": state.unavailable,
        "queues": state.queues(),
    }


@router.get("/v1/models")
async def models(request: Request) -> dict[str, Any]:
    state: ServeState = request.app.state.lokal
    state.authorize(request)
    return {"object": "list", "data": [_model(name) for name in state.names]}


@router.get("/v1/models/{name}")
async def model(name: str, request: Request) -> dict[str, Any]:
    state: ServeState = request.app.state.lokal
    state.authorize(request)
    if name not in state.names:
        raise model_not_found(name, state.names, state.unavailable)
    return _model(name)
