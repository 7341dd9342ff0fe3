"""``lokal run --mcp servers.json``: a run that calls an MCP tool, scripted and on the bundled
model; the servers stop when the run ends."""

import json

import pytest
from mcp_fixtures import gone, stdio_server

from helpers import DATA, MODEL_CONFIG, envelope
from lokal.cli import main
from lokal.llm.backends import clear_backend_cache, register_backend
from lokal.llm.backends.scripted import ScriptedBackend

# starts MCP servers, a browser or an HTTP server: in `make test`, not `make test-fast`
pytestmark = pytest.mark.slow

pytest.importorskip("mcp")

WORKSPACE = DATA / "workspace"
SCRIPTED_YAML = """model:
  name: scripted-mcp
  display_name: scripted model (no model)
  backend: scripted-mcp
tool_calling:
  mode: prompt_json
"""


@pytest.fixture
def servers_json(tmp_path):
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": {"weather": stdio_server()}}), encoding="utf-8")
    return path


def _answer(request):
    """The scripted model's second turn: answer from the tool results it was given."""
    results = [m for m in request.conversation if m.get("role") == "tool"]
    weather = next(m for m in results if m["name"] == "weather_get-weather")
    output = json.loads(weather["content"])["output"]["result"]
    return envelope(content=f"The MCP server says: {output}.")


def test_lokal_run_calls_an_mcp_tool_scripted(tmp_path, servers_json, capsys):
    backend = ScriptedBackend(
        [
            envelope([("weather_get-weather", {"city": "Oslo"}), ("weather_whoami", {})]),
            _answer,
        ]
    )
    register_backend("scripted-mcp", lambda profile: backend)
    clear_backend_cache()
    config = tmp_path / "model.yaml"
    config.write_text(SCRIPTED_YAML, encoding="utf-8")
    trace = tmp_path / "trace.jsonl"
    try:
        code = main(
            [
                "run",
                "What is the weather in Oslo? Use the weather_get-weather tool.",
                "--model_config",
                str(config),
                "--workspace",
                str(WORKSPACE),
                "--mcp",
                str(servers_json),
                "--trace",
                str(trace),
                "--quiet",
                "--json",
            ]
        )
    finally:
        clear_backend_cache()
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["answer"] == "The MCP server says: sunny in Oslo."
    offered = {t["function"]["name"] for t in backend.requests[0].tools}
    assert {"weather_get-weather", "weather_echo", "file_reader"} <= offered
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    ends = {e["name"]: e for e in events if e["type"] == "tool_end"}
    assert ends["weather_get-weather"]["status"] == "success"
    whoami = next(m for m in out["messages"] if m.get("name") == "weather_whoami")
    pid = json.loads(whoami["content"])["output"]["pid"]
    assert gone(pid), "the MCP server outlived the run"


def test_lokal_run_refuses_a_bad_mcp_config_before_any_model(tmp_path, capsys):
    bad = tmp_path / "servers.json"
    bad.write_text(json.dumps({"mcpServers": {"w": {"command": 3}}}), encoding="utf-8")
    code = main(["run", "hi", "--model_name", "mock", "--quiet", "--mcp", str(bad)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "mcpServers.w.command must be a non-empty string" in err


@pytest.mark.model
def test_lokal_run_calls_an_mcp_tool_on_the_bundled_model(tmp_path, servers_json, capsys):
    trace = tmp_path / "trace.jsonl"
    code = main(
        [
            "run",
            "Use the weather_get-weather tool to get the weather in Oslo.",
            "--model_config",
            str(MODEL_CONFIG),
            "--workspace",
            str(WORKSPACE),
            "--mcp",
            str(servers_json),
            "--max_iterations",
            "3",
            "--trace",
            str(trace),
            "--quiet",
            "--json",
        ]
    )
    """Mechanisms only (which tool the 135M model picks differs between CPUs; the scripted
    test above checks the call itself): the MCP tools are offered next to the built-in ones,
    every call asked for is run and answered by a ToolMessage, the exit code follows
    ``answered``."""
    out = json.loads(capsys.readouterr().out)
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    assert code == (0 if out["answered"] else 1), out["stop_reason"]
    assert events[0]["type"] == "run_start" and events[-1]["type"] == "final"
    assert {"weather_get-weather", "weather_echo", "file_reader"} <= set(events[0]["tools"])
    offered = [
        name
        for e in events
        if e["type"] == "decision"
        for name in (e.get("selection") or {}).get("offered", [])
    ]
    assert set(offered) <= set(events[0]["tools"])
    starts = [(e["call_id"], e["name"]) for e in events if e["type"] == "tool_start"]
    ends = [e for e in events if e["type"] == "tool_end"]
    assert sorted(starts) == sorted((e["call_id"], e["name"]) for e in ends)
    for end in ends:
        assert end["status"] in ("success", "error"), end
    tool_messages = {m["tool_call_id"]: m for m in out["messages"] if m["role"] == "tool"}
    assert sorted(tool_messages) == sorted(e["call_id"] for e in ends)
    for end in ends:
        if end["name"] == "weather_get-weather" and end["status"] == "success":
            result = json.loads(tool_messages[end["call_id"]]["content"])["output"]["result"]
            assert result.startswith("sunny in ")  # the MCP server's own reply came back
