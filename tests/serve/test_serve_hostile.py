"""Issue 19: lokal serve holds against hostile clients. Text that cannot be encoded is a 400
naming the field (never a 500, also with --conversations); every error leaves the keep-alive
connection usable or closes it saying ``Connection: close``; a body that never arrives is a
408 after --body-timeout."""

from __future__ import annotations

import http.client
import json
import socket
import time

import pytest
from serve_support import KEY

from lokal.memory.conversations import ConversationStore

# starts an HTTP server in the test process: in `make test`, not `make test-fast`
pytestmark = pytest.mark.slow

USER = {"role": "user", "content": "Hello?"}
FAIL = {"role": "user", "content": "fail"}  # an unexpected exception in the server
CALL = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}


def _body(profile, **fields) -> bytes:
    """A request body; json.dumps writes a lone surrogate as the escape ``\\ud800``."""
    return json.dumps({"model": profile.name, "messages": [USER], **fields}).encode()


def _tool_turn(arguments: str, result: str) -> list[dict]:
    call = {**CALL, "function": {"name": "get_weather", "arguments": arguments}}
    return [
        USER,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": result},
    ]


# body fields -> the param the 400 names
UNENCODABLE = {
    "content": ({"messages": [{"role": "user", "content": "hi \ud800"}]}, "messages[0].content"),
    "text part": (
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "\udfff"}]}]},
        "messages[0].content[0].text",
    ),
    "name": (
        {"messages": [{"role": "user", "content": "hi", "name": "a\udc80"}]},
        "messages[0].name",
    ),
    "tool description": (
        {"tools": [{"type": "function", "function": {"name": "f", "description": "\ud83d"}}]},
        "tools[0].function.description",
    ),
    "schema key": (
        {
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "f",
                        "parameters": {"type": "object", "properties": {"\ud800": {}}},
                    },
                }
            ]
        },
        "tools[0].function.parameters.properties",
    ),
    "user": ({"user": "\ud800"}, "user"),
    "stop": ({"stop": ["ok", "\ud800"]}, "stop[1]"),
    "model": ({"model": "\ud800"}, "model"),
    "unknown field": ({"metadata": {"note": "\ud800"}}, "metadata.note"),
    # JSON inside a string: the escape is decoded only when the arguments are read
    "arguments": (
        {"messages": _tool_turn('{"city": "\\ud800"}', "sunny")},
        "messages[1].tool_calls[0].function.arguments",
    ),
    "tool result": (
        {"messages": _tool_turn("{}", '{"status": "success", "output": "\\ud800"}')},
        "messages[2].content",
    ),
}


@pytest.fixture
def store(tmp_path):
    store = ConversationStore(tmp_path / "lokal.db")
    yield store
    store.close()


@pytest.mark.parametrize("case", list(UNENCODABLE))
def test_text_that_cannot_be_encoded_is_a_400_naming_the_field(serve, profile, store, case):
    fields, param = UNENCODABLE[case]
    served = serve(["Hello."], conversations=store)
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    connection.request("POST", "/v1/chat/completions", _body(profile, **fields))
    response = connection.getresponse()
    error = json.loads(response.read())["error"]
    assert response.status == 400, error
    assert error["param"] == param
    assert error["type"] == "invalid_request_error"
    assert "lone surrogate" in error["message"]
    assert served.backend.requests == [] and store.list() == []  # nothing ran or was stored
    # the same connection serves the next request, which is recorded
    connection.request("POST", "/v1/chat/completions", _body(profile))
    response = connection.getresponse()
    assert response.status == 200 and json.loads(response.read())["choices"]
    assert len(store.list()) == 1
    ports = {e["client"] for e in served.log if e["path"] == "/v1/chat/completions"}
    assert len(ports) == 1  # one connection
    connection.close()


def test_an_undecodable_body_and_raw_surrogate_bytes_are_400s(serve, profile, store):
    served = serve([], conversations=store)
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    raw = b'{"model": "%s", "messages": [{"role": "user", "content": "%s"}]}'
    for text, param in ((b"\xff", None), (b"\xed\xa0\x80", "messages[0].content")):
        connection.request("POST", "/v1/chat/completions", raw % (profile.name.encode(), text))
        response = connection.getresponse()
        assert response.status == 400
        assert json.loads(response.read())["error"]["param"] == param
    assert served.backend.requests == [] and store.list() == []


def _nested(levels: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def test_deeply_nested_json_is_a_400_or_served_never_a_500(serve, profile):
    """Schemas nested hundreds deep made the schema checks recurse past Python's limit (a
    500), and so did a tool result nested as deep, read as JSON."""
    served = serve(["Hello."] * 4)
    deep = _nested(300)
    tool = {"type": "function", "function": {"name": "f", "parameters": deep}}
    rf = {"type": "json_schema", "json_schema": {"name": "x", "schema": deep}}
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    for fields, param in (
        ({"tools": [tool]}, "tools[0].function.parameters"),
        ({"response_format": rf}, "response_format.json_schema.schema"),
    ):
        connection.request("POST", "/v1/chat/completions", _body(profile, **fields))
        response = connection.getresponse()
        error = json.loads(response.read())["error"]
        assert response.status == 400 and error["param"] == param
        assert "more than 64 deep" in error["message"]
    fine = {"type": "function", "function": {"name": "f", "parameters": _nested(20)}}
    connection.request("POST", "/v1/chat/completions", _body(profile, tools=[fine]))
    assert connection.getresponse().read() and served.log[-1]["status"] == 200
    result = '{"status": "success", "output": ' + "[" * 990 + "]" * 990 + "}"
    connection.request(
        "POST", "/v1/chat/completions", _body(profile, messages=_tool_turn("{}", result))
    )
    response = connection.getresponse()
    assert response.status == 200, response.read()
    response.read()
    connection.close()


class _Failing:
    """A conversation store that fails with an unexpected exception on the question "fail"."""

    def __init__(self, store: ConversationStore) -> None:
        self.store = store

    def __getattr__(self, name):
        return getattr(self.store, name)

    def start_run(self, conversation, question, *args, **kwargs):
        if question == "fail":
            raise RuntimeError("the disk is on fire")
        return self.store.start_run(conversation, question, *args, **kwargs)


def test_every_error_leaves_the_connection_usable_or_closes_it(serve, profile, store):
    served = serve(["one"] * 12, api_key=KEY, max_body_bytes=2000, conversations=_Failing(store))
    key = {"Authorization": f"Bearer {KEY}"}
    good = _body(profile)
    bad = [  # (method, path, body, headers, status)
        ("POST", "/v1/chat/completions", _body(profile, user="\ud800"), key, 400),
        ("POST", "/v1/chat/completions", b'{"model": ', key, 400),
        ("POST", "/v1/chat/completions", b"[]", key, 400),
        ("POST", "/v1/chat/completions", good, {}, 401),
        ("POST", "/v1/chat/completions", _body(profile, model="nope"), key, 404),
        ("GET", "/v1/nowhere", None, key, 404),
        ("GET", "/v1/chat/completions", None, key, 405),
        ("POST", "/v1/chat/completions", _body(profile, user="x" * 3000), key, 400),
        ("POST", "/v1/chat/completions", _body(profile, messages=[FAIL]), key, 500),
    ]
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    for method, path, body, headers, status in bad:
        connection.request(method, path, body, headers)
        response = connection.getresponse()
        error = json.loads(response.read())["error"]
        assert response.status == status, (path, error)
        assert set(error) == {"message", "type", "param", "code"}
        closes = (response.getheader("connection") or "").lower() == "close"
        assert closes == (status == 500), (status, response.getheaders())
        before = len(served.log)
        # http.client opens a new connection after Connection: close, else reuses this one
        connection.request("POST", "/v1/chat/completions", good, key)
        response = connection.getresponse()
        assert response.status == 200, response.read()
        response.read()
        assert len(served.log) == before + 1
        if not closes:
            assert served.log[-1]["client"] == served.log[-2]["client"]  # the same connection
    assert served.log[-2]["error"] == "RuntimeError: the disk is on fire"
    connection.close()


def _raw(served, head: bytes, body: bytes) -> tuple[socket.socket, float]:
    sock = socket.create_connection(("127.0.0.1", served.port), timeout=10)
    sock.sendall(head + body)
    return sock, time.monotonic()


def _read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):  # until the server closes the connection
        data += chunk
    return data


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_that_never_arrives_is_a_408_and_the_connection_closes(serve, profile, framing):
    served = serve(["Hello."], body_timeout=1)
    if framing == "chunked":
        head = b"Transfer-Encoding: chunked\r\n\r\n"
        body = b"3e8\r\n" + b'{"model": "'  # a chunk of 1000 bytes, 11 sent
    else:
        head = b"Content-Length: 1000\r\n\r\n"
        body = b'{"model": '  # 10 of 1000 bytes
    start = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    sock, sent = _raw(served, start + head, body)
    data = _read_all(sock)  # the server answers and closes: no hang
    waited = time.monotonic() - sent
    sock.close()
    head, _, payload = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 "), data
    assert b"connection: close" in head.lower()
    error = json.loads(payload)["error"]
    assert error["code"] == "request_timeout" and error["type"] == "invalid_request_error"
    assert 0.9 <= waited < 5
    assert served.backend.requests == []
    assert [e["status"] for e in served.log] == [408]
    # the server goes on serving
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    connection.request("POST", "/v1/chat/completions", _body(profile))
    assert connection.getresponse().status == 200
    connection.close()


def test_a_slow_body_that_arrives_in_time_is_served(serve, profile):
    served = serve(["Hello."], body_timeout=2)
    body = _body(profile)
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    sock, _ = _raw(served, head + b"Content-Length: %d\r\n\r\n" % len(body), body[:10])
    time.sleep(0.5)
    sock.sendall(body[10:])
    data = _read_all(sock)
    sock.close()
    assert data.startswith(b"HTTP/1.1 200 "), data


def test_the_serve_command_passes_the_body_timeout(monkeypatch):
    import uvicorn

    import lokal.serve.app
    from lokal.cli import main

    seen = {}

    class App:
        state = type("State", (), {"names": ["mock"]})

    def create_app(*args, **kwargs):
        seen.update(kwargs)
        return App()

    monkeypatch.setattr(lokal.serve.app, "create_app", create_app)
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: None)
    assert main(["serve", "--profile", "mock"]) == 0
    assert seen["body_timeout"] == 30
    assert main(["serve", "--profile", "mock", "--body-timeout", "2.5"]) == 0
    assert seen["body_timeout"] == 2.5
    seen.clear()
    for wrong in ("0", "-1", "nan", "inf"):
        assert main(["serve", "--profile", "mock", "--body-timeout", wrong]) != 0
    assert seen == {}  # refused before any app was made
