"""The agent loop: decisions and tool runs until a reply has no tool calls.

    agent = Agent(profile, registry)
    result = agent.run("What is 3.14 * 5?")
    result.answer, result.status, result.events

Each iteration asks ``generate_ai_message`` for the next step, runs the reply's tool calls in
parallel through the registry, and appends the AIMessage and the ToolMessages. Guards:

- a call identical to one that already succeeded in this run is not run again: the model
  gets the earlier result back, with a reminder to answer from it;
- ``max_iterations``, the same call asked for ``repeat_limit`` times (tiny models loop on one
  call), or a decision still unusable after its retries: the model is asked once more for a
  final answer with tools disabled, from the results in hand, instead of stopping;
- ``time_budget_s``: a wall-clock budget, checked before every decision and tool turn. It
  starts at the first decision: loading the model (reported as a ``model_load`` event) and
  selecting memory (reported in ``run_start``, with the notes' scores) do not count.

``RunResult.answered`` says whether the run ended with an answer written by the model; when
even the forced answer fails, the answer says so and lists the results in hand.

Every step is a typed event (``lokal.events``: ``RunStart``, ``ModelLoad``, ``DecisionStart``,
``DecisionMade``, ``ToolStart``, ``ToolEnd``, ``Guard``, ``Final``) that a CLI, a log file
(``JsonlTrace``, one ``event.to_dict()`` a line) or a web page can subscribe to. A
``decision`` gives its prompt by content hash, with only the messages new in the run
(``prompt_ref``, ``prompt_messages``), so a trace grows linearly with the run:
``lokal.trace.read_trace`` / ``expand_events`` give the full ``prompt`` back.

A history given to ``run`` is first made a valid conversation (``repair_conversation``: a call
without a result gets an error result saying it was not run); ``run_start`` lists the repairs
(``history_repairs``, with those of the store that loaded it). Call ids go on counting through
the conversation; a run that ends without a model answer still ends its messages with an
assistant message holding the answer it ended with.

``Agent.respond`` is the same loop for a conversation a client holds (``lokal serve``): it
starts from the client's messages, offers the client's tools beside the registry's, and runs
only the registry's; a reply that calls a client's tool ends the turn (``status:
"tool_calls"``) once the registry's calls of that reply have run, since the client runs its
own. The decision options (``tool_choice``, ``parallel_tool_calls``, ``response_format``) hold
on every decision of the turn; after a guard, the forced decision offers the client's tools
only (its ``tool_choice`` still holds). A decision the engine cannot make usable ends the
turn as it is (``decision_error``: the client is told), rather than being forced.

A run stopped by an exception still ends with a ``final`` event, then the exception goes on:
``interrupted`` for Ctrl-C (KeyboardInterrupt), ``error`` for any other; its answer says so
and lists the tool results in hand, so a subscriber (the conversation store, the trace) closes
the run with what it had.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from lokal.config import Profile
from lokal.events import (
    DecisionMade,
    DecisionStart,
    Final,
    Guard,
    ModelLoad,
    RunEvent,
    RunStart,
    ToolEnd,
    ToolStart,
    event_from_dict,
)
from lokal.llm.backends import Backend
from lokal.llm.decide import generate_ai_message
from lokal.llm.prompts import REPEAT_NOTE
from lokal.messages import (
    call_id,
    call_key,
    last_user_text,
    make_ai_message,
    make_tool_message,
    read_tool_result,
    repair_conversation,
)
from lokal.records import Decision, Usage
from lokal.tools.registry import ToolRegistry
from lokal.tools.schema import tool_specs
from lokal.trace import PromptEncoder

__all__ = [
    "Agent",
    "AgentSettings",
    "ClientTurn",
    "JsonlTrace",
    "MemoryHook",
    "NullMemory",
    "RunResult",
]

EventCallback = Callable[[RunEvent], None]  # called with each typed event (lokal.events)


@dataclass
class AgentSettings:
    """Loop guards and strategy."""

    max_iterations: int = 20
    strategy: Literal["react", "plan_execute"] = "react"
    time_budget_s: float | None = 600.0
    tool_timeout_s: float = 30.0
    max_parallel_tools: int | None = None
    repeat_limit: int = 3

    def __post_init__(self) -> None:
        if self.max_iterations < 1:
            raise ValueError("max_iterations must be at least 1")
        if self.strategy not in ("react", "plan_execute"):
            raise ValueError("strategy must be 'react' or 'plan_execute'")
        if self.repeat_limit < 2:
            raise ValueError("repeat_limit must be at least 2")


@dataclass(frozen=True)
class ClientTurn:
    """What a client's request (``lokal serve``) adds to a turn of the loop: the tools the
    client runs itself (offered beside the registry's; one of the same name wins) and the
    decision options it asked for, held on every decision of the turn."""

    tools: list[Any] = field(default_factory=list)
    tool_choice: Any = None
    parallel_tool_calls: bool = True
    response_format: Any = None

    def options(self) -> dict[str, Any]:
        return {
            "tool_choice": self.tool_choice,
            "parallel_tool_calls": self.parallel_tool_calls,
            "response_format": self.response_format,
        }


class MemoryHook(Protocol):
    """What the runtime asks of memory: messages to start from, and a place to save."""

    def load(self, question: str) -> list[dict[str, Any]]: ...

    def save(self, result: RunResult) -> None: ...


class NullMemory:
    """No memory: every run starts from the question alone."""

    def load(self, question: str) -> list[dict[str, Any]]:
        return []

    def save(self, result: RunResult) -> None:
        return None


ANSWER_SOURCES = {
    "model": "the model wrote the answer",
    "quoted": "the model copied passages of the tool results lokal showed it",
    "extracted": "lokal chose the passage of a tool result that answers the question, "
    "because the model's replies failed the answer checks",
    "forced": "a guard ended the loop and the model answered without tools",
    "appended": "no answer: lokal lists the tool results the model did not use",
    "none": "no answer and no tool result",
}
MODEL_SOURCES = frozenset({"model", "quoted", "forced"})  # "the model answered"
TRUSTED_SOURCES = MODEL_SOURCES | {"extracted"}


@dataclass
class RunResult:
    """The outcome of one run: the answer, why the loop stopped, and every step.

    ``status`` says how the loop ended (``final``: the model answered; the others name the
    guard that ended it, after which the model was asked for a final answer without tools);
    ``answered`` says whether the answer was written by the model. ``tool_calls`` (a served
    turn, ``Agent.respond``): the reply calls tools the client runs.
    """

    question: str
    answer: str
    status: Literal[
        "final",
        "max_iterations",
        "repeated_call",
        "time_budget",
        "decision_error",
        "interrupted",
        "tool_calls",
    ]
    stop_reason: str
    messages: list[dict[str, Any]]
    iterations: int
    usage: dict[str, int]
    duration_s: float
    events: list[RunEvent] = field(default_factory=list)  # typed; .to_dict() for JSON
    answered: bool = True
    source: str = "model"  # where the answer came from: one of ANSWER_SOURCES
    # Agent.respond: the decision the client gets (its usage the turn's, the calls the loop
    # ran itself in parse["server_tools"]); None when no decision can be given (time budget)
    decision: Decision | None = field(default=None, repr=False, compare=False)

    @property
    def trusted(self) -> bool:
        """Whether the answer may be given as the run's answer (exit 0): written by the
        model, quoted from what lokal showed it, forced after a guard, or extracted from a
        tool result; not ``appended`` results without an answer."""
        return self.source == "extracted" or (self.answered and self.source in MODEL_SOURCES)

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "answer": self.answer,
            "answered": self.answered,
            "source": self.source,
            "status": self.status,
            "stop_reason": self.stop_reason,
            "iterations": self.iterations,
            "usage": self.usage,
            "duration_s": self.duration_s,
            "messages": self.messages,
        }


def _source_of(decision: Decision) -> str:
    """Where a successful decision's answer came from (``model``, ``quoted``, ``extracted``)."""
    return str((decision.parse or {}).get("answer_source") or "model")


def _said(source: str) -> str:
    """The stop reason of an answer from ``source``: "the model answered" only when it did."""
    if source == "extracted":
        return "the model's replies failed the answer checks; lokal quoted the tool result"
    if source == "quoted":
        return "the model answered, quoting the tool results"
    return "the model answered"


class JsonlTrace:
    """Writes every event as one JSON line (``event.to_dict()``), flushed at once (a crash
    loses at most the step in flight)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def __call__(self, event: RunEvent) -> None:
        line = json.dumps(event.to_dict(), ensure_ascii=False, default=str)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        self._file.close()


class Agent:
    """One agent: a profile, a tool registry, loop settings, and subscribers to its events."""

    def __init__(
        self,
        profile: Profile,
        registry: ToolRegistry,
        *,
        settings: AgentSettings | None = None,
        backend: Backend | None = None,
        system_prompt: str | None = None,
        memory: MemoryHook | None = None,
    ) -> None:
        self.profile = profile
        self.registry = registry
        self.settings = settings or AgentSettings()
        self.backend = backend
        self.system_prompt = system_prompt
        self.memory = memory or NullMemory()
        self._subscribers: list[EventCallback] = []
        self._lock = threading.Lock()

    def subscribe(self, callback: EventCallback) -> None:
        """Call ``callback(event)`` for every step of every run, with the typed event
        (``lokal.events``)."""
        self._subscribers.append(callback)

    # -- the loop -----------------------------------------------------------------------

    def run(self, question: str, history: list[dict[str, Any]] | None = None) -> RunResult:
        """Answer ``question``, continuing ``history`` (earlier messages) if given."""
        history = history if history is not None else []
        # the history as a valid conversation (a call without its result would leave the
        # prompt with a dangling call); repairs made here or by the store that loaded it
        # are reported in run_start
        repaired, repairs = repair_conversation(list(history))
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        messages = [
            *system,
            *self.memory.load(question),
            *repaired,
            {"role": "user", "content": question},
        ]
        run = _Run(self, question, messages, [*getattr(history, "repairs", []), *repairs])
        result = self._execute(run)
        self.memory.save(result)
        return result

    def respond(self, messages: list[dict[str, Any]], client: ClientTurn) -> RunResult:
        """One turn of a conversation a client holds (``lokal serve``): the loop from the
        client's ``messages`` (taken as they are: the server checked them), running the
        registry's tools, until a reply answers or calls a client's tool. ``result.decision``
        is the reply for the client. Memory is neither read nor saved."""
        run = _Run(self, last_user_text(messages), list(messages), [], client=client)
        result = self._execute(run)
        result.decision = run.client_reply(result)
        return result

    def _execute(self, run: _Run) -> RunResult:
        try:
            result = run.execute()
        except KeyboardInterrupt:  # Ctrl-C: the run ends as interrupted, with what it had
            run.stop_for_exception("interrupted", "the run was interrupted (Ctrl-C)")
            raise
        except Exception as exc:  # a failure (an input or a model that cannot load...)
            run.stop_for_exception("error", f"the run failed: {' '.join(str(exc).split())}")
            raise
        return result


class _Run:
    """The state of one run (kept apart from Agent so an Agent can run many questions)."""

    def __init__(
        self,
        agent: Agent,
        question: str,
        messages: list[dict[str, Any]],
        repairs: list[Any],
        *,
        client: ClientTurn | None = None,
    ) -> None:
        self.agent = agent
        self.settings = agent.settings
        self.question = question
        self.events: list[RunEvent] = []
        self.seq = 0
        self.started = time.perf_counter()
        self.budget_started: float | None = None  # set at the first decision
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0}
        self.spent = Usage()  # every decision's tokens (a served turn's reply carries them)
        self.calls_seen: Counter[str] = Counter()
        self.prompts = PromptEncoder()  # decision events give prompts by content hash
        self.client = client
        self.client_names = {spec.name for spec in tool_specs(client.tools)} if client else set()
        # the tools this run runs (a client's tool of the same name wins over the registry's);
        # Tools are ToolSpecs: checked once, passed as is
        self.tools = [t for t in agent.registry if t.name not in self.client_names]
        self.history_repairs = repairs
        self.messages: list[dict[str, Any]] = messages
        # this run's messages start at the question (a served turn's after the client's)
        self.run_start = len(messages) - 1 if client is None else len(messages)
        self.iteration = 0  # the decision in hand
        self.last_decision: Decision | None = None
        self.ran: list[dict[str, Any]] = []  # the calls this run ran: name, args, status
        self.ended = False  # a final event was emitted

    def emit(self, event: RunEvent) -> None:
        """Stamp ``event`` with its place in the run and give it to every subscriber."""
        with self.agent._lock:
            self.seq += 1
            event = dataclasses.replace(
                event,
                seq=self.seq,
                time=time.time(),
                elapsed_s=round(time.perf_counter() - self.started, 4),
            )
            self.events.append(event)
        for callback in self.agent._subscribers:
            callback(event)

    def over_budget(self) -> bool:
        budget = self.settings.time_budget_s
        if budget is None or self.budget_started is None:
            return False
        return time.perf_counter() - self.budget_started > budget

    def load_model(self) -> None:
        """Load what the decisions use before the first one, each as a step of its own (a
        ``model_load`` event with its duration) that the time budget does not count: the
        profile's backend (nothing to do when the agent was given its backend; the mock
        loads no model, so it has no such step), then the embedding model of tool
        preselection with the tools' vectors (``component: "embeddings"``), when the profile
        preselects tools. The one producer of ``model_load``: ``lokal run`` shows it live."""
        profile = self.agent.profile
        backend = self.agent.backend
        if backend is None:
            from lokal.llm.backends import get_backend

            started = time.perf_counter()
            backend = get_backend(profile)  # cached: the decisions reuse it
            seconds = round(time.perf_counter() - started, 4)
            if profile.backend != "mock":
                self.emit(ModelLoad(model=profile.display_name, duration_s=seconds))
        self.load_embeddings(backend)

    def load_embeddings(self, backend: Backend | None) -> None:
        """The embedding model of tool preselection, and the tools' vectors, loaded now when
        the decisions will rank the tools (``preselect_k``, or staged decisions on a backend
        that scores) rather than inside the first decision, where its seconds would go
        unlabelled. Nothing is reported when it was loaded already (an earlier run)."""
        settings = self.agent.profile.tool_calling
        if not self.tools:
            return
        if settings.preselect_k is None:
            if settings.mode != "staged":
                return
            from lokal.llm.staged import can_score

            if not can_score(backend):
                return
        from lokal.llm.select import default_selector
        from lokal.rag.embeddings import MINILM

        started = time.perf_counter()
        dense = default_selector().prepare(self.tools)
        seconds = round(time.perf_counter() - started, 4)
        if dense:
            self.emit(ModelLoad(model=MINILM, duration_s=seconds, component="embeddings"))

    def decide(self, iteration: int, purpose: str | None = None) -> Decision:
        self.iteration = iteration
        self.emit(DecisionStart(iteration=iteration, purpose=purpose or "decide"))
        # the registry as it is now: tools withdrawn during the run (an MCP server that died)
        # are no longer offered
        tools: list[Any] = [t for t in self.agent.registry if t.name not in self.client_names]
        options: dict[str, Any] = {}
        if self.client is not None:
            options = self.client.options()
            if purpose == "final":  # after a guard: the client's tools only, its choice holds
                tools = []
                purpose = None if self.client.tools else "final"
            tools = [*self.client.tools, *tools]
        result = generate_ai_message(
            self.agent.profile,
            list(self.messages),  # as it is now: the run goes on appending to its own
            tools,
            strategy=self.settings.strategy,
            backend=self.agent.backend,
            purpose=purpose,
            **options,
        )
        self.last_decision = result
        self.spent.add(result.usage)
        self.usage["prompt_tokens"] += result.usage.prompt_tokens or 0
        self.usage["completion_tokens"] += result.usage.completion_tokens or 0
        if result.ok and result.tool_calls:
            result.ai_message = self.numbered(result.ai_message)
        record = result.to_dict()
        self.emit(
            DecisionMade(
                iteration=iteration,
                purpose=result.purpose,
                status=result.status,
                # the prompt by reference: only what is new since the previous decision
                **self.prompts.prompt(result.prompt),
                raw_text=result.raw_text,
                parse=result.parse,
                attempts=self.prompts.attempts(record["attempts"]),
                usage=record["usage"],
                latency_ms=result.latency_ms,
                ai_message=result.ai_message,
                error=record["error"],
                tool_calling=result.tool_calling,
                model=result.model,
            )
        )
        return result

    def finish(
        self,
        status: str,
        answer: str,
        reason: str,
        iterations: int,
        *,
        answered: bool = True,
        source: str = "model",
        recorded: bool = False,
    ) -> RunResult:
        """End the run with ``answer``. ``recorded``: the answer's message is in the history
        already (a decision's reply), so it is not added twice."""
        duration = round(time.perf_counter() - self.started, 4)
        answered = answered and source in MODEL_SOURCES
        if not answered and not recorded:
            # the run's outcome ends its conversation even when the model wrote no answer
            self.messages.append({"role": "assistant", "content": answer, "tool_calls": []})
        self.ended = True
        self.emit(
            Final(
                status=status,
                answer=answer,
                answered=answered,
                stop_reason=reason,
                iterations=iterations,
                usage=dict(self.usage),
                duration_s=duration,
                source=source,
            )
        )
        return RunResult(
            question=self.question,
            answer=answer,
            status=status,  # type: ignore[arg-type]
            stop_reason=reason,
            messages=self.messages,
            iterations=iterations,
            usage=dict(self.usage),
            duration_s=duration,
            events=self.events,
            answered=answered,
            source=source,
        )

    def execute(self) -> RunResult:
        s = self.settings
        self.emit(
            RunStart(
                question=self.question,
                profile=self.agent.profile.name,
                strategy=s.strategy,
                tools=[t.name for t in self.tools],
                max_iterations=s.max_iterations,
                history_repairs=self.history_repairs,
                # the notes memory selected for this question, with their scores (if it says)
                memory=getattr(self.agent.memory, "last_selection", None),
            )
        )
        take = getattr(self.agent.memory, "take_load_seconds", None)
        seconds = take() if callable(take) else None
        if seconds is not None:  # memory loaded the embedding model to rank its notes
            from lokal.rag.embeddings import MINILM

            self.emit(ModelLoad(model=MINILM, duration_s=seconds, component="memory"))
        self.load_model()
        self.budget_started = time.perf_counter()  # the time budget starts here
        for iteration in range(1, s.max_iterations + 1):
            if self.over_budget():
                return self.stop_for_time(iteration - 1)
            result = self.decide(iteration)
            if not result.ok:
                assert result.error is not None
                reason = f"the model gave no usable reply: {result.error.message}"
                if self.client is not None:  # the client is told (its options hold)
                    return self.finish(
                        "decision_error", "", reason, iteration, answered=False, source="none"
                    )
                return self.force_final("decision_error", reason, iteration)
            message = result.ai_message
            assert message is not None
            if not message["tool_calls"]:
                self.messages.append(message)
                source = _source_of(result)
                return self.finish(
                    "final",
                    message["content"],
                    _said(source),
                    iteration,
                    source=source,
                    recorded=True,
                )
            repeated = self.repeated_call(message["tool_calls"])
            if repeated is not None:
                # the repeat is not run, so it does not join the history
                return self.stop_for_repeat(repeated, iteration)
            if self.over_budget():
                return self.stop_for_time(iteration)
            self.messages.append(message)
            theirs = [c for c in message["tool_calls"] if c["name"] in self.client_names]
            own = [c for c in message["tool_calls"] if c["name"] not in self.client_names]
            if own:
                self.messages.extend(self.run_calls(own, iteration))
            if theirs:
                return self.hand_off(result, theirs, ran_own=bool(own), iteration=iteration)
        self.emit(Guard(guard="max_iterations", iteration=s.max_iterations))
        reason = f"reached max_iterations={s.max_iterations}"
        return self.force_final("max_iterations", reason, s.max_iterations)

    def run_calls(self, calls: list[dict[str, Any]], iteration: int) -> list[dict[str, Any]]:
        """The ToolMessages of one turn, in call order. A call identical to one that already
        succeeded in this run is not run again: its earlier result comes back, marked as a
        repeat (the model is reminded to answer from it)."""
        fresh = [c for c in calls if self.earlier_success(c) is None]
        ran = iter(
            self.agent.registry.execute_many(
                fresh,
                max_workers=self.settings.max_parallel_tools,
                default_timeout=self.settings.tool_timeout_s,
                # the registry's tool_start / tool_end payloads, read into their classes
                on_event=lambda kind, payload: self.emit(
                    event_from_dict({"type": kind, "iteration": iteration, **payload})
                ),
            )
            if fresh
            else []
        )
        out = []
        for call in calls:
            earlier = self.earlier_success(call) if call not in fresh else None
            if earlier is None:
                out.append(next(ran))
                continue
            message = make_tool_message(
                call,
                output={
                    "repeated_call": True,
                    "earlier_result": earlier["output"],
                    "note": REPEAT_NOTE,
                },
            )
            stamp = {"start_perf": time.perf_counter(), "start_time": time.time()}
            common = {
                "iteration": iteration,
                "index": calls.index(call),
                "call_id": call["id"],
                "name": call["name"],
                "args": call["args"],
                "reused": True,
            }
            self.emit(ToolStart(**common, **stamp))
            self.emit(
                ToolEnd(
                    **common,
                    **stamp,
                    end_perf=stamp["start_perf"],
                    end_time=stamp["start_time"],
                    duration_s=0.0,
                    status="success",
                    error=None,
                    timed_out=False,
                    message=message,
                )
            )
            out.append(message)
        for call, message in zip(calls, out, strict=True):
            status = read_tool_result(message)["status"]
            self.ran.append({"name": call["name"], "args": call["args"], "status": status})
        return out

    # -- a served turn ------------------------------------------------------------------

    def hand_off(
        self, decision: Decision, calls: list[dict[str, Any]], *, ran_own: bool, iteration: int
    ) -> RunResult:
        """End a served turn whose reply calls tools the client runs: the client gets those
        calls (the registry's calls of the same reply ran already and stay out of it)."""
        if ran_own:
            decision.ai_message = make_ai_message("", calls)
        names = ", ".join(sorted({c["name"] for c in calls}))
        reason = f"the reply calls tools the client runs ({names})"
        return self.finish("tool_calls", "", reason, iteration, answered=False, source="none")

    def client_reply(self, result: RunResult) -> Decision | None:
        """The decision a served turn gives its client: the last one, with the tokens of
        every decision of the turn and the calls the loop ran (``parse["server_tools"]``);
        None when the turn ended without one the client can be given (the time budget ran
        out between decisions)."""
        decision = self.last_decision
        if decision is None or result.status == "time_budget":
            return None
        decision.usage = Usage(self.spent.prompt_tokens, self.spent.completion_tokens)
        if self.ran:
            decision.parse = {**decision.parse, "server_tools": list(self.ran)}
        return decision

    # -- guards -------------------------------------------------------------------------

    def repeated_call(self, calls: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The first call that reaches the repeat limit with this reply, if any."""
        for call in calls:
            key = call_key(call["name"], call["args"])
            self.calls_seen[key] += 1
            if self.calls_seen[key] >= self.settings.repeat_limit:
                return call
        return None

    def earlier_success(self, call: dict[str, Any]) -> dict[str, Any] | None:
        """The result of an identical call that succeeded earlier in this run, if any."""
        result = self.last_result_of(call)
        if result is None or result["status"] != "success":
            return None
        output = result.get("output")
        if isinstance(output, dict) and output.get("repeated_call"):
            return {"status": "success", "output": output.get("earlier_result"), "error": None}
        return result

    def numbered(self, message: dict[str, Any]) -> dict[str, Any]:
        """``message`` with call ids that go on counting from the calls already in the
        conversation (``call_001``, ``call_002``… once per conversation, not per reply, and
        never an id the history already has), so that a ToolMessage answers exactly one call."""
        taken = {
            c.get("id")
            for m in self.messages
            if m.get("role") == "assistant"
            for c in m.get("tool_calls") or []
        }
        number = len(taken)
        calls = []
        for call in message["tool_calls"]:
            while call_id(number) in taken:
                number += 1
            calls.append({**call, "id": call_id(number)})
            number += 1
        return {**message, "tool_calls": calls}

    def last_result_of(self, call: dict[str, Any]) -> Any:
        """The result of the last call of this run identical to ``call``, if any."""
        found = None
        results = {
            m.get("tool_call_id"): m
            for m in self.messages[self.run_start :]
            if m.get("role") == "tool"
        }
        for message in self.messages[self.run_start :]:
            if message.get("role") != "assistant":
                continue
            for earlier in message.get("tool_calls") or []:
                if (
                    call_key(earlier["name"], earlier["args"])
                    == call_key(call["name"], call["args"])
                    and earlier["id"] in results
                ):
                    found = read_tool_result(results[earlier["id"]])
        return found

    def stop_for_repeat(self, call: dict[str, Any], iteration: int) -> RunResult:
        times = self.calls_seen[call_key(call["name"], call["args"])]
        args = json.dumps(call["args"], ensure_ascii=False)
        reason = f"the model asked for {call['name']}({args}) {times} times with the same arguments"
        self.emit(Guard(guard="repeated_call", iteration=iteration, call=call, times=times))
        return self.force_final("repeated_call", reason, iteration)

    def stop_for_time(self, iterations: int) -> RunResult:
        budget = self.settings.time_budget_s
        reason = f"the time budget of {budget} s ran out"
        self.emit(Guard(guard="time_budget", iteration=iterations, budget_s=budget))
        return self.no_answer("time_budget", reason, iterations)

    def force_final(self, status: str, reason: str, iterations: int) -> RunResult:
        """End the run with one more decision, tools disabled: the model answers from the
        results in hand. If even that fails, the answer says so and lists those results."""
        reason = f"{reason}; asked for a final answer without tools"
        if self.over_budget():
            return self.stop_for_time(iterations)
        result = self.decide(iterations + 1, purpose="final")
        if result.ok and result.tool_calls:  # a served turn: the client's tools only
            return self.hand_off(result, result.tool_calls, ran_own=False, iteration=iterations)
        if result.ok and result.ai_message is not None:
            self.messages.append(result.ai_message)
            source = "extracted" if _source_of(result) == "extracted" else "forced"
            if source == "extracted":
                reason += "; " + _said(source)
            return self.finish(
                status,
                result.ai_message["content"],
                reason,
                iterations,
                source=source,
                recorded=True,
            )
        reason += f", which failed too ({result.error.message if result.error else 'no reply'})"
        return self.no_answer(status, reason, iterations)

    def no_answer(self, status: str, reason: str, iterations: int) -> RunResult:
        """End without an answer: the results in hand are listed (``appended``), or none."""
        text = self.results_in_hand(reason)
        source = "none" if text.endswith("No tool result was obtained.") else "appended"
        return self.finish(status, text, reason, iterations, answered=False, source=source)

    def stop_for_exception(self, status: str, reason: str) -> None:
        """End a run that an exception stopped (``interrupted``: Ctrl-C; ``error``) with a
        ``final`` event of that status, so that its subscribers (the conversation store, the
        trace) close it with what it had: the answer lists the tool results in hand. Nothing
        when the run already ended. A subscriber that fails here is skipped: the exception
        that stopped the run is the one the caller sees."""
        if self.ended:
            return
        self.ended = True
        duration = round(time.perf_counter() - self.started, 4)
        answer = self.results_in_hand(reason)
        self.messages.append({"role": "assistant", "content": answer, "tool_calls": []})
        final = Final(
            status=status,
            answer=answer,
            answered=False,
            stop_reason=reason,
            iterations=self.iteration,
            usage=dict(self.usage),
            duration_s=duration,
            source="none" if answer.endswith("No tool result was obtained.") else "appended",
        )
        with self.agent._lock:
            self.seq += 1
            final = dataclasses.replace(final, seq=self.seq, time=time.time(), elapsed_s=duration)
            self.events.append(final)
        for callback in self.agent._subscribers:
            try:
                callback(final)
            except Exception:  # see the docstring
                continue

    def results_in_hand(self, reason: str) -> str:
        """A plain account of the run when the model wrote no answer: why, and the
        successful tool results of this run (each cut to 1,000 characters)."""
        lines = [f"No final answer: {reason}."]
        calls = {
            c["id"]: c
            for m in self.messages[self.run_start :]
            if m.get("role") == "assistant"
            for c in m.get("tool_calls") or []
        }
        for message in self.messages[self.run_start :]:
            if message.get("role") != "tool":
                continue
            result = read_tool_result(message)
            if result["status"] != "success":
                continue
            call = calls.get(message.get("tool_call_id"), {"name": message.get("name")})
            shown = json.dumps(result["output"], ensure_ascii=False, default=str)
            lines.append(f"- {call['name']}: {shown[:1000]}")
        if len(lines) == 1:
            lines.append("No tool result was obtained.")
        return "\n".join(lines)
