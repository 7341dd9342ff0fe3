"""``POST /v1/messages`` and ``POST /v1/messages/count_tokens``: Anthropic's Messages API.

A request is read into a chat completions request (``lokal.serve.anthropic``) and answered by
the same turn as chat (``lokal.serve.turn``): one decision engine, one queue, one key check
(``x-api-key`` or a bearer token), one request log. Errors are in Anthropic's shape (the
app's error handler writes them for these paths).
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from lokal.config import Profile
from lokal.errors import LokalError
from lokal.records import Decision
from lokal.serve import anthropic, turn, wire
from lokal.serve.stream import ContentStreamer, sse_data

__all__ = ["router"]

router = APIRouter()


@router.post("/v1/messages")
async def messages(request: Request) -> Response:
    state, entry, body = await turn.receive(request)
    if body is None:
        return Response(status_code=499)
    asked = wire.validate(anthropic.MessagesRequest, wire.read_json(body))
    entry.update(api="anthropic", model=asked.model, stream=bool(asked.stream))
    chat = wire.parse_data(anthropic.to_chat(asked))
    chosen = state.profile(asked.model)
    prepared = wire.prepare(chat, chosen)
    return await turn.answer(
        state,
        request,
        chosen,
        prepared,
        entry,
        model=asked.model,
        conversation=request.headers.get("x-lokal-conversation") or "serve",
        stream=(
            (lambda streamer, t: _stream(chosen, streamer, t.events, t.cancel, entry))
            if asked.stream
            else None
        ),
        write=lambda decision, t: anthropic.message_response(
            decision, chosen, anthropic.message_id()
        ),
    )


@router.post("/v1/messages/count_tokens")
async def count_tokens(request: Request) -> Response:
    """The prompt tokens the request's messages, system and tools make on the model's
    tokenizer, as the decision would write them (400 on a backend without a tokenizer)."""
    state, entry, body = await turn.receive(request)
    if body is None:
        return Response(status_code=499)
    asked = wire.validate(anthropic.CountRequest, wire.read_json(body))
    entry.update(api="anthropic", model=asked.model)
    chat = wire.parse_data(anthropic.to_chat(asked))
    chosen = state.profile(asked.model)
    prepared = wire.prepare(chat, chosen)
    engine, _ = await state.engine(chosen, asked.model)
    loop = asyncio.get_running_loop()
    count = await loop.run_in_executor(
        state.executor, turn.count_prompt_tokens, chosen, prepared, engine
    )
    return JSONResponse({"input_tokens": count})


def _event(kind: str, **fields: Any) -> dict[str, str]:
    return {"event": kind, "data": sse_data({"type": kind, **fields})}


async def _stream(
    profile: Profile,
    streamer: ContentStreamer,
    events: asyncio.Queue,
    cancel: threading.Event,
    entry: dict[str, Any],
) -> Any:
    """The server-sent events of one streamed Message, in Anthropic's order: message_start,
    then each content block (start, deltas, stop), message_delta, message_stop."""
    ident = anthropic.message_id()
    start = {
        "id": ident,
        "type": "message",
        "role": "assistant",
        "model": profile.name,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }
    finished = False
    index = 0
    text_open = False
    try:
        yield _event("message_start", message=start)
        while True:
            kind, value = await events.get()
            if kind == "content":
                if not text_open:
                    block = {"type": "text", "text": ""}
                    yield _event("content_block_start", index=index, content_block=block)
                    text_open = True
                delta = {"type": "text_delta", "text": value}
                yield _event("content_block_delta", index=index, delta=delta)
                continue
            if kind == "error":
                message = str(value) if isinstance(value, LokalError) else type(value).__name__
                if isinstance(value, wire.APIError):
                    message = value.message
                entry["error"] = message
                yield _event("error", error={"type": "api_error", "message": message})
                break
            decision: Decision = value
            entry.update(turn.decision_log(decision))
            if not decision.ok and wire.finish_reason(decision) != "length":
                error = anthropic.error_body(turn.no_reply(decision))
                yield {"event": "error", "data": sse_data(error)}
                break
            text = (
                (decision.ai_message or {}).get("content") or ""
                if decision.ok
                else wire.unusable_text(decision)
            )
            rest, _ = streamer.finish(text) if text_open else (text, False)
            if rest:
                if not text_open:
                    block = {"type": "text", "text": ""}
                    yield _event("content_block_start", index=index, content_block=block)
                    text_open = True
                delta = {"type": "text_delta", "text": rest}
                yield _event("content_block_delta", index=index, delta=delta)
            if text_open:
                yield _event("content_block_stop", index=index)
                index += 1
            for use in anthropic.tool_uses(decision) if decision.ok else []:
                block = {**use, "input": {}}
                yield _event("content_block_start", index=index, content_block=block)
                arguments = json.dumps(use["input"], ensure_ascii=False)
                delta = {"type": "input_json_delta", "partial_json": arguments}
                yield _event("content_block_delta", index=index, delta=delta)
                yield _event("content_block_stop", index=index)
                index += 1
            stop = {"stop_reason": anthropic.stop_reason(decision), "stop_sequence": None}
            yield _event("message_delta", delta=stop, usage=anthropic.usage(decision))
            yield _event("message_stop", lokal=wire.lokal_info(decision, profile))
            break
        finished = True
    finally:
        if not finished:
            cancel.set()  # the client went away: stop the generation at its next token
            entry["disconnected"] = "streaming"
