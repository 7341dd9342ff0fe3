"""``lokal trace export``: a run's trace as OpenTelemetry spans, following the GenAI semantic
conventions of OpenTelemetry semantic conventions **1.37.0** (``SCHEMA_URL``), written as
OTLP JSON or sent to a collector with the OpenTelemetry SDK (the ``otel`` extra).

The spans of one run (one trace id):

- ``invoke_agent lokal``: the run (root; INTERNAL), from ``run_start`` to ``final``;
- ``chat {model}``: one per decision (CLIENT, child of the run), from its
  ``decision_start`` to its ``decision`` event; each retried attempt is a span event
  ``lokal.attempt.error`` (its ``error.type``);
- ``execute_tool {name}``: one per tool run (INTERNAL, child of the run, not of the chat span:
  the decision has ended when its tools start), with a span link to the ``chat`` span whose
  reply asked for the call; a failed run has ``error.type`` and status ERROR;
- guards are span events ``lokal.guard`` of the run span.

Ids are derived from the trace (a hash of the run's start time and question), so exporting a
run twice gives the same ids. Message contents (prompts, replies, tool arguments and results,
the answer, error messages that may quote them) are written only with ``include_content``.
In OTLP JSON, ids are hex strings and times unix nanoseconds as strings (OTLP/HTTP JSON
encoding), 64-bit integers as strings.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import re
from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

from lokal.errors import LokalError

__all__ = ["SCHEMA_URL", "SEMCONV_VERSION", "send_otlp", "trace_to_otlp"]

SEMCONV_VERSION = "1.37.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
# OTLP's SpanKind and StatusCode numbers (opentelemetry/proto/trace/v1/trace.proto)
KIND_INTERNAL, KIND_CLIENT = 1, 3
STATUS_UNSET, STATUS_OK, STATUS_ERROR = 0, 1, 2
AGENT_NAME = "lokal"


def _version() -> str:
    """lokal's installed version ("0" when not installed as a distribution)."""
    try:
        from importlib.metadata import version

        return version("lokal")
    except Exception:  # not installed as a distribution
        return "0"


def _nanos(seconds: float | None) -> str:
    """Unix seconds as OTLP JSON's nanoseconds (a string; None is 0)."""
    return str(round((seconds or 0.0) * 1e9))


def _value(value: Any) -> dict[str, Any]:
    """A Python value as an OTLP JSON ``AnyValue``."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": str(value)}


def _attributes(values: dict[str, Any]) -> list[dict[str, Any]]:
    """A dict as OTLP JSON attributes, leaving out the None values."""
    return [{"key": k, "value": _value(v)} for k, v in values.items() if v is not None]


def _content_json(value: Any) -> str:
    """A message content attribute's value: JSON text, unicode kept."""
    return json.dumps(value, ensure_ascii=False, default=str)


def _parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A lokal message's content as semconv message parts (text, tool_call,
    tool_call_response)."""
    parts: list[dict[str, Any]] = []
    if message.get("role") == "tool":
        response: Any = message.get("content")
        with contextlib.suppress(TypeError, ValueError):
            response = json.loads(response)
        parts.append(
            {"type": "tool_call_response", "id": message.get("tool_call_id"), "response": response}
        )
        return parts
    content = message.get("content")
    if content:
        parts.append(
            {"type": "text", "content": content if isinstance(content, str) else str(content)}
        )
    for call in message.get("tool_calls") or []:
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id"),
                "name": call.get("name"),
                "arguments": call.get("args", call.get("arguments")),
            }
        )
    return parts


def _messages(prompt: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The semconv ``gen_ai.system_instructions`` parts and ``gen_ai.input.messages``."""
    system: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    for message in prompt:
        if message.get("role") == "system":
            system.append({"type": "text", "content": str(message.get("content") or "")})
        else:
            messages.append({"role": message.get("role", "user"), "parts": _parts(message)})
    return system, messages


def _error_type(error: str | None, timed_out: bool) -> str:
    """A tool error's ``error.type``: timeout, the name heading its message, or tool_error."""
    if timed_out:
        return "timeout"
    head = (error or "").split(":", 1)[0].strip()
    return head if re.fullmatch(r"[A-Za-z_][\w.]*", head) else "tool_error"


class _Ids:
    """The trace id and span ids of a run, derived from its seed (stable across exports)."""

    def __init__(self, seed: str) -> None:
        self.seed = seed
        self.trace_id = hashlib.sha256(f"trace {seed}".encode()).hexdigest()[:32]

    def span(self, *key: Any) -> str:
        """The span id for ``key`` (e.g. ``"chat", 2``)."""
        text = " ".join(str(k) for k in key)
        return hashlib.sha256(f"span {self.seed} {text}".encode()).hexdigest()[:16]


@dataclasses.dataclass
class _Span:
    """One span of the run, before it is written as OTLP JSON."""

    span_id: str
    name: str
    kind: int
    begin: float
    end: float
    attributes: dict[str, Any]
    parent: str | None
    status: tuple[int, str] = (STATUS_UNSET, "")
    events: list[dict[str, Any]] | None = None
    links: list[dict[str, Any]] | None = None

    def to_otlp(self, trace_id: str) -> dict[str, Any]:
        """The span as OTLP JSON (an end before the start is moved to the start)."""
        out: dict[str, Any] = {
            "traceId": trace_id,
            "spanId": self.span_id,
            "name": self.name,
            "kind": self.kind,
            "startTimeUnixNano": _nanos(self.begin),
            "endTimeUnixNano": _nanos(max(self.end, self.begin)),
            "attributes": _attributes(self.attributes),
        }
        if self.parent:
            out["parentSpanId"] = self.parent
        if self.events:
            out["events"] = self.events
        if self.links:
            out["links"] = self.links
        code, message = self.status
        if code != STATUS_UNSET:
            out["status"] = {"code": code, **({"message": message} if message else {})}
        return out


@dataclasses.dataclass(frozen=True)
class _Run:
    """What every span of a run shares: its first and last events, the model, the ids."""

    start: dict[str, Any]
    final: dict[str, Any] | None
    model: str
    ids: _Ids
    root_id: str
    last_time: float

    @classmethod
    def of(cls, events: list[dict[str, Any]]) -> _Run:
        """The run of a trace's events; a LokalError when they hold no ``run_start``."""
        start = _first(events, "run_start")
        if start is None:
            raise LokalError("the trace has no run_start event: not a run of lokal")
        ids = _Ids(f"{start.get('time')} {start.get('question')}")
        return cls(
            start=start,
            final=_first(events, "final"),
            model=_chat_model(events) or start.get("profile") or "unknown",
            ids=ids,
            root_id=ids.span("run"),
            last_time=max((e.get("time") or 0.0) for e in events),
        )

    @property
    def end(self) -> float:
        """When the run ended: its ``final`` event, else the trace's last event."""
        return (self.final or {}).get("time") or self.last_time

    def to_otlp(self, span: _Span) -> dict[str, Any]:
        """``span`` as OTLP JSON in this run's trace."""
        return span.to_otlp(self.ids.trace_id)


def _first(events: list[dict[str, Any]], kind: str) -> dict[str, Any] | None:
    """The first event of type ``kind``, or None."""
    return next((e for e in events if e.get("type") == kind), None)


def _chat_model(events: list[dict[str, Any]]) -> Any:
    """The model of the first chat model load (not the embeddings': those have a component)."""
    loads = (e for e in events if e.get("type") == "model_load")
    return next((e.get("model") for e in loads if not e.get("component")), None)


def trace_to_otlp(
    events: Iterable[dict[str, Any]],
    *,
    include_content: bool = False,
    service_name: str = "lokal",
) -> dict[str, Any]:
    """The run in ``events`` (a trace's dicts, expanded: ``lokal.trace.read_trace``) as an
    OTLP ``ExportTraceServiceRequest`` in JSON form."""
    events = list(events)
    run = _Run.of(events)
    walk = _SpanWalk(run, include_content)
    walk.walk(events)
    root = _run_span(run, walk.root_events, include_content)
    return _request([root, *walk.spans], service_name)


class _SpanWalk:
    """One pass over a run's events: a chat span per decision, a tool span per tool run (with
    a link to the chat span that asked for it), the guards as events of the run span."""

    def __init__(self, run: _Run, include_content: bool) -> None:
        self.run = run
        self.include_content = include_content
        self.spans: list[dict[str, Any]] = []
        self.root_events: list[dict[str, Any]] = []
        self.chat_of_call: dict[str, str] = {}  # call id -> the chat span that asked for it
        self.last_chat: str | None = None
        self.pending_start: dict[str, Any] | None = None  # the open decision's start
        self.tool_starts: dict[tuple[Any, Any, Any], dict[str, Any]] = {}  # tools running
        self.decisions = 0

    def walk(self, events: list[dict[str, Any]]) -> None:
        """Hand each event to the handler of its type; then close the tools still running."""
        handlers = {
            "decision_start": self.on_decision_start,
            "decision": self.on_decision,
            "tool_start": self.on_tool_start,
            "tool_end": self.on_tool_end,
            "guard": self.on_guard,
        }
        for event in events:
            handler = handlers.get(event.get("type"))
            if handler is not None:
                handler(event)
        for start_event in self.tool_starts.values():  # still running when the trace ends
            unfinished = {**start_event, "end_time": self.run.last_time, "status": "unfinished"}
            self.add_tool_span(unfinished)

    def on_decision_start(self, event: dict[str, Any]) -> None:
        """Keep the start of the decision that comes next."""
        self.pending_start = event

    def on_decision(self, event: dict[str, Any]) -> None:
        """A chat span for the decision; remember which calls its reply asked for."""
        self.decisions += 1
        span_id = self.run.ids.span("chat", self.decisions)
        begin = _decision_begin(self.pending_start, event)
        self.pending_start = None
        self.spans.append(_chat_span(self.run, span_id, begin, event, self.include_content))
        self.last_chat = span_id
        for call in (event.get("ai_message") or {}).get("tool_calls") or []:
            if call.get("id"):
                self.chat_of_call[call["id"]] = span_id

    def on_tool_start(self, event: dict[str, Any]) -> None:
        """Note a tool run that started (a span only if it never ends)."""
        self.tool_starts[_tool_key(event)] = event

    def on_tool_end(self, event: dict[str, Any]) -> None:
        """A tool span for the tool run that ended."""
        self.tool_starts.pop(_tool_key(event), None)
        self.add_tool_span(event)

    def on_guard(self, event: dict[str, Any]) -> None:
        """A guard as a ``lokal.guard`` event of the run span."""
        self.root_events.append(_guard_event(event))

    def add_tool_span(self, event: dict[str, Any]) -> None:
        """The span of the tool run ``event``, linked to the chat span that asked for it."""
        asker = self.chat_of_call.get(event.get("call_id")) or self.last_chat
        self.spans.append(_tool_span(self.run, event, asker, self.include_content))


def _tool_key(event: dict[str, Any]) -> tuple[Any, Any, Any]:
    """What pairs a ``tool_start`` with its ``tool_end``."""
    return (event.get("iteration"), event.get("call_id"), event.get("index"))


def _decision_begin(pending_start: dict[str, Any] | None, event: dict[str, Any]) -> float:
    """When a decision began: its ``decision_start``, else its end less its latency."""
    end = event.get("time") or 0.0
    return (pending_start or {}).get("time") or end - (event.get("latency_ms") or 0) / 1e3


def _chat_span(
    run: _Run, span_id: str, begin: float, event: dict[str, Any], include_content: bool
) -> dict[str, Any]:
    """The ``chat {model}`` span of a decision, its failed attempts as span events."""
    end = event.get("time") or 0.0
    attempts = event.get("attempts") or []
    reasons = [a.get("finish_reason") for a in attempts[-1:] if a.get("finish_reason")]
    attrs = _chat_attributes(event, run.model, reasons)
    if include_content:
        attrs.update(_chat_content(event, reasons))
    failed = event.get("status") != "success"
    error_type = (event.get("error") or {}).get("type") or "error"
    span = _Span(
        span_id,
        f"chat {run.model}",
        KIND_CLIENT,
        begin,
        end,
        attrs,
        parent=run.root_id,
        status=(STATUS_ERROR, error_type) if failed else (STATUS_UNSET, ""),
        events=_attempt_errors(attempts, end, include_content),
    )
    return run.to_otlp(span)


def _chat_attributes(event: dict[str, Any], model: str, reasons: list[Any]) -> dict[str, Any]:
    """A decision's semconv and lokal attributes, without message contents."""
    usage = event.get("usage") or {}
    parse = event.get("parse") or {}
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens": int(usage.get("prompt_tokens") or 0),
        "gen_ai.usage.output_tokens": int(usage.get("completion_tokens") or 0),
        "gen_ai.response.finish_reasons": reasons or None,
        "lokal.decision.iteration": event.get("iteration"),
        "lokal.decision.purpose": event.get("purpose"),
        "lokal.decision.attempts": len(event.get("attempts") or []),
        "lokal.parse.format": parse.get("format"),
        "lokal.parse.repaired": parse.get("repaired"),
        "lokal.tool_calling": event.get("tool_calling"),
    }
    if event.get("status") != "success":
        attrs["error.type"] = (event.get("error") or {}).get("type") or "error"
    return attrs


def _chat_content(event: dict[str, Any], reasons: list[Any]) -> dict[str, Any]:
    """A decision's prompt and reply as semconv message attributes."""
    system, messages = _messages(event.get("prompt") or [])
    attrs: dict[str, Any] = {}
    if system:
        attrs["gen_ai.system_instructions"] = _content_json(system)
    attrs["gen_ai.input.messages"] = _content_json(messages)
    message = event.get("ai_message")
    if message:
        output = {
            "role": "assistant",
            "parts": _parts(message),
            "finish_reason": reasons[0] if reasons else "stop",
        }
        attrs["gen_ai.output.messages"] = _content_json([output])
    return attrs


def _attempt_errors(
    attempts: list[dict[str, Any]], end: float, include_content: bool
) -> list[dict[str, Any]]:
    """A ``lokal.attempt.error`` span event per failed attempt, at the decision's end."""
    span_events = []
    for attempt in attempts:
        failure = attempt.get("error")
        if not failure:
            continue
        detail: dict[str, Any] = {
            "error.type": failure.get("type"),
            "lokal.attempt": attempt.get("attempt"),
            "lokal.parse_kind": failure.get("parse_kind"),
        }
        if include_content:
            detail["lokal.error.message"] = failure.get("message")
            detail["lokal.raw_text"] = attempt.get("raw_text")
        span_events.append(
            {
                "timeUnixNano": _nanos(end),
                "name": "lokal.attempt.error",
                "attributes": _attributes(detail),
            }
        )
    return span_events


def _guard_event(event: dict[str, Any]) -> dict[str, Any]:
    """A ``guard`` event as a ``lokal.guard`` span event."""
    detail = {k: event.get(k) for k in ("guard", "iteration", "times", "budget_s")}
    return {
        "timeUnixNano": _nanos(event.get("time")),
        "name": "lokal.guard",
        "attributes": _attributes({f"lokal.guard.{k}": v for k, v in detail.items()}),
    }


def _tool_span(
    run: _Run, event: dict[str, Any], asker: str | None, include_content: bool
) -> dict[str, Any]:
    """The ``execute_tool {name}`` span of a tool run, linked to the chat span ``asker``."""
    call_id = event.get("call_id")
    begin = event.get("start_time") or event.get("time") or 0.0
    end = event.get("end_time") or event.get("time") or begin
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": event.get("name"),
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
        "lokal.tool.lane": event.get("index"),
        "lokal.decision.iteration": event.get("iteration"),
        "lokal.tool.reused": event.get("reused") or None,
    }
    status = _tool_status(event)
    if status[0] != STATUS_UNSET:
        attrs["error.type"] = status[1]
    if include_content:
        attrs.update(_tool_content(event))
    span = _Span(
        run.ids.span("tool", event.get("iteration"), call_id, event.get("index")),
        f"execute_tool {event.get('name')}",
        KIND_INTERNAL,
        begin,
        end,
        attrs,
        parent=run.root_id,
        status=status,
        links=[{"traceId": run.ids.trace_id, "spanId": asker}] if asker else None,
    )
    return run.to_otlp(span)


def _tool_status(event: dict[str, Any]) -> tuple[int, str]:
    """A tool run's span status: ERROR with the error's type unless it succeeded."""
    status = event.get("status")
    if status in ("success", None):
        return (STATUS_UNSET, "")
    if status == "unfinished":
        return (STATUS_ERROR, "unfinished")
    return (STATUS_ERROR, _error_type(event.get("error"), bool(event.get("timed_out"))))


def _tool_content(event: dict[str, Any]) -> dict[str, Any]:
    """A tool run's arguments, result and error message as attributes."""
    attrs: dict[str, Any] = {"gen_ai.tool.call.arguments": _content_json(event.get("args") or {})}
    message = event.get("message") or {}
    if message.get("content") is not None:
        attrs["gen_ai.tool.call.result"] = message["content"]
    if event.get("error"):
        attrs["lokal.tool.error"] = event["error"]
    return attrs


def _run_span(
    run: _Run, root_events: list[dict[str, Any]], include_content: bool
) -> dict[str, Any]:
    """The ``invoke_agent lokal`` span (the root): ERROR when the run ended without an answer."""
    final = run.final
    attrs = _run_attributes(run)
    if include_content:
        attrs.update(_run_content(run))
    unanswered = bool(final) and not (final or {}).get("answered")
    if unanswered:
        attrs["error.type"] = "no_answer"
    stop_reason = (final or {}).get("stop_reason") or "no answer"
    span = _Span(
        run.root_id,
        f"invoke_agent {AGENT_NAME}",
        KIND_INTERNAL,
        run.start.get("time") or 0.0,
        run.end,
        attrs,
        parent=None,
        status=(STATUS_ERROR, stop_reason) if unanswered else (STATUS_UNSET, ""),
        events=root_events,
    )
    return run.to_otlp(span)


def _run_attributes(run: _Run) -> dict[str, Any]:
    """The run's semconv and lokal attributes, without the question and the answer."""
    start, final = run.start, run.final
    usage = (final or {}).get("usage") or {}
    return {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": AGENT_NAME,
        "gen_ai.request.model": run.model,
        "gen_ai.usage.input_tokens": int(usage.get("prompt_tokens") or 0) if final else None,
        "gen_ai.usage.output_tokens": int(usage.get("completion_tokens") or 0) if final else None,
        "lokal.profile": start.get("profile"),
        "lokal.strategy": start.get("strategy"),
        "lokal.tools": list(start.get("tools") or []),
        "lokal.run.status": (final or {}).get("status", "unfinished"),
        "lokal.run.stop_reason": (final or {}).get("stop_reason"),
        "lokal.run.iterations": (final or {}).get("iterations"),
    }


def _run_content(run: _Run) -> dict[str, Any]:
    """The question (and the answer, once there is one) as semconv message attributes."""
    question = {"type": "text", "content": run.start.get("question", "")}
    attrs = {"gen_ai.input.messages": _content_json([{"role": "user", "parts": [question]}])}
    if run.final:
        answer = {"type": "text", "content": run.final.get("answer", "")}
        attrs["gen_ai.output.messages"] = _content_json(
            [{"role": "assistant", "parts": [answer], "finish_reason": "stop"}]
        )
    return attrs


def _request(spans: list[dict[str, Any]], service_name: str) -> dict[str, Any]:
    """The ``ExportTraceServiceRequest`` holding ``spans``: one resource, one scope."""
    version = _version()
    resource = {
        "service.name": service_name,
        "service.version": version,
        "telemetry.sdk.name": "lokal",
        "telemetry.sdk.language": "python",
    }
    scope = {
        "scope": {"name": "lokal", "version": version},
        "spans": spans,
        "schemaUrl": SCHEMA_URL,
    }
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes(resource)},
                "scopeSpans": [scope],
                "schemaUrl": SCHEMA_URL,
            }
        ]
    }


def _endpoint(url: str) -> str:
    """``url``, with ``/v1/traces`` added when it names a collector's base URL only."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise LokalError(f"--otlp-endpoint {url!r}: give an http(s) URL")
    return url.rstrip("/") + "/v1/traces" if parts.path in ("", "/") else url


def send_otlp(request: dict[str, Any], endpoint: str, *, timeout_s: float = 10.0) -> int:
    """Send the spans of ``request`` (``trace_to_otlp``'s) with the OpenTelemetry SDK's
    OTLP/HTTP exporter (protobuf) to ``endpoint``; the number of spans sent. Headers come from
    ``OTEL_EXPORTER_OTLP_HEADERS`` as usual."""
    sdk = _otel_sdk()
    spans = _SdkSpans(sdk).of_request(request)
    exporter = sdk.OTLPSpanExporter(endpoint=_endpoint(endpoint), timeout=timeout_s)
    try:
        result = exporter.export(spans)
    finally:
        exporter.shutdown()
    if result != sdk.SpanExportResult.SUCCESS:
        raise LokalError(f"the collector at {endpoint} did not accept the spans")
    return len(spans)


def _otel_sdk() -> SimpleNamespace:
    """The OpenTelemetry SDK classes ``send_otlp`` needs; a LokalError without the otel extra."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import Event, ReadableSpan
        from opentelemetry.sdk.trace.export import SpanExportResult
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
    except ImportError as exc:
        raise LokalError(
            f"--otlp-endpoint needs the otel extra ({exc.name} is missing): "
            "pip install 'lokal[otel]'"
        ) from None
    return SimpleNamespace(
        OTLPSpanExporter=OTLPSpanExporter,
        Resource=Resource,
        Event=Event,
        ReadableSpan=ReadableSpan,
        SpanExportResult=SpanExportResult,
        InstrumentationScope=InstrumentationScope,
        Link=Link,
        SpanContext=SpanContext,
        SpanKind=SpanKind,
        Status=Status,
        StatusCode=StatusCode,
        TraceFlags=TraceFlags,
    )


def _plain(value: dict[str, Any]) -> Any:
    """An OTLP JSON ``AnyValue`` as the Python value it holds."""
    if "arrayValue" in value:
        return [_plain(v) for v in value["arrayValue"].get("values", [])]
    if "intValue" in value:
        return int(value["intValue"])
    return next(iter(value.values()))


def _plain_attributes(items: list[dict[str, Any]]) -> dict[str, Any]:
    """OTLP JSON attributes (a list of key and value) as a dict."""
    return {a["key"]: _plain(a["value"]) for a in items}


class _SdkSpans:
    """OTLP JSON turned back into the SDK's ``ReadableSpan``s, for its exporter."""

    def __init__(self, sdk: SimpleNamespace) -> None:
        self.sdk = sdk
        self.kinds = {1: sdk.SpanKind.INTERNAL, 2: sdk.SpanKind.SERVER, 3: sdk.SpanKind.CLIENT}
        self.codes = {0: sdk.StatusCode.UNSET, 1: sdk.StatusCode.OK, 2: sdk.StatusCode.ERROR}

    def of_request(self, request: dict[str, Any]) -> list[Any]:
        """The spans of every resource and scope of ``request``, in order."""
        spans = []
        for block in request["resourceSpans"]:
            attributes = _plain_attributes(block["resource"]["attributes"])
            resource = self.sdk.Resource(attributes, block.get("schemaUrl"))
            for scope_block in block["scopeSpans"]:
                scope = self.sdk.InstrumentationScope(
                    scope_block["scope"]["name"],
                    scope_block["scope"].get("version"),
                    scope_block.get("schemaUrl"),
                )
                spans += [self.span(s, resource, scope) for s in scope_block["spans"]]
        return spans

    def span(self, s: dict[str, Any], resource: Any, scope: Any) -> Any:
        """One span of OTLP JSON as a ``ReadableSpan``."""
        sdk = self.sdk
        status = s.get("status") or {}
        parent = self.context(s["traceId"], s["parentSpanId"]) if s.get("parentSpanId") else None
        return sdk.ReadableSpan(
            name=s["name"],
            context=self.context(s["traceId"], s["spanId"]),
            parent=parent,
            resource=resource,
            attributes=_plain_attributes(s["attributes"]),
            events=[
                sdk.Event(
                    e["name"], _plain_attributes(e.get("attributes", [])), int(e["timeUnixNano"])
                )
                for e in s.get("events", [])
            ],
            links=[sdk.Link(self.context(k["traceId"], k["spanId"])) for k in s.get("links", [])],
            kind=self.kinds.get(s["kind"], sdk.SpanKind.INTERNAL),
            status=sdk.Status(self.codes[status.get("code", 0)], status.get("message")),
            start_time=int(s["startTimeUnixNano"]),
            end_time=int(s["endTimeUnixNano"]),
            instrumentation_scope=scope,
        )

    def context(self, trace_id: str, span_id: str) -> Any:
        """The sampled ``SpanContext`` of a span's hex ids."""
        flags = self.sdk.TraceFlags(self.sdk.TraceFlags.SAMPLED)
        return self.sdk.SpanContext(
            int(trace_id, 16), int(span_id, 16), is_remote=False, trace_flags=flags
        )
