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
import hashlib
import json
import re
from collections.abc import Iterable
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
    try:
        from importlib.metadata import version

        return version("lokal")
    except Exception:  # not installed as a distribution
        return "0"


def _nanos(seconds: float | None) -> str:
    return str(round((seconds or 0.0) * 1e9))


def _value(value: Any) -> dict[str, Any]:
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
    return [{"key": k, "value": _value(v)} for k, v in values.items() if v is not None]


def _content_json(value: Any) -> str:
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
    if timed_out:
        return "timeout"
    head = (error or "").split(":", 1)[0].strip()
    return head if re.fullmatch(r"[A-Za-z_][\w.]*", head) else "tool_error"


class _Ids:
    def __init__(self, seed: str) -> None:
        self.seed = seed
        self.trace_id = hashlib.sha256(f"trace {seed}".encode()).hexdigest()[:32]

    def span(self, *key: Any) -> str:
        text = " ".join(str(k) for k in key)
        return hashlib.sha256(f"span {self.seed} {text}".encode()).hexdigest()[:16]


def trace_to_otlp(
    events: Iterable[dict[str, Any]],
    *,
    include_content: bool = False,
    service_name: str = "lokal",
) -> dict[str, Any]:
    """The run in ``events`` (a trace's dicts, expanded: ``lokal.trace.read_trace``) as an
    OTLP ``ExportTraceServiceRequest`` in JSON form."""
    events = list(events)
    start = next((e for e in events if e.get("type") == "run_start"), None)
    if start is None:
        raise LokalError("the trace has no run_start event: not a run of lokal")
    final = next((e for e in events if e.get("type") == "final"), None)
    loads = [e for e in events if e.get("type") == "model_load"]
    # the chat model's load (not the embeddings': those have a component)
    model = next((e.get("model") for e in loads if not e.get("component")), None)
    model = model or start.get("profile") or "unknown"
    ids = _Ids(f"{start.get('time')} {start.get('question')}")
    root_id = ids.span("run")
    last_time = max((e.get("time") or 0.0) for e in events)
    run_end = (final or {}).get("time") or last_time

    def span(
        span_id: str,
        name: str,
        kind: int,
        begin: float,
        end: float,
        attributes: dict[str, Any],
        *,
        parent: str | None = root_id,
        status: tuple[int, str] = (STATUS_UNSET, ""),
        events_: list[dict[str, Any]] | None = None,
        links: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        out: dict[str, Any] = {
            "traceId": ids.trace_id,
            "spanId": span_id,
            "name": name,
            "kind": kind,
            "startTimeUnixNano": _nanos(begin),
            "endTimeUnixNano": _nanos(max(end, begin)),
            "attributes": _attributes(attributes),
        }
        if parent:
            out["parentSpanId"] = parent
        if events_:
            out["events"] = events_
        if links:
            out["links"] = links
        code, message = status
        if code != STATUS_UNSET:
            out["status"] = {"code": code, **({"message": message} if message else {})}
        return out

    spans: list[dict[str, Any]] = []
    root_events: list[dict[str, Any]] = []
    chat_of_call: dict[str, str] = {}
    last_chat: str | None = None
    pending_start: dict[str, Any] | None = None
    tool_starts: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
    decisions = 0
    for event in events:
        kind = event.get("type")
        if kind == "decision_start":
            pending_start = event
        elif kind == "decision":
            decisions += 1
            span_id = ids.span("chat", decisions)
            end = event.get("time") or 0.0
            begin = (pending_start or {}).get("time") or end - (event.get("latency_ms") or 0) / 1e3
            pending_start = None
            usage = event.get("usage") or {}
            attempts = event.get("attempts") or []
            reasons = [a.get("finish_reason") for a in attempts[-1:] if a.get("finish_reason")]
            parse = event.get("parse") or {}
            error = event.get("error") or {}
            attrs: dict[str, Any] = {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": model,
                "gen_ai.usage.input_tokens": int(usage.get("prompt_tokens") or 0),
                "gen_ai.usage.output_tokens": int(usage.get("completion_tokens") or 0),
                "gen_ai.response.finish_reasons": reasons or None,
                "lokal.decision.iteration": event.get("iteration"),
                "lokal.decision.purpose": event.get("purpose"),
                "lokal.decision.attempts": len(attempts),
                "lokal.parse.format": parse.get("format"),
                "lokal.parse.repaired": parse.get("repaired"),
                "lokal.tool_calling": event.get("tool_calling"),
            }
            if event.get("status") != "success":
                attrs["error.type"] = error.get("type") or "error"
            if include_content:
                system, messages = _messages(event.get("prompt") or [])
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
            failed = event.get("status") != "success"
            spans.append(
                span(
                    span_id,
                    f"chat {model}",
                    KIND_CLIENT,
                    begin,
                    end,
                    attrs,
                    status=(STATUS_ERROR, error.get("type") or "error") if failed else (0, ""),
                    events_=span_events,
                )
            )
            last_chat = span_id
            for call in (event.get("ai_message") or {}).get("tool_calls") or []:
                if call.get("id"):
                    chat_of_call[call["id"]] = span_id
        elif kind == "tool_start":
            tool_starts[(event.get("iteration"), event.get("call_id"), event.get("index"))] = event
        elif kind == "tool_end":
            key = (event.get("iteration"), event.get("call_id"), event.get("index"))
            tool_starts.pop(key, None)
            spans.append(_tool_span(span, ids, event, chat_of_call, last_chat, include_content))
        elif kind == "guard":
            detail = {k: event.get(k) for k in ("guard", "iteration", "times", "budget_s")}
            root_events.append(
                {
                    "timeUnixNano": _nanos(event.get("time")),
                    "name": "lokal.guard",
                    "attributes": _attributes({f"lokal.guard.{k}": v for k, v in detail.items()}),
                }
            )
    for start_event in tool_starts.values():  # still running when the trace ends
        unfinished = {**start_event, "end_time": last_time, "status": "unfinished"}
        spans.append(_tool_span(span, ids, unfinished, chat_of_call, last_chat, include_content))

    usage = (final or {}).get("usage") or {}
    run_attrs: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": AGENT_NAME,
        "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens": int(usage.get("prompt_tokens") or 0) if final else None,
        "gen_ai.usage.output_tokens": int(usage.get("completion_tokens") or 0) if final else None,
        "lokal.profile": start.get("profile"),
        "lokal.strategy": start.get("strategy"),
        "lokal.tools": list(start.get("tools") or []),
        "lokal.run.status": (final or {}).get("status", "unfinished"),
        "lokal.run.stop_reason": (final or {}).get("stop_reason"),
        "lokal.run.iterations": (final or {}).get("iterations"),
    }
    if include_content:
        run_attrs["gen_ai.input.messages"] = _content_json(
            [{"role": "user", "parts": [{"type": "text", "content": start.get("question", "")}]}]
        )
        if final:
            answer = {"type": "text", "content": final.get("answer", "")}
            run_attrs["gen_ai.output.messages"] = _content_json(
                [{"role": "assistant", "parts": [answer], "finish_reason": "stop"}]
            )
    answered = bool((final or {}).get("answered"))
    root_status = (
        (STATUS_ERROR, (final or {}).get("stop_reason") or "no answer")
        if final and not answered
        else (STATUS_UNSET, "")
    )
    if final and not answered:
        run_attrs["error.type"] = "no_answer"
    root = span(
        root_id,
        f"invoke_agent {AGENT_NAME}",
        KIND_INTERNAL,
        start.get("time") or 0.0,
        run_end,
        run_attrs,
        parent=None,
        status=root_status,
        events_=root_events,
    )
    version = _version()
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": _attributes(
                        {
                            "service.name": service_name,
                            "service.version": version,
                            "telemetry.sdk.name": "lokal",
                            "telemetry.sdk.language": "python",
                        }
                    )
                },
                "scopeSpans": [
                    {
                        "scope": {"name": "lokal", "version": version},
                        "spans": [root, *spans],
                        "schemaUrl": SCHEMA_URL,
                    }
                ],
                "schemaUrl": SCHEMA_URL,
            }
        ]
    }


def _tool_span(span, ids, event, chat_of_call, last_chat, include_content) -> dict[str, Any]:
    call_id = event.get("call_id")
    begin = event.get("start_time") or event.get("time") or 0.0
    end = event.get("end_time") or event.get("time") or begin
    status = event.get("status")
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": event.get("name"),
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
        "lokal.tool.lane": event.get("index"),
        "lokal.decision.iteration": event.get("iteration"),
        "lokal.tool.reused": event.get("reused") or None,
    }
    code: tuple[int, str] = (STATUS_UNSET, "")
    if status not in ("success", None):
        error_type = _error_type(event.get("error"), bool(event.get("timed_out")))
        if status == "unfinished":
            error_type = "unfinished"
        attrs["error.type"] = error_type
        code = (STATUS_ERROR, error_type)
    if include_content:
        attrs["gen_ai.tool.call.arguments"] = _content_json(event.get("args") or {})
        message = event.get("message") or {}
        if message.get("content") is not None:
            attrs["gen_ai.tool.call.result"] = message["content"]
        if event.get("error"):
            attrs["lokal.tool.error"] = event["error"]
    asker = chat_of_call.get(call_id) or last_chat
    links = [{"traceId": ids.trace_id, "spanId": asker}] if asker else None
    return span(
        ids.span("tool", event.get("iteration"), call_id, event.get("index")),
        f"execute_tool {event.get('name')}",
        KIND_INTERNAL,
        begin,
        end,
        attrs,
        status=code,
        links=links,
    )


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

    kinds = {1: SpanKind.INTERNAL, 2: SpanKind.SERVER, 3: SpanKind.CLIENT}
    codes = {0: StatusCode.UNSET, 1: StatusCode.OK, 2: StatusCode.ERROR}

    def plain(value: dict[str, Any]) -> Any:
        if "arrayValue" in value:
            return [plain(v) for v in value["arrayValue"].get("values", [])]
        if "intValue" in value:
            return int(value["intValue"])
        return next(iter(value.values()))

    def attrs(items: list[dict[str, Any]]) -> dict[str, Any]:
        return {a["key"]: plain(a["value"]) for a in items}

    def context(trace_id: str, span_id: str) -> Any:
        flags = TraceFlags(TraceFlags.SAMPLED)
        return SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=False, trace_flags=flags)

    spans = []
    for block in request["resourceSpans"]:
        resource = Resource(attrs(block["resource"]["attributes"]), block.get("schemaUrl"))
        for scope_block in block["scopeSpans"]:
            scope = InstrumentationScope(
                scope_block["scope"]["name"],
                scope_block["scope"].get("version"),
                scope_block.get("schemaUrl"),
            )
            for s in scope_block["spans"]:
                status = s.get("status") or {}
                spans.append(
                    ReadableSpan(
                        name=s["name"],
                        context=context(s["traceId"], s["spanId"]),
                        parent=context(s["traceId"], s["parentSpanId"])
                        if s.get("parentSpanId")
                        else None,
                        resource=resource,
                        attributes=attrs(s["attributes"]),
                        events=[
                            Event(e["name"], attrs(e.get("attributes", [])), int(e["timeUnixNano"]))
                            for e in s.get("events", [])
                        ],
                        links=[
                            Link(context(k["traceId"], k["spanId"])) for k in s.get("links", [])
                        ],
                        kind=kinds.get(s["kind"], SpanKind.INTERNAL),
                        status=Status(codes[status.get("code", 0)], status.get("message")),
                        start_time=int(s["startTimeUnixNano"]),
                        end_time=int(s["endTimeUnixNano"]),
                        instrumentation_scope=scope,
                    )
                )
    exporter = OTLPSpanExporter(endpoint=_endpoint(endpoint), timeout=timeout_s)
    try:
        result = exporter.export(spans)
    finally:
        exporter.shutdown()
    if result != SpanExportResult.SUCCESS:
        raise LokalError(f"the collector at {endpoint} did not accept the spans")
    return len(spans)
