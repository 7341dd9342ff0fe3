"""One request's turn, the same for every API ``lokal serve`` speaks: read the body, take a
place in the model's queue, run the reply in a worker thread as a turn of the runtime's agent
loop (``Agent.respond``), stop it when the client goes away, and record it.

A route parses its API's request into ``wire.Prepared`` (messages, tools, tool choice, answer
format), calls ``start`` and then ``finished`` (or reads ``Turn.events`` when it streams), and
writes the ``Decision`` in its API's shape.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from sse_starlette.sse import EventSourceResponse
from starlette.requests import ClientDisconnect

from lokal.config import Profile
from lokal.llm.backends import Backend
from lokal.memory.conversations import ConversationStore
from lokal.messages import last_user_text
from lokal.progress import listening
from lokal.records import Decision
from lokal.runtime import Agent, AgentSettings, ClientTurn, JsonlTrace
from lokal.serve import wire
from lokal.serve.slots import QueueFull, Slots
from lokal.serve.state import ServeState
from lokal.serve.stream import ContentStreamer
from lokal.tools.registry import ToolRegistry
from lokal.viewer.store import new_trace_path

__all__ = [
    "SERVER_TOOL_ROUNDS",
    "Turn",
    "answer",
    "call_required",
    "count_prompt_tokens",
    "decision_log",
    "finished",
    "no_reply",
    "read_body",
    "receive",
    "start",
]

SERVER_TOOL_ROUNDS = 4  # decisions that may call the server's own tools, per request
POLL_SECONDS = 0.1  # how often a waiting request checks that its client is still there


class Cancelled(Exception):
    """The client went away: the generation under way stops at its next token."""


class ClientGone(Exception):
    pass


@dataclass
class Turn:
    """A reply under way: its result, the events a stream reads (``("content", text)``,
    ``("done", decision)``, ``("error", exc)``), and the flag that stops it."""

    future: asyncio.Future[Decision]
    events: asyncio.Queue
    cancel: threading.Event
    others: list[Decision]  # the further choices of a request with n > 1


async def receive(request: Request) -> tuple[ServeState, dict[str, Any], bytes | None]:
    """What every POST route starts with: the server's state, the request's log entry, and
    its body once the key is checked (None: the client left before its body was in)."""
    state: ServeState = request.app.state.lokal
    entry = request.scope.setdefault("lokal_log", {})
    state.authorize(request)
    return state, entry, await read_body(request, state.limits.max_body_bytes, entry)


async def read_body(request: Request, limit: int, entry: dict[str, Any]) -> bytes | None:
    """The request's body (400 ``body_too_large`` past ``limit``); None when the client left
    before its body was in (the route answers 499)."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise wire.APIError(
            f"the request body of {declared} bytes is larger than the limit of {limit} bytes "
            "(lokal serve --max-body-bytes)",
            code="body_too_large",
        )
    chunks, size = [], 0
    try:
        async for part in request.stream():
            size += len(part)
            if size > limit:
                raise wire.APIError(
                    f"the request body is larger than the limit of {limit} bytes "
                    "(lokal serve --max-body-bytes)",
                    code="body_too_large",
                )
            chunks.append(part)
    except ClientDisconnect:
        entry["disconnected"] = "sending"
        return None
    return b"".join(chunks)


async def start(
    state: ServeState,
    request: Request,
    chosen: Profile,
    prepared: wire.Prepared,
    entry: dict[str, Any],
    *,
    model: str,
    streamer: ContentStreamer | None = None,
    conversation: str = "serve",
) -> Turn | None:
    """Start the reply to ``prepared`` (for the profile the request named ``model``) once
    the model's queue lets it (429 when the queue is full); None when the client left while
    it waited."""
    engine, slots = await state.engine(chosen, model)
    if prepared.generation.get("logprobs") is not None and not getattr(
        engine, "reports_logprobs", False
    ):
        raise wire.APIError(
            f"logprobs: model {model!r} runs on the {chosen.backend} backend, which does not "
            "report log-probabilities here (the llama.cpp backend does)",
            param="logprobs",
            code="logprobs_not_supported",
        )
    waited = time.perf_counter()
    try:
        await _acquire(request, slots)
    except QueueFull as exc:
        entry["queue"] = slots.state()
        raise wire.APIError(
            f"the model is busy and its queue is full ({slots.max_queue} waiting); "
            f"retry after {exc.retry_after} s",
            status=429,
            type="rate_limit_error",
            code="queue_full",
            headers={
                "Retry-After": str(exc.retry_after),
                "retry-after-ms": str(exc.retry_after_ms),
            },
        ) from None
    except ClientGone:
        entry["disconnected"] = "queued"
        return None
    entry["queue_ms"] = round((time.perf_counter() - waited) * 1000, 1)
    loop = asyncio.get_running_loop()
    cancel = threading.Event()
    events: asyncio.Queue = asyncio.Queue()

    def post(event: tuple[str, Any]) -> None:
        loop.call_soon_threadsafe(events.put_nowait, event)

    others: list[Decision] = []

    def work() -> Decision:
        started = time.perf_counter()
        try:
            decision = _decide(chosen, prepared, engine, cancel, streamer, post, state)
            for index in range(1, prepared.n):  # more choices: each with a seed of its own
                seed = int(prepared.generation.get("seed", chosen.generation.seed)) + index
                again = replace(prepared, generation={**prepared.generation, "seed": seed})
                others.append(_decide(chosen, again, engine, cancel, None, post, state))
                _give_call_ids(others[-1])
            _give_call_ids(decision)  # before it is recorded: the ids the client gets
            if state.conversations is not None:
                _record(state.conversations, conversation, prepared, decision, chosen)
            if streamer is not None:
                post(("done", decision))
            return decision
        except BaseException as exc:
            if streamer is not None:
                post(("error", exc))
            raise
        finally:
            loop.call_soon_threadsafe(slots.release, time.perf_counter() - started)

    future = loop.run_in_executor(state.executor, work)
    return Turn(future, events, cancel, others)


async def answer(
    state: ServeState,
    request: Request,
    chosen: Profile,
    prepared: wire.Prepared,
    entry: dict[str, Any],
    *,
    model: str,
    conversation: str,
    stream: Callable[[ContentStreamer, Turn], AsyncIterator[dict[str, str]]] | None,
    write: Callable[[Decision, Turn], dict[str, Any]],
) -> Response:
    """The reply to a parsed request, the same for every API: the turn started once the
    queue lets it, then either its events (``stream``: the API's server-sent events) or its
    decision written by ``write`` (a 500 ``no_valid_reply`` when there is no usable one);
    499 when the client left."""
    streamer = ContentStreamer() if stream is not None else None
    if streamer is not None and call_required(prepared.tool_choice):
        streamer.live = False  # the reply will be calls: no text of it is streamed
    started = await start(
        state,
        request,
        chosen,
        prepared,
        entry,
        model=model,
        streamer=streamer,
        conversation=conversation,
    )
    if started is None:
        return Response(status_code=499)
    if stream is not None and streamer is not None:
        return EventSourceResponse(
            stream(streamer, started),
            ping=15,
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    decision = await finished(request, started, entry)
    if decision is None:
        return Response(status_code=499)
    if not decision.ok and wire.finish_reason(decision) != "length":
        raise no_reply(decision)
    return JSONResponse(write(decision, started))


async def finished(request: Request, turn: Turn, entry: dict[str, Any]) -> Decision | None:
    """The decision of a turn that is not streamed; None when the client left meanwhile (the
    generation stops at its next token). A caller's mistake the engine found is a 400."""
    while True:
        done, _ = await asyncio.wait({turn.future}, timeout=POLL_SECONDS)
        if done:
            break
        if await request.is_disconnected():
            turn.cancel.set()
            entry["disconnected"] = "generating"
            turn.future.add_done_callback(lambda f: f.exception())  # read, never raised
            return None
    from lokal.errors import LokalError

    try:
        decision = turn.future.result()
    except LokalError as exc:  # a caller's mistake the decision engine found
        raise wire.APIError(str(exc)) from None
    entry.update(decision_log(decision))
    return decision


async def _acquire(request: Request, slots: Slots) -> None:
    """A slot; QueueFull, or ClientGone when the client left while waiting."""
    waiting = asyncio.ensure_future(slots.acquire())
    while True:
        done, _ = await asyncio.wait({waiting}, timeout=POLL_SECONDS)
        if done:
            waiting.result()
            return
        if await request.is_disconnected():
            waiting.cancel()
            try:
                await waiting
            except asyncio.CancelledError:
                raise ClientGone() from None
            slots.release()  # it got the slot just before the cancel
            raise ClientGone()


def count_prompt_tokens(profile: Profile, prepared: wire.Prepared, engine: Backend) -> int:
    """The tokens of the prompt the decision would write for ``prepared`` (its messages,
    tools and lokal's instructions, in the model's chat template); 400 when the backend has
    no tokenizer to count with (a remote server, the mock)."""
    from lokal.llm.request import resolve_request

    count = getattr(engine, "count_prompt_tokens", None)
    if count is None:
        raise wire.APIError(
            f"model {profile.name!r}: its {profile.backend} backend cannot count tokens here",
            code="not_supported",
        )
    request = resolve_request(
        profile,
        prepared.messages,
        prepared.tools,
        strategy="react",
        backend=engine,
        tool_choice=prepared.tool_choice,
        parallel_tool_calls=prepared.parallel_tool_calls,
        response_format=prepared.response_format,
    )
    return int(count(request.prompt, request.wire_tools))


def no_reply(decision: Decision) -> wire.APIError:
    """500 ``no_valid_reply``: the engine found no usable reply within its retries."""
    error = decision.error.message if decision.error else "no reply"
    return wire.APIError.server(
        f"the model gave no usable reply after {len(decision.attempts)} attempt(s): {error}",
        "no_valid_reply",
    )


def call_required(choice: Any) -> bool:
    """Whether a request's ``tool_choice`` makes the reply a call (nothing of it is text)."""
    if choice == "required":
        return True
    if isinstance(choice, dict):
        if choice.get("type") == "function":
            return True
        return (choice.get("allowed_tools") or {}).get("mode") == "required"
    return False


def decision_log(decision: Decision) -> dict[str, Any]:
    """A decision's fields in the request log."""
    return {
        "lokal_status": decision.status,
        "attempts": len(decision.attempts),
        "tool_calls": len(decision.tool_calls) if decision.ok else 0,
        "prompt_tokens": decision.usage.prompt_tokens,
        "completion_tokens": decision.usage.completion_tokens,
        "decision_ms": decision.latency_ms,
    }


def _give_call_ids(decision: Decision) -> None:
    """Give the reply's calls the ids the client gets (``call_`` and 24 hex digits, unique
    across conversations, where the decision numbers them ``call_001``…)."""
    message = decision.ai_message
    if message and message.get("tool_calls"):
        calls = [{**call, "id": wire.new_call_id()} for call in message["tool_calls"]]
        decision.ai_message = {**message, "tool_calls": calls}


def _record(
    store: ConversationStore,
    conversation: str,
    prepared: wire.Prepared,
    decision: Decision,
    profile: Profile,
) -> None:
    """One request as one run of ``conversation``: the request's messages the conversation
    does not hold yet (the question; the results of the calls the client was given, which
    it sends back with the whole conversation), then the reply, its calls under the ids the
    client got; so that ``lokal run --conversation`` continues it as it happened."""
    question = last_user_text(prepared.messages)
    new = store.unstored(conversation, prepared.messages)
    run_id = store.start_run(conversation, question, profile.name)
    for message in new:
        store.append(run_id, message)
    if decision.ai_message is not None:
        store.append(
            run_id,
            decision.ai_message,
            latency_ms=decision.latency_ms,
            usage=decision.usage.to_dict(),
        )
    store.finish_run(
        run_id,
        status="final" if decision.ok else "decision_error",
        answer=(decision.ai_message or {}).get("content") or "",
        stop_reason="served" if decision.ok else (decision.error.message if decision.error else ""),
        prompt_tokens=decision.usage.prompt_tokens,
        completion_tokens=decision.usage.completion_tokens,
        duration_s=round(decision.latency_ms / 1000, 4),
    )


def _decide(
    profile: Profile,
    prepared: wire.Prepared,
    engine: Backend,
    cancel: threading.Event,
    streamer: ContentStreamer | None,
    post: Callable[[tuple[str, Any]], None],
    state: ServeState,
) -> Decision:
    """The reply, in the worker thread: the request's sampling options on the profile, the
    stream fed with the reply's text as it is written, stopped when ``cancel`` is set."""
    if prepared.generation:
        generation = profile.generation.model_validate(
            {**profile.generation.model_dump(), **prepared.generation}
        )
        profile = profile.replace(generation=generation)

    def listener(fields: dict[str, Any]) -> None:
        if cancel.is_set():
            raise Cancelled()
        if streamer is None:
            return
        if "streamable" in fields:
            streamer.start(bool(fields["streamable"]))
        text = fields.get("text")
        if text:
            delta = streamer.feed(text)
            if delta:
                post(("content", delta))

    with listening(listener):
        return _respond(profile, prepared, engine, state)


def _respond(
    profile: Profile, prepared: wire.Prepared, engine: Backend, state: ServeState
) -> Decision:
    """The reply to one request: a turn of the runtime's agent loop (``Agent.respond``), so
    that the server's own tools (``--mcp``) run under the loop's guards (an identical call
    is not run twice, the repeat limit, the time budget, a final answer forced after
    ``SERVER_TOOL_ROUNDS`` decisions); the client gets the answer or its own tools' calls.
    The turn is kept as a trace in the server's traces folder (``/traces`` shows it), as
    every ``lokal run`` is."""
    server_tools = state.server_tools
    agent = Agent(
        profile,
        server_tools if server_tools is not None else ToolRegistry(),
        settings=AgentSettings(max_iterations=SERVER_TOOL_ROUNDS),
        backend=engine,
    )
    trace = JsonlTrace(new_trace_path(state.traces_dir)) if state.keep_traces else None
    if trace is not None:
        agent.subscribe(trace)
    client = ClientTurn(
        prepared.tools,
        prepared.tool_choice,
        prepared.parallel_tool_calls,
        prepared.response_format,
    )
    try:
        result = agent.respond(prepared.messages, client)
    finally:
        if trace is not None:
            trace.close()
    if result.decision is None:
        raise wire.APIError.server(f"no reply: {result.stop_reason}", "time_budget")
    return result.decision
