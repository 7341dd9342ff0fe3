"""``lokal serve --mcp``: tools the server runs itself, beside the tools of each request."""

import pytest
from serve_support import QUESTION, TOOLS, calls_reply

from helpers import mcp_stdio_server
from lokal.mcp.client import open_mcp_tools
from lokal.tools.registry import ToolRegistry, tool

# starts MCP servers, a browser or an HTTP server: in `make test`, not `make test-fast`
pytestmark = pytest.mark.slow

MODEL = "smollm2-135m-free"  # the profile tests/serve/conftest.py serves


@tool
def lookup(key: str) -> dict:
    """The stored value of a key.

    Args:
        key: which value.
    """
    return {"key": key, "value": 42}


def test_a_server_tool_is_run_by_the_server_and_the_client_gets_the_answer(serve):
    served = serve(
        [calls_reply(("lookup", {"key": "a"})), "The value is 42."],
        server_tools=ToolRegistry([lookup]),
    )
    reply = served.client().chat.completions.create(model=MODEL, messages=QUESTION, tools=TOOLS)
    choice = reply.choices[0]
    assert choice.message.content == "The value is 42." and not choice.message.tool_calls
    assert choice.finish_reason == "stop"
    assert reply.model_extra["lokal"]["server_tools"] == [
        {"name": "lookup", "args": {"key": "a"}, "status": "success"}
    ]
    first, second = served.backend.requests
    offered = {t["function"]["name"] for t in first.tools}
    assert offered == {"get_weather", "get_time", "lookup"}
    results = [m for m in second.conversation if m["role"] == "tool"]
    assert len(results) == 1 and '"value": 42' in results[0]["content"]
    # both decisions' tokens are the reply's
    assert reply.usage.completion_tokens >= 2


def test_calls_of_the_clients_tools_go_to_the_client_after_the_servers_ran(serve):
    served = serve(
        [calls_reply(("lookup", {"key": "a"}), ("get_weather", {"city": "Paris"}))],
        server_tools=ToolRegistry([lookup]),
    )
    reply = served.client().chat.completions.create(model=MODEL, messages=QUESTION, tools=TOOLS)
    (call,) = reply.choices[0].message.tool_calls
    assert call.function.name == "get_weather"
    assert reply.choices[0].finish_reason == "tool_calls"
    assert reply.model_extra["lokal"]["server_tools"][0]["name"] == "lookup"


def test_a_request_tool_of_the_same_name_wins_over_the_servers(serve):
    mine = {"type": "function", "function": {**lookup.to_flat(), "description": "Client's."}}
    served = serve([calls_reply(("lookup", {"key": "a"}))], server_tools=ToolRegistry([lookup]))
    reply = served.client().chat.completions.create(model=MODEL, messages=QUESTION, tools=[mine])
    (call,) = reply.choices[0].message.tool_calls
    assert call.function.name == "lookup"  # returned to the client, not run by the server
    assert "server_tools" not in reply.model_extra["lokal"]


def test_an_mcp_tool_is_run_through_its_server(serve):
    config = {"mcpServers": {"fx": mcp_stdio_server()}}
    registry = ToolRegistry()
    with open_mcp_tools(config, registry=registry):
        assert "fx_add" in registry
        served = serve(
            [calls_reply(("fx_add", {"a": 2, "b": 3})), "2 + 3 is 5."], server_tools=registry
        )
        reply = served.client().chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "add 2 and 3"}]
        )
        assert reply.choices[0].message.content == "2 + 3 is 5."
        (run,) = reply.model_extra["lokal"]["server_tools"]
        assert run == {"name": "fx_add", "args": {"a": 2, "b": 3}, "status": "success"}
        result = next(m for m in served.backend.requests[1].conversation if m["role"] == "tool")
        assert "5" in result["content"]


def test_requests_are_recorded_in_the_conversation_store_when_it_is_on(serve, tmp_path):
    from lokal.memory.conversations import ConversationStore

    store = ConversationStore(tmp_path / "lokal.db")
    served = serve(
        ["It is sunny.", calls_reply(("get_weather", {"city": "Oslo"}))], conversations=store
    )
    client = served.client()
    client.chat.completions.create(
        model=MODEL, messages=QUESTION, tools=TOOLS, extra_headers={"X-Lokal-Conversation": "t"}
    )
    client.chat.completions.create(model=MODEL, messages=QUESTION, tools=TOOLS, user="t")
    first, second = store.runs("t")
    assert first["question"] == QUESTION[0]["content"]
    assert [m["role"] for m in first["messages"]] == ["user", "assistant"]
    assert first["messages"][-1]["content"] == "It is sunny."
    assert second["messages"][-1]["tool_calls"][0]["name"] == "get_weather"
    assert store.list()[0]["name"] == "t"
    store.close()


def test_the_serve_command_passes_its_options_to_the_app(monkeypatch, tmp_path):
    """--conversations, --prompt-cache-mb and --traces-dir reach create_app (a recording
    stand-in for the app and for uvicorn.run: no port is opened)."""
    import uvicorn

    import lokal.serve.app
    from lokal.cli import main
    from lokal.memory.conversations import ConversationStore

    seen = {}

    class App:
        state = type("State", (), {"names": ["mock"]})

    def create_app(*args, **kwargs):
        seen.update(kwargs)
        return App()

    monkeypatch.setattr(lokal.serve.app, "create_app", create_app)
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: seen.setdefault("ran", app))
    argv = ["serve", "--profile", "mock", "--conversations", "--traces-dir", str(tmp_path)]
    assert main([*argv, "--prompt-cache-mb", "64"]) == 0
    assert isinstance(seen["conversations"], ConversationStore)
    assert seen["prompt_cache_mb"] == 64 and seen["traces_dir"] == str(tmp_path)
    assert seen["server_tools"] is None and isinstance(seen["ran"], App)
    assert seen["keep_traces"] is True
    assert main([*argv, "--no-traces"]) == 0 and seen["keep_traces"] is False


def test_the_servers_tools_run_under_the_agent_loops_guards(serve):
    """One agent loop: an identical call is not run again, and the repeat limit forces an
    answer without the server's tools (the runtime's guards, not a second loop's)."""
    ran = []

    @tool
    def counted(key: str) -> dict:
        """A value, counting the runs.

        Args:
            key: which value.
        """
        ran.append(key)
        return {"key": key, "value": 42}

    same = calls_reply(("counted", {"key": "a"}))
    served = serve([same, same, same, "It is 42."], server_tools=ToolRegistry([counted]))
    reply = served.client().chat.completions.create(model=MODEL, messages=QUESTION, tools=TOOLS)
    assert reply.choices[0].message.content == "It is 42."
    assert ran == ["a"]
    runs = reply.model_extra["lokal"]["server_tools"]
    assert [r["name"] for r in runs] == ["counted", "counted"]
    last = {t["function"]["name"] for t in served.backend.requests[-1].tools}
    assert last == {"get_weather", "get_time"}  # the forced decision: the client's tools only
