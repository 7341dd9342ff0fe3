"""The run events, typed: one class per kind of step of ``Agent.run``, with ``to_dict()``
giving the JSON object the trace (``JsonlTrace``, ``lokal run --trace``) has always written.

Every event has ``seq`` (1, 2, 3… within a run), ``time`` (``time.time()``) and
``elapsed_s`` (seconds since the run started), stamped by the run when it emits the event;
``to_dict()`` writes ``type`` first, then those three, then the kind's fields in the order
below:

=================  ================  ===========================================================
class              ``type``          fields
=================  ================  ===========================================================
``RunStart``       ``run_start``     question, profile, strategy, tools, max_iterations,
                                     history_repairs, memory
``ModelLoad``      ``model_load``    model, duration_s, (component: ``embeddings``, ``memory``;
                                     none for the chat model)
``DecisionStart``  ``decision_start``  iteration, purpose
``DecisionMade``   ``decision``      iteration, purpose, status, prompt_ref, prompt_messages
                                     (or ``prompt`` once expanded), raw_text, parse, attempts,
                                     usage, latency_ms, ai_message, error
``ToolStart``      ``tool_start``    iteration, index, call_id, name, args, (reused),
                                     start_perf, start_time
``ToolEnd``        ``tool_end``      ToolStart's, then end_perf, end_time, duration_s, status,
                                     error, timed_out, message (the ToolMessage)
``Guard``          ``guard``         guard, iteration, (call, times), (budget_s)
``Final``          ``final``         status, answer, answered, source, stop_reason, iterations,
                                     usage, duration_s
=================  ================  ===========================================================

Fields in brackets are written only when set (``reused`` only when true: a result given back
from an earlier identical call). ``event_from_dict`` reads a dict back into its class; keys a
class does not know are kept, in order, in ``extra`` (and written back by ``to_dict``), so a
trace written by a newer lokal still reads. A dict that is not an event (no known ``type``,
a field missing) raises ``EventError``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

from lokal.errors import LokalError
from lokal.messages import ToolMessage

__all__ = [
    "EVENT_CLASSES",
    "EVENT_TYPES",
    "DecisionMade",
    "DecisionStart",
    "Event",
    "EventError",
    "Final",
    "Guard",
    "ModelLoad",
    "RunEvent",
    "RunStart",
    "ToolEnd",
    "ToolStart",
    "event_from_dict",
]

_STAMPS = ("seq", "time", "elapsed_s")


class EventError(LokalError, ValueError):
    """A dict that is not a run event: not an object, an unknown ``type``, a field missing."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunEvent:
    """What every event has: its place in the run (``seq``) and when it happened. The stamps
    are None only on an event not (yet) emitted by a run."""

    type: ClassVar[str] = ""
    # fields written only when set: None (or False for a flag) leaves them out of to_dict()
    _optional: ClassVar[frozenset[str]] = frozenset()

    seq: int | None = None
    time: float | None = None
    elapsed_s: float | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, compare=True)

    def to_dict(self) -> dict[str, Any]:
        """The event as the trace writes it: ``type``, the stamps, the fields, ``extra``."""
        out: dict[str, Any] = {"type": self.type}
        for name in _STAMPS:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        for f in dataclasses.fields(self):
            if f.name in _STAMPS or f.name == "extra":
                continue
            value = getattr(self, f.name)
            if f.name in self._optional and (value is None or value is False):
                continue
            out[f.name] = value
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunEvent:
        """The event of this class in ``data`` (its ``type`` is not checked here)."""
        known = {f.name: f for f in dataclasses.fields(cls) if f.name != "extra"}
        missing = [
            name
            for name, f in known.items()
            if name not in data
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ]
        if missing:
            raise EventError(f"a {cls.type} event needs {', '.join(missing)}; got {sorted(data)}")
        for name in _STAMPS:
            value = data.get(name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float)
            ):
                raise EventError(f"a {cls.type} event's {name} must be a number, got {value!r}")
        fields = {k: v for k, v in data.items() if k in known}
        extra = {k: v for k, v in data.items() if k not in known and k != "type"}
        return cls(**fields, extra=extra)


@dataclasses.dataclass(frozen=True)
class RunStart(RunEvent):
    """The run begins: the question, how it will run, and what memory selected for it."""

    type: ClassVar[str] = "run_start"

    question: str
    profile: str
    strategy: str
    tools: list[str]
    max_iterations: int
    history_repairs: list[Any] = dataclasses.field(default_factory=list)
    memory: dict[str, Any] | None = None  # the notes selected, with their scores


@dataclasses.dataclass(frozen=True)
class ModelLoad(RunEvent):
    """A model was loaded, as a step of its own (the time budget does not count it): the
    chat model, or (``component``) another model the run uses: ``"embeddings"``, the
    embedding model of tool preselection, loaded with the tools' vectors; ``"memory"``, the
    embedding model memory loaded to rank its notes for the question."""

    type: ClassVar[str] = "model_load"
    _optional: ClassVar[frozenset[str]] = frozenset({"component"})

    model: str
    duration_s: float
    component: str | None = None  # None: the chat model


@dataclasses.dataclass(frozen=True)
class DecisionStart(RunEvent):
    """The model is asked for the next step (``purpose``: ``decide``, or ``final`` when a
    guard asks for an answer without tools)."""

    type: ClassVar[str] = "decision_start"

    iteration: int
    purpose: str


@dataclasses.dataclass(frozen=True)
class DecisionMade(RunEvent):
    """The model's decision: the prompt by reference (``prompt_ref``, ``prompt_messages``,
    see ``lokal.trace``; ``prompt`` in full once expanded), the reply and how it parsed."""

    type: ClassVar[str] = "decision"
    _optional: ClassVar[frozenset[str]] = frozenset(
        {"prompt_ref", "prompt_messages", "prompt", "tool_calling", "model"}
    )

    iteration: int
    purpose: str
    status: str  # "success" or "error"
    prompt_ref: dict[str, Any] | None = None
    prompt_messages: dict[str, dict[str, Any]] | None = None
    prompt: list[dict[str, Any]] | None = None  # an expanded (or old-format) trace's
    raw_text: str = ""
    parse: dict[str, Any] = dataclasses.field(default_factory=dict)
    attempts: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    usage: dict[str, Any] = dataclasses.field(default_factory=dict)
    latency_ms: float = 0.0
    ai_message: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    # how tools reached the model (prompt_json, builtin, constrained, staged) and the model
    # (profile, display_name, backend); absent from traces written before they were recorded
    tool_calling: str | None = None
    model: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.status == "success"


@dataclasses.dataclass(frozen=True)
class _ToolEvent(RunEvent):
    """What the start and the end of a tool call both say (``reused``: its result is given
    back from an earlier identical call instead; ``*_perf`` stamps are
    ``time.perf_counter()``)."""

    _optional: ClassVar[frozenset[str]] = frozenset({"reused"})

    iteration: int
    index: int
    call_id: str
    name: str
    args: dict[str, Any]
    reused: bool = False
    start_perf: float = 0.0
    start_time: float = 0.0


@dataclasses.dataclass(frozen=True)
class ToolStart(_ToolEvent):
    """A tool call starts."""

    type: ClassVar[str] = "tool_start"


@dataclasses.dataclass(frozen=True)
class ToolEnd(_ToolEvent):
    """A tool call ended: its status, error and ToolMessage (``message``, stored as soon as
    it exists)."""

    type: ClassVar[str] = "tool_end"

    end_perf: float = 0.0
    end_time: float = 0.0
    duration_s: float = 0.0
    status: str = "success"  # "success" or "error"
    error: str | None = None
    timed_out: bool = False
    message: ToolMessage | dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Guard(RunEvent):
    """A guard stopped the loop: ``max_iterations``, ``repeated_call`` (with the ``call`` and
    how many ``times`` it was asked for) or ``time_budget`` (with ``budget_s``)."""

    type: ClassVar[str] = "guard"
    _optional: ClassVar[frozenset[str]] = frozenset({"call", "times", "budget_s"})

    guard: str
    iteration: int
    call: dict[str, Any] | None = None
    times: int | None = None
    budget_s: float | None = None


@dataclasses.dataclass(frozen=True)
class Final(RunEvent):
    """The run ended: how, with which answer (``answered``: written by the model) and where
    the answer came from (``source``: see ``lokal.runtime.ANSWER_SOURCES``)."""

    type: ClassVar[str] = "final"

    status: str
    answer: str
    answered: bool
    stop_reason: str
    iterations: int
    usage: dict[str, int]
    duration_s: float
    source: str = "model"


Event = RunStart | ModelLoad | DecisionStart | DecisionMade | ToolStart | ToolEnd | Guard | Final

EVENT_CLASSES: tuple[type[RunEvent], ...] = (
    RunStart,
    ModelLoad,
    DecisionStart,
    DecisionMade,
    ToolStart,
    ToolEnd,
    Guard,
    Final,
)
EVENT_TYPES: tuple[str, ...] = tuple(cls.type for cls in EVENT_CLASSES)
_BY_TYPE: dict[str, type[RunEvent]] = {cls.type: cls for cls in EVENT_CLASSES}


def event_from_dict(data: Mapping[str, Any]) -> RunEvent:
    """The typed event in ``data`` (a trace line, ``to_dict()``'s output); keys its class does
    not know go to ``extra``. Raises EventError for a dict that is not an event."""
    if not isinstance(data, Mapping):
        raise EventError(f"an event is a JSON object, got {type(data).__name__}")
    kind = data.get("type")
    cls = _BY_TYPE.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise EventError(
            f"unknown event type {kind!r}; an event's type is one of {', '.join(EVENT_TYPES)}"
        )
    return cls.from_dict(data)
