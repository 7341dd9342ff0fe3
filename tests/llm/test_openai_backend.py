"""The OpenAI-compatible backend against real servers on loopback.

The llama.cpp server (llama-cpp-python[server]) serves the bundled GGUF for both modes; a
tiny HTTP server on loopback that fails on purpose checks retries with backoff.
"""

import http.server
import json
import threading
from typing import ClassVar

import pytest
import yaml
from jsonschema import Draft202012Validator

from helpers import DATA, basic_tools, load_json
from lokal.config import load_profile
from lokal.errors import ConfigError
from lokal.llm.backends import clear_backend_cache, get_backend
from lokal.llm.decide import generate_ai_message
from lokal.models import resolve_model_path
from lokal.records import ERROR_KINDS
from servers import free_port, llama_cpp_server


@pytest.fixture(scope="module")
def server_url(tmp_path_factory):
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with llama_cpp_server(resolve_model_path("bundled:smollm2-135m"), log) as url:
        yield url


def server_profile(tmp_path, base_url, **model):
    path = tmp_path / "model.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "model": {"backend": "openai", "base_url": base_url, "model": "smollm2", **model},
                "generation": {"max_new_tokens": 160, "temperature": 0},
            }
        ),
        encoding="utf-8",
    )
    return path


@pytest.mark.model
@pytest.mark.server
def test_text_mode_decision_against_the_live_server(tmp_path, server_url):
    config = server_profile(tmp_path, server_url)
    messages = load_json(DATA / "messages" / "messages_with_tool.json")
    result = generate_ai_message(
        config, messages, basic_tools(), tool_calling="prompt_json"
    ).to_dict()
    assert result["model"]["backend"] == "openai"
    first = result["attempts"][0]
    assert first["raw_text"]
    assert first["usage"]["prompt_tokens"] > 100 and first["usage"]["completion_tokens"] > 0
    assert result["status"] in ("success", "error")
    if result["status"] == "error":
        assert result["error"]["type"] in ERROR_KINDS and result["error"]["message"]


@pytest.mark.model
@pytest.mark.server
def test_native_mode_falls_back_to_the_parser_when_the_call_is_left_in_content(
    tmp_path, server_url
):
    config = server_profile(tmp_path, server_url)
    messages = load_json(DATA / "messages" / "messages_with_tool.json")
    result = generate_ai_message(config, messages, basic_tools(), tool_calling="builtin").to_dict()
    first = result["attempts"][0]
    assert first["usage"]["prompt_tokens"] > 0
    # this server's generic template sends no tool_calls back: whatever came, it was read
    # from content by the universal parser, or reported with its reason
    if result["status"] == "success":
        assert result["parse"]["format"] != "native"
    else:
        assert result["error"]["type"] in ERROR_KINDS and result["error"]["message"]


@pytest.mark.model
@pytest.mark.server
def test_constrained_mode_through_response_format_gives_valid_replies(tmp_path, server_url):
    config = server_profile(tmp_path, server_url, response_format="json_object")
    # bounds that fit a reply in 160 tokens: a reply cut off at the limit is not valid
    text = config.read_text("utf-8") + "tool_calling: {max_calls: 2, max_string_length: 32}\n"
    config.write_text(text, "utf-8")
    tools = basic_tools()
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    for name in ("messages_with_tool.json", "messages_multi_tool.json", "messages_no_tool.json"):
        result = generate_ai_message(
            config, load_json(DATA / "messages" / name), tools, tool_calling="constrained"
        ).to_dict()
        # response_format reached the server: every reply is a JSON object (how often it
        # is a valid decision at the first attempt is a quality rate, benchmarked)
        assert result["attempts"], name
        for attempt in result["attempts"]:
            assert attempt["raw_text"].lstrip().startswith("{"), (name, attempt["raw_text"])
            assert attempt["usage"]["prompt_tokens"] > 0, name
        if result["status"] == "error":
            assert result["error"]["type"] in ERROR_KINDS and result["error"]["message"], name
            continue
        assert result["status"] == "success", name
        assert result["parse"]["attempts"] == len(result["attempts"]), name
        for call in result["ai_message"]["tool_calls"]:
            Draft202012Validator(schemas[call["name"]]).validate(call["args"])


class FlakyHandler(http.server.BaseHTTPRequestHandler):
    """Answers 503, then 429, then a valid chat completion."""

    statuses: ClassVar[list[int]] = [503, 429]
    seen: ClassVar[list[int]] = []

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        status = self.statuses[len(self.seen)] if len(self.seen) < len(self.statuses) else 200
        self.seen.append(status)
        body = (
            {"error": {"message": "busy"}}
            if status != 200
            else {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": "srv_1",
                                    "type": "function",
                                    "function": {
                                        "name": "calculator",
                                        "arguments": '{"expression": "2+2"}',
                                    },
                                }
                            ],
                        },
                    }
                ],
                "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
            }
        )
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status == 429:
            self.send_header("Retry-After", "0")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.mark.slow
def test_retries_with_backoff_on_503_and_429_then_reads_native_tool_calls(tmp_path):
    FlakyHandler.seen = []
    port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), FlakyHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        config = server_profile(tmp_path, f"http://127.0.0.1:{port}/v1", http_retries=3)
        clear_backend_cache()
        result = generate_ai_message(
            config, [{"role": "user", "content": "2+2?"}], basic_tools(), tool_calling="builtin"
        ).to_dict()
    finally:
        server.shutdown()
    assert FlakyHandler.seen == [503, 429, 200]
    assert result["status"] == "success"
    assert result["parse"]["format"] == "native"
    assert result["ai_message"]["tool_calls"] == [
        {"id": "srv_1", "name": "calculator", "args": {"expression": "2+2"}}
    ]


def test_unreachable_server_is_an_error_result_not_an_exception(tmp_path):
    config = server_profile(
        tmp_path, f"http://127.0.0.1:{free_port()}/v1", http_retries=0, timeout=5
    )
    clear_backend_cache()
    result = generate_ai_message(
        config, [{"role": "user", "content": "hi"}], basic_tools()
    ).to_dict()
    assert result["status"] == "error"
    assert result["error"]["type"] == "backend_error"


def test_api_key_comes_from_the_environment(tmp_path, monkeypatch):
    config = server_profile(tmp_path, "http://127.0.0.1:9/v1", api_key_env="LOKAL_TEST_KEY")
    monkeypatch.delenv("LOKAL_TEST_KEY", raising=False)
    clear_backend_cache()
    with pytest.raises(ConfigError, match="LOKAL_TEST_KEY"):
        get_backend(load_profile(config))
    monkeypatch.setenv("LOKAL_TEST_KEY", "secret")
    assert get_backend(load_profile(config)).client.api_key == "secret"
