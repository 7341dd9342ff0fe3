"""``POST /v1/chat/completions``: OpenAI's chat completions, streamed or not.

The reply is a turn of the agent loop (``lokal.serve.turn``) with the request's
``tool_choice``, ``parallel_tool_calls`` and ``response_format``, so that a reply's calls are
parsed, validated and retried before any client sees them.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from lokal.config import Profile
from lokal.errors import LokalError
from lokal.records import Decision
from lokal.serve import turn, wire
from lokal.serve.stream import ContentStreamer, chunk, sse_data, tool_call_chunks

__all__ = ["router"]

router = APIRouter()


@router.post("/v1/chat/completions")
async def chat(request: Request) -> Response:
    state, entry, body = await turn.receive(request)
    if body is None:
        return Response(status_code=499)
    parsed = wire.parse_request(body)
    entry.update(model=parsed.model, stream=bool(parsed.stream))
    chosen = state.profile(parsed.model)
    prepared = wire.prepare(parsed, chosen)
    return await turn.answer(
        state,
        request,
        chosen,
        prepared,
        entry,
        model=parsed.model,
        conversation=request.headers.get("x-lokal-conversation") or parsed.user or "serve",
        stream=(
            (
                lambda streamer, t: _stream(
                    parsed, chosen, prepared, streamer, t.events, t.cancel, entry
                )
            )
            if prepared.stream
            else None
        ),
        write=lambda decision, t: wire.completion_response(
            decision, chosen, wire.completion_id(), t.others
        ),
    )


async def _stream(
    parsed: wire.ChatRequest,
    profile: Profile,
    prepared: wire.Prepared,
    streamer: ContentStreamer,
    events: asyncio.Queue,
    cancel: threading.Event,
    entry: dict[str, Any],
) -> Any:
    """The server-sent events of one streamed reply."""
    ident = wire.completion_id()
    usage = prepared.include_usage

    def event(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any):
        return {
            "data": sse_data(
                chunk(ident, profile.name, delta, finish, include_usage=usage, extra=extra)
            )
        }

    finished = False
    try:
        yield event({"role": "assistant", "content": None})
        while True:
            kind, value = await events.get()
            if kind == "content":
                yield event({"content": value})
                continue
            if kind == "error":
                message = str(value) if isinstance(value, LokalError) else type(value).__name__
                if isinstance(value, wire.APIError):
                    message = value.message
                entry["error"] = message
                yield {"data": sse_data(wire.error_body(message, "server_error"))}
                break
            decision: Decision = value
            entry.update(turn.decision_log(decision))
            reason = wire.finish_reason(decision)
            info = wire.lokal_info(decision, profile)
            if decision.ok and decision.tool_calls:
                for delta in tool_call_chunks(wire.openai_tool_calls(decision)):
                    yield event(delta)
            elif decision.ok or reason == "length":
                content = (
                    (decision.ai_message or {}).get("content", "")
                    if decision.ok
                    else (wire.unusable_text(decision))
                )
                rest, replaced = streamer.finish(content)
                if rest:
                    yield event({"content": rest})
                if replaced:
                    info.update(content_replaced=True, content=content)
            else:
                body = turn.no_reply(decision).body()
                body["lokal"] = info
                yield {"data": sse_data(body)}
                break
            last = event({}, reason, lokal=info)
            logprobs = wire.content_logprobs(decision)
            if logprobs is not None:  # all at once, in the finishing chunk
                data = json.loads(last["data"])
                data["choices"][0]["logprobs"] = logprobs
                last = {"data": sse_data(data)}
            yield last
            if usage:
                final = chunk(ident, profile.name, include_usage=True)
                final["choices"] = []
                final["usage"] = wire.usage(decision)
                yield {"data": sse_data(final)}
            break
        finished = True
        yield {"data": "[DONE]"}
    finally:
        if not finished:
            cancel.set()  # the client went away: stop the generation at its next token
            entry["disconnected"] = "streaming"
