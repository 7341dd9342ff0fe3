"""``/v1/responses``: OpenAI's Responses API (``POST``, and ``GET`` / ``DELETE`` of a stored
response).

A request is read into a chat completions request (``lokal.serve.responses``) and answered by
the same turn as chat (``lokal.serve.turn``). ``store`` (default true) keeps the response and
the conversation it ends in ``lokal.db`` (``lokal.memory.responses``); a request naming it in
``previous_response_id`` continues that conversation; ``store: false`` keeps nothing.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from lokal.config import Profile
from lokal.errors import LokalError
from lokal.records import Decision
from lokal.serve import responses, turn, wire
from lokal.serve.state import ServeState
from lokal.serve.stream import ContentStreamer, sse_data

__all__ = ["router"]

_Event = Callable[..., dict[str, str]]  # one server-sent event of the stream

router = APIRouter()


def _not_found(ident: str, param: str | None = None) -> wire.APIError:
    return wire.APIError(
        f"no stored response with id {ident!r} (responses made with store: false are not kept)",
        status=404 if param is None else 400,
        param=param,
        code="response_not_found",
    )


@router.post("/v1/responses")
async def create(request: Request) -> Response:
    state, entry, body = await turn.receive(request)
    if body is None:
        return Response(status_code=499)
    asked = wire.validate(responses.ResponsesRequest, wire.read_json(body))
    entry.update(api="responses", model=asked.model, stream=bool(asked.stream))
    previous: list[dict[str, Any]] = []
    if asked.previous_response_id:
        stored = state.response_store().get(asked.previous_response_id)
        if stored is None:
            raise _not_found(asked.previous_response_id, "previous_response_id")
        previous = stored[1]
    chat = responses.to_chat(asked, previous)
    parsed = wire.parse_data(chat)
    chosen = state.profile(asked.model)
    prepared = wire.prepare(parsed, chosen)
    reply = _Reply(state, asked, chat, chosen)
    return await turn.answer(
        state,
        request,
        chosen,
        prepared,
        entry,
        model=asked.model,
        conversation=request.headers.get("x-lokal-conversation") or asked.user or "serve",
        stream=(
            (lambda streamer, t: _stream(reply, streamer, t.events, t.cancel, entry))
            if asked.stream
            else None
        ),
        write=lambda decision, t: reply.complete(decision, responses.output_items(decision)),
    )


@router.get("/v1/responses/{ident}")
async def retrieve(ident: str, request: Request) -> Response:
    state: ServeState = request.app.state.lokal
    state.authorize(request)
    stored = state.response_store().get(ident)
    if stored is None:
        raise _not_found(ident)
    return JSONResponse(stored[0])


@router.delete("/v1/responses/{ident}")
async def delete(ident: str, request: Request) -> Response:
    state: ServeState = request.app.state.lokal
    state.authorize(request)
    if not state.response_store().delete(ident):
        raise _not_found(ident)
    return JSONResponse({"id": ident, "object": "response", "deleted": True})


class _Reply:
    """One response under way: its id and time, and how it ends (stored unless
    ``store: false``)."""

    def __init__(
        self, state: ServeState, asked: responses.ResponsesRequest, chat: dict, profile: Profile
    ) -> None:
        self.state = state
        self.asked = asked
        self.chat = chat
        self.profile = profile
        self.ident = responses.response_id()
        self.created = time.time()

    def object(self, status: str = "in_progress") -> dict[str, Any]:
        return responses.response_object(self.asked, self.ident, self.created, status=status)

    def complete(self, decision: Decision, output: list[dict[str, Any]]) -> dict[str, Any]:
        body = responses.response_object(
            self.asked,
            self.ident,
            self.created,
            output=output,
            decision=decision,
            profile=self.profile,
        )
        if self.asked.store is not False:
            conversation = responses.conversation_after(self.asked, self.chat, output)
            self.state.response_store().put(body, conversation, self.asked.model)
        return body


async def _stream(
    reply: _Reply,
    streamer: ContentStreamer,
    events: asyncio.Queue,
    cancel: threading.Event,
    entry: dict[str, Any],
) -> Any:
    """The server-sent events of one streamed response, in the documented order:
    ``response.created``, ``response.in_progress``, each output item (added, its text or
    arguments deltas and done events, done), then ``response.completed`` (or
    ``response.incomplete``)."""
    number = 0

    def event(kind: str, **fields: Any) -> dict[str, str]:
        nonlocal number
        number += 1
        return {
            "event": kind,
            "data": sse_data({"type": kind, "sequence_number": number - 1, **fields}),
        }

    finished = False
    text_item: dict[str, Any] | None = None
    try:
        yield event("response.created", response=reply.object())
        yield event("response.in_progress", response=reply.object())
        while True:
            kind, value = await events.get()
            if kind == "content":
                if text_item is None:
                    text_item = responses.message_item("")
                    for step in _text_opened(event, text_item):
                        yield step
                yield event(
                    "response.output_text.delta",
                    item_id=text_item["id"],
                    output_index=0,
                    content_index=0,
                    delta=value,
                    logprobs=[],
                )
                continue
            if kind == "error":
                message = str(value) if isinstance(value, LokalError) else type(value).__name__
                if isinstance(value, wire.APIError):
                    message = value.message
                entry["error"] = message
                yield event("error", code="server_error", message=message, param=None)
                break
            decision: Decision = value
            entry.update(turn.decision_log(decision))
            if not decision.ok and wire.finish_reason(decision) != "length":
                error = turn.no_reply(decision)
                yield event("error", code=error.code, message=error.message, param=None)
                break
            output = responses.output_items(decision)
            if output and output[0]["type"] == "message":
                text = output[0]["content"][0]["text"]
                rest, _ = streamer.finish(text) if text_item is not None else (text, False)
                if text_item is None:
                    text_item = {**output[0], "content": []}
                    for step in _text_opened(event, text_item):
                        yield step
                if rest:
                    yield event(
                        "response.output_text.delta",
                        item_id=text_item["id"],
                        output_index=0,
                        content_index=0,
                        delta=rest,
                        logprobs=[],
                    )
                output[0] = {**output[0], "id": text_item["id"]}
                for step in _text_closed(event, output[0]):
                    yield step
            elif text_item is not None:  # streamed text the decision did not keep
                output.insert(0, {**responses.message_item(""), "id": text_item["id"]})
                for step in _text_closed(event, output[0]):
                    yield step
            for index, item in enumerate(output):
                if item["type"] == "function_call":
                    for step in _call_events(event, index, item):
                        yield step
            body = reply.complete(decision, output)
            done = "response.incomplete" if body["status"] == "incomplete" else "response.completed"
            yield event(done, response=body)
            break
        finished = True
    finally:
        if not finished:
            cancel.set()  # the client went away: stop the generation at its next token
            entry["disconnected"] = "streaming"


def _text_opened(event: _Event, item: dict[str, Any]) -> list[dict[str, str]]:
    opened = {**item, "status": "in_progress", "content": []}
    part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    return [
        event("response.output_item.added", output_index=0, item=opened),
        event(
            "response.content_part.added",
            item_id=item["id"],
            output_index=0,
            content_index=0,
            part=part,
        ),
    ]


def _text_closed(event: _Event, item: dict[str, Any]) -> list[dict[str, str]]:
    part = item["content"][0]
    where = {"item_id": item["id"], "output_index": 0, "content_index": 0}
    return [
        event("response.output_text.done", **where, text=part["text"], logprobs=[]),
        event("response.content_part.done", **where, part=part),
        event("response.output_item.done", output_index=0, item=item),
    ]


def _call_events(event: _Event, index: int, item: dict[str, Any]) -> list[dict[str, str]]:
    opened = {**item, "arguments": "", "status": "in_progress"}
    where = {"item_id": item["id"], "output_index": index}
    return [
        event("response.output_item.added", output_index=index, item=opened),
        event("response.function_call_arguments.delta", **where, delta=item["arguments"]),
        event(
            "response.function_call_arguments.done",
            **where,
            name=item["name"],
            arguments=item["arguments"],
        ),
        event("response.output_item.done", output_index=index, item=item),
    ]
