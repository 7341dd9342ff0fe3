"""``POST /v1/embeddings``: OpenAI's embeddings from the bundled all-MiniLM-L6-v2, run as
lokal's RAG, memory and tool preselection run it (``lokal.rag.embeddings``: ONNX Runtime
where it imports, else NumPy). ``model`` is ``all-MiniLM-L6-v2`` (the process's embedding
settings) or a served profile (its ``embeddings:`` settings); ``input`` a string or a list of
strings; ``encoding_format`` ``float`` or ``base64`` (little-endian float32, as OpenAI's);
``usage`` counts the model's tokens."""

from __future__ import annotations

import asyncio
import base64
import functools
import threading
from typing import Any, Literal

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from lokal.serve import turn, wire
from lokal.serve.state import ServeState

__all__ = ["EmbeddingsRequest", "router"]

router = APIRouter()
MAX_INPUTS = 2048  # texts in one request, as OpenAI's limit


class EmbeddingsRequest(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")  # user, dimensions: ignored

    model: str
    input: str | list[str] = Field(min_length=1)
    encoding_format: Literal["float", "base64"] | None = None


_EMBEDDERS: dict[str, Any] = {}
_LOCK = threading.Lock()


def _embedder(state: ServeState, model: str) -> Any:
    """The embedder ``model`` names: the bundled MiniLM with the process's settings, or with
    a served profile's ``embeddings:``; one per name, loaded on first use."""
    from lokal.rag.embeddings import MINILM, LocalEmbedder

    if model in (MINILM, f"sentence-transformers/{MINILM}"):
        settings = None
    elif model in state.names:
        settings = state.profile(model).embeddings
    else:
        raise wire.APIError(
            f"model {model!r} is not an embedding model here; use {MINILM!r} or a served "
            f"profile ({', '.join(state.names) or 'none'})",
            status=404,
            param="model",
            code="model_not_found",
            headers={"x-should-retry": "false"},
        )
    with _LOCK:
        if model not in _EMBEDDERS:
            _EMBEDDERS[model] = LocalEmbedder(settings=settings)
        return _EMBEDDERS[model]


@functools.cache
def _tokenizer() -> Any:
    from tokenizers import Tokenizer

    from lokal.rag.embeddings import minilm_path

    tokenizer = Tokenizer.from_file(str(minilm_path() / "tokenizer.json"))
    tokenizer.enable_truncation(256)  # the model's max_seq_length: what it reads
    return tokenizer


def _embed(embedder: Any, texts: list[str]) -> tuple[np.ndarray, int]:
    vectors = embedder.embed(texts)
    tokens = sum(len(e.ids) for e in _tokenizer().encode_batch(texts))
    return vectors, tokens


def _encoded(vector: np.ndarray, form: str | None) -> Any:
    if form == "base64":
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    return [float(x) for x in vector]


@router.post("/v1/embeddings")
async def embeddings(request: Request) -> Response:
    state, entry, body = await turn.receive(request)
    if body is None:
        return Response(status_code=499)
    asked = wire.validate(EmbeddingsRequest, wire.read_json(body))
    texts = [asked.input] if isinstance(asked.input, str) else list(asked.input)
    if len(texts) > MAX_INPUTS:
        raise wire.APIError(f"input: at most {MAX_INPUTS} texts a request", param="input")
    entry.update(api="embeddings", model=asked.model, inputs=len(texts))
    embedder = _embedder(state, asked.model)
    loop = asyncio.get_running_loop()
    vectors, tokens = await loop.run_in_executor(state.executor, _embed, embedder, texts)
    entry["embedding_backend"] = embedder.backend
    data = [
        {"object": "embedding", "index": i, "embedding": _encoded(v, asked.encoding_format)}
        for i, v in enumerate(vectors)
    ]
    return JSONResponse(
        {
            "object": "list",
            "data": data,
            "model": asked.model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
    )
