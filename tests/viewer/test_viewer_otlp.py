"""``lokal trace export --format otlp-json``: OTLP JSON read back with protobuf's JSON reader
into ``ExportTraceServiceRequest``; GenAI semantic conventions, parents, links, timing;
contents only on request; ``--otlp-endpoint`` against a receiver on loopback."""

from __future__ import annotations

import base64
import copy
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import ClassVar

import pytest
from google.protobuf.json_format import Parse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from otlp_traces import branches_trace
from viewer_support import recorded_run

from lokal.cli import main
from lokal.errors import LokalError
from lokal.trace import read_trace
from lokal.viewer.otlp import SCHEMA_URL, send_otlp, trace_to_otlp


def _b64(hex_id: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_id)).decode()


def parse_otlp(data: dict) -> ExportTraceServiceRequest:
    """OTLP JSON into the proto: OTLP/JSON writes ids as hex, protobuf's JSON mapping wants
    base64 for bytes, so the ids are turned over first (the OTLP spec's one difference)."""
    data = copy.deepcopy(data)
    for block in data["resourceSpans"]:
        for scope in block["scopeSpans"]:
            for span in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        assert len(span[key]) in (16, 32) and int(span[key], 16) >= 0
                        span[key] = _b64(span[key])
                for link in span.get("links", []):
                    link["traceId"], link["spanId"] = _b64(link["traceId"]), _b64(link["spanId"])
    return Parse(json.dumps(data), ExportTraceServiceRequest())


def attrs(span) -> dict:
    out = {}
    for kv in span.attributes:
        which = kv.value.WhichOneof("value")
        value = getattr(kv.value, which)
        if which == "array_value":
            value = [getattr(v, v.WhichOneof("value")) for v in value.values]
        out[kv.key] = value
    return out


def _export(tmp_path, *extra) -> dict:
    out = tmp_path / "spans.json"
    code = main(
        ["trace", "export", str(recorded_run()), "--format", "otlp-json", "-o", str(out), *extra]
    )
    assert code == 0
    return json.loads(out.read_text(encoding="utf-8"))


def test_the_export_is_otlp_with_genai_spans_links_and_timing(tmp_path, capsys):
    data = _export(tmp_path)
    assert data["resourceSpans"][0]["schemaUrl"] == "https://opentelemetry.io/schemas/1.37.0"
    assert SCHEMA_URL.endswith("/1.37.0")
    request = parse_otlp(data)
    (resource_spans,) = request.resource_spans
    assert attrs(resource_spans.resource)["service.name"] == "lokal"
    spans = list(resource_spans.scope_spans[0].spans)
    events = read_trace(recorded_run())
    decisions = [e for e in events if e["type"] == "decision"]
    tools = [e for e in events if e["type"] == "tool_end"]
    root = [s for s in spans if not s.parent_span_id]
    assert len(root) == 1
    root = root[0]
    assert root.name == "invoke_agent lokal"
    assert attrs(root)["gen_ai.operation.name"] == "invoke_agent"
    assert attrs(root)["gen_ai.agent.name"] == "lokal"
    assert len({s.trace_id for s in spans}) == 1 and len(spans[0].trace_id) == 16
    assert len({s.span_id for s in spans}) == len(spans)
    chats = [s for s in spans if attrs(s)["gen_ai.operation.name"] == "chat"]
    runs = [s for s in spans if attrs(s)["gen_ai.operation.name"] == "execute_tool"]
    assert len(chats) == len(decisions) and len(runs) == len(tools)
    for span, decision in zip(chats, decisions, strict=True):
        a = attrs(span)
        assert span.name == f"chat {a['gen_ai.request.model']}"
        assert span.parent_span_id == root.span_id
        assert span.kind == span.SPAN_KIND_CLIENT
        assert a["gen_ai.usage.input_tokens"] == decision["usage"]["prompt_tokens"]
        assert a["gen_ai.usage.output_tokens"] == decision["usage"]["completion_tokens"]
        assert a["gen_ai.response.finish_reasons"] == [decision["attempts"][-1]["finish_reason"]]
        failed = [x for x in decision["attempts"] if x.get("error")]
        assert [e.name for e in span.events] == ["lokal.attempt.error"] * len(failed)
        assert span.end_time_unix_nano == round(decision["time"] * 1e9)
    by_call = {attrs(s)["gen_ai.tool.call.id"]: s for s in runs}
    chat_ids = {s.span_id: d for s, d in zip(chats, decisions, strict=True)}
    for tool in tools:
        span = by_call[tool["call_id"]]
        a = attrs(span)
        assert span.name == f"execute_tool {tool['name']}" and a["gen_ai.tool.name"] == tool["name"]
        assert span.parent_span_id == root.span_id  # a child of the run…
        (link,) = span.links  # …linked to the decision that asked for it
        asker = chat_ids[link.span_id]
        assert tool["call_id"] in [c["id"] for c in asker["ai_message"]["tool_calls"]]
        assert span.start_time_unix_nano == round(tool["start_time"] * 1e9)
        assert span.end_time_unix_nano == round(tool["end_time"] * 1e9)
        chat = next(s for s in chats if s.span_id == link.span_id)
        assert span.start_time_unix_nano >= chat.end_time_unix_nano
        if tool["status"] == "success":
            assert span.status.code == span.status.STATUS_CODE_UNSET and "error.type" not in a
        else:
            assert span.status.code == span.status.STATUS_CODE_ERROR
            assert a["error.type"] == tool["error"].split(":")[0]
    for span in spans:  # every span inside the run's
        assert root.start_time_unix_nano <= span.start_time_unix_nano <= span.end_time_unix_nano
        assert span.end_time_unix_nano <= root.end_time_unix_nano


def test_message_contents_only_with_include_content(tmp_path):
    events = read_trace(recorded_run())
    question = events[0]["question"]
    plain = json.dumps(_export(tmp_path))
    assert question not in plain and "gen_ai.input.messages" not in plain
    failed = next(e for e in events if e["type"] == "tool_end" and e["status"] != "success")
    assert failed["error"] not in plain
    request = parse_otlp(_export(tmp_path, "--include-content"))
    spans = list(request.resource_spans[0].scope_spans[0].spans)
    chat = next(s for s in spans if attrs(s)["gen_ai.operation.name"] == "chat")
    messages = json.loads(attrs(chat)["gen_ai.input.messages"])
    assert messages[-1]["role"] == "user" or any(m["role"] == "user" for m in messages)
    assert all(isinstance(m["parts"], list) for m in messages)
    output = json.loads(attrs(chat)["gen_ai.output.messages"])
    assert output[0]["role"] == "assistant"
    tool = next(s for s in spans if attrs(s).get("gen_ai.tool.call.id") == failed["call_id"])
    assert json.loads(attrs(tool)["gen_ai.tool.call.arguments"]) == failed["args"]
    root = next(s for s in spans if not s.parent_span_id)
    assert question in attrs(root)["gen_ai.input.messages"]


def test_the_same_run_exports_the_same_ids(tmp_path):
    events = read_trace(recorded_run())
    assert trace_to_otlp(events) == trace_to_otlp(events)


class _Receiver(BaseHTTPRequestHandler):
    received: ClassVar[list] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((self.path, self.headers["Content-Type"], body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()
        self.wfile.write(b"")

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    _Receiver.received = []
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Receiver.received
    server.shutdown()
    server.server_close()


def test_otlp_endpoint_sends_the_spans_with_the_sdk(receiver, capsys):
    url, received = receiver
    assert main(["trace", "export", str(recorded_run()), "--otlp-endpoint", url]) == 0
    ((path, content_type, body),) = received
    assert path == "/v1/traces" and content_type == "application/x-protobuf"
    request = ExportTraceServiceRequest.FromString(body)
    spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    expected = parse_otlp(trace_to_otlp(read_trace(recorded_run())))
    want = list(expected.resource_spans[0].scope_spans[0].spans)
    assert sorted((s.name, s.span_id, s.parent_span_id) for s in spans) == sorted(
        (s.name, s.span_id, s.parent_span_id) for s in want
    )
    assert {s.span_id: s.start_time_unix_nano for s in spans} == {
        s.span_id: s.start_time_unix_nano for s in want
    }
    assert "sent" in capsys.readouterr().err


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["trace", "export", str(tmp_path / "missing.jsonl")]) == 2
    not_a_trace = tmp_path / "x.jsonl"
    not_a_trace.write_text("hello\n", encoding="utf-8")
    assert main(["trace", "view", str(not_a_trace)]) == 2
    assert main(["trace", "export", str(recorded_run()), "--otlp-endpoint", "ftp://x"]) == 2
    assert main(["trace", "export", str(recorded_run()), "--format", "zipkin"]) == 2
    err = capsys.readouterr().err
    assert len([line for line in err.splitlines() if line.strip()]) == 4


def _comparable(span) -> tuple:
    """What the SDK's exporter must carry over from the JSON of a span."""
    return (
        span.name,
        span.kind,
        span.parent_span_id,
        span.start_time_unix_nano,
        span.end_time_unix_nano,
        attrs(span),
        [(e.name, e.time_unix_nano, attrs(e)) for e in span.events],
        [(k.trace_id, k.span_id) for k in span.links],
        (span.status.code, span.status.message),
    )


def test_send_otlp_carries_attributes_events_links_and_status(receiver):
    """Every kind of attribute value (string, int, float, bool, array), span events, links and
    error statuses arrive as written in the JSON."""
    url, received = receiver
    data = trace_to_otlp(branches_trace(), include_content=True)
    assert send_otlp(data, url) == len(data["resourceSpans"][0]["scopeSpans"][0]["spans"])
    ((path, _, body),) = received
    assert path == "/v1/traces"
    (block,) = ExportTraceServiceRequest.FromString(body).resource_spans
    (want_block,) = parse_otlp(data).resource_spans
    assert attrs(block.resource) == attrs(want_block.resource)
    assert block.scope_spans[0].scope.name == "lokal"
    sent = {s.span_id: _comparable(s) for s in block.scope_spans[0].spans}
    want = {s.span_id: _comparable(s) for s in want_block.scope_spans[0].spans}
    assert sent == want
    values = [v for span in want.values() for v in span[5].values()]
    values += [v for span in want.values() for event in span[6] for v in event[2].values()]
    kinds = {type(v) for v in values}
    assert kinds == {str, int, float, bool, list}


def test_send_otlp_without_the_otel_extra_says_how_to_install_it(monkeypatch):
    module = "opentelemetry.exporter.otlp.proto.http.trace_exporter"
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(LokalError, match=r"otel extra \(opentelemetry\.exporter.*lokal\[otel\]"):
        send_otlp(trace_to_otlp(branches_trace()), "http://127.0.0.1:9")
