"""Issue 19: a property-based fuzz of lokal serve's HTTP API. Schemathesis generates requests
from the app's OpenAPI schema (``app.openapi()``: the chat completions body is
``wire.ChatRequest``'s JSON Schema), valid ones and ones that break it, and sends them to a
real server on loopback (the mock model, conversations recorded). Every response must
arrive (no hang), must not be a 5xx (except ``no_valid_reply``: the model's failure to answer
as asked, which the mock cannot do for a random ``tool_choice`` or ``response_format``), and
every error must be OpenAI's JSON error shape. Bounded: a few dozen examples per operation
and mode, about 30 s in all."""

from __future__ import annotations

import json
from typing import Any

import pytest
from serve_support import Served

from helpers import MODEL_CONFIG
from lokal.config import load_profile
from lokal.memory.conversations import ConversationStore
from lokal.serve.app import create_app

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402

# starts an HTTP server in the test process: in `make test`, not `make test-fast`
pytestmark = pytest.mark.slow

EXAMPLES = {"/v1/chat/completions": 80}  # the rest: few inputs to vary
OTHER_EXAMPLES = 10
TIMEOUT = 10  # seconds for a response: more is a hang


@pytest.fixture(scope="module")
def app_and_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz")
    store = ConversationStore(folder / "lokal.db")
    log: list[dict[str, Any]] = []
    app = create_app(
        load_profile(MODEL_CONFIG, "mock"),
        log=log.append,
        traces_dir=folder / "traces",
        conversations=store,
        body_timeout=TIMEOUT / 2,
    )
    served = Served(app, log)
    yield app, served
    served.stop()
    store.close()


def _operations() -> list[tuple[str, str, GenerationMode]]:
    schema = create_app(load_profile(MODEL_CONFIG, "mock")).openapi()
    cases = []
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            cases.append((method.upper(), path, GenerationMode.POSITIVE))
            if operation.get("requestBody"):  # a string in a path cannot be invalid
                cases.append((method.upper(), path, GenerationMode.NEGATIVE))
    return cases


def _check_error(body: Any, where: str) -> None:
    assert isinstance(body, dict) and set(body) >= {"error"}, where
    error = body["error"]
    if " /v1/messages" in where:  # Anthropic's API: Anthropic's error shape
        assert body["type"] == "error" and set(error) == {"type", "message"}, where
        assert isinstance(error["message"], str) and isinstance(error["type"], str), where
        return
    assert set(error) == {"message", "type", "param", "code"}, where
    assert isinstance(error["message"], str) and isinstance(error["type"], str), where
    assert error["param"] is None or isinstance(error["param"], str), where
    assert error["code"] is None or isinstance(error["code"], str), where


def _check(response: Any, where: str) -> None:
    status = response.status_code
    kind = (response.headers.get("content-type") or [""])[0]
    if status >= 400:
        assert kind.startswith("application/json"), where
        body = json.loads(response.content)
        _check_error(body, where)
        if status >= 500 and " /v1/messages" in where:  # no code in Anthropic's shape
            assert "no usable reply" in body["error"]["message"], where
            assert response.headers.get("x-should-retry") == ["false"], where
        elif status >= 500:
            assert body["error"]["code"] == "no_valid_reply", where
            assert response.headers.get("x-should-retry") == ["false"], where
        return
    if kind.startswith("text/event-stream"):  # a streamed reply: its error events too
        for line in response.content.decode().splitlines():
            data = line.removeprefix("data:").strip()
            if line.startswith("data:") and data.startswith("{"):
                event = json.loads(data)
                if "error" in event:
                    _check_error(event, where)
                    assert event["error"]["type"] != "server_error" or (
                        event["error"]["code"] == "no_valid_reply"
                    ), where
        end = b"message_stop" if " /v1/messages" in where else b"data: [DONE]"
        last = response.content.rstrip().splitlines()[-1] if response.content.strip() else b""
        assert end in last or b'"error"' in response.content, where
    elif kind.startswith("application/json"):
        json.loads(response.content)


@pytest.mark.parametrize(("method", "path", "mode"), _operations())
def test_the_api_answers_generated_requests_without_server_errors(
    app_and_server, method, path, mode
):
    app, served = app_and_server
    schema = schemathesis.openapi.from_dict(app.openapi())
    operation = schema[path][method]

    @settings(
        max_examples=EXAMPLES.get(path, OTHER_EXAMPLES),
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        body = case.body
        if mode is GenerationMode.POSITIVE and isinstance(body, dict):
            body["model"] = "mock"  # past the 404 for an unknown model, to the decision
        response = case.call(base_url=served.base, timeout=TIMEOUT)  # raises on a hang
        _check(response, f"{method} {path} {body!r:.2000}")

    run()
