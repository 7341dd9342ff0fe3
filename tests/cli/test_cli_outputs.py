"""Output options of the ``lokal`` commands (issue 18): a run written with ``--trace`` is
still listed by ``lokal traces list``, and every output path makes its missing folders."""

from __future__ import annotations

import json

import pytest

from helpers import DATA, MOCK_YAML
from lokal.cli import main

MESSAGES = DATA / "messages" / "messages_with_tool.json"
WORKSPACE = DATA / "workspace"


@pytest.fixture
def mock(tmp_path) -> list[str]:
    path = tmp_path / "mock.yaml"
    path.write_text(MOCK_YAML, encoding="utf-8")
    return ["--model_config", str(path)]


def test_a_run_with_trace_in_a_new_folder_is_written_and_listed(tmp_path, mock, capsys):
    trace = tmp_path / "fresh" / "deeper" / "run_trace.jsonl"  # no such folder yet
    argv = ["run", "Read the intro", *mock, "--workspace", str(WORKSPACE), "--quiet"]
    assert main([*argv, "--trace", str(trace)]) == 0
    events = [json.loads(line) for line in trace.read_text("utf-8").splitlines()]
    assert events[0]["type"] == "run_start" and events[-1]["type"] == "final"
    capsys.readouterr()
    assert main(["traces", "list", "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)
    assert run["file"] == str(trace.resolve())
    assert run["question"] == "Read the intro" and run["status"] == events[-1]["status"]
    assert main(["traces", "list"]) == 0
    out = capsys.readouterr().out
    assert "Read the intro" in out and str(trace.resolve()) in out


def test_a_stored_link_is_served_by_name(tmp_path, isolated_lokal_home):
    from lokal.viewer.store import link_trace, trace_file

    trace = tmp_path / "elsewhere.jsonl"
    trace.write_text('{"type": "run_start", "question": "q"}\n', encoding="utf-8")
    link = link_trace(trace)
    assert link is not None and link.parent == isolated_lokal_home / "traces"
    assert trace_file(link.name) == trace.resolve()
    # a trace already in the stored runs gets no second entry
    assert link_trace(isolated_lokal_home / "traces" / "20250101-000000-abcdef.jsonl") is None


def test_output_options_make_their_folders(tmp_path, capsys):
    outdir = tmp_path / "new" / "decide"
    argv = ["decide", "--messages", str(MESSAGES), "--mode", "mock", "--quiet"]
    assert main([*argv, "--outdir", str(outdir)]) == 0
    assert (outdir / "ai_message.json").is_file()
    trace = tmp_path / "trace.jsonl"
    trace.write_text(
        json.dumps({"type": "run_start", "question": "q", "time": 0.0})
        + "\n"
        + json.dumps({"type": "final", "status": "final", "answer": "a"})
        + "\n",
        encoding="utf-8",
    )
    exported = tmp_path / "not" / "yet" / "spans.json"
    assert main(["trace", "export", str(trace), "-o", str(exported)]) == 0
    assert "resourceSpans" in json.loads(exported.read_text("utf-8"))
    page = tmp_path / "pages" / "run.html"
    assert main(["trace", "view", str(trace), "-o", str(page)]) == 0
    assert page.is_file()


def test_an_output_folder_blocked_by_a_file_is_exit_2(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    trace = tmp_path / "trace.jsonl"
    trace.write_text(json.dumps({"type": "run_start", "question": "q"}) + "\n", "utf-8")
    assert main(["trace", "export", str(trace), "-o", str(blocker / "x" / "s.json")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "a-file" in err


# --- --version and help text (issue 18, 7a) ---------------------------------------------------


def test_version_prints_lokal_and_the_version_and_exits_0(capsys):
    from lokal import __version__

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"lokal {__version__}"


def test_every_option_of_every_subcommand_has_help():
    import argparse

    from lokal.cli import build_parser

    missing = []

    def walk(prog: str, parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helped = {choice.dest for choice in action._choices_actions}
                for name, child in action.choices.items():
                    if name not in helped:
                        missing.append(f"{prog} {name} (the subcommand)")
                    walk(f"{prog} {name}", child)
                continue
            if not (action.help or "").strip() or action.help == argparse.SUPPRESS:
                missing.append(f"{prog} {'/'.join(action.option_strings) or action.dest}")

    walk("lokal", build_parser())
    assert missing == [], "options without help text: " + ", ".join(missing)


# --- quiet, unwrapped stderr, note ids, times, closed pipes (issue 18, 7g) ----------------------


def test_quiet_prints_nothing_on_stderr(mock, capsys):
    argv = ["run", "Read the intro", *mock, "--workspace", str(WORKSPACE), "--no-trace"]
    assert main([*argv, "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() and err == ""
    assert main(["decide", "--messages", str(MESSAGES), "--mode", "mock", "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_stderr_into_a_pipe_is_not_wrapped_at_80_columns(mock, capsys):
    question = "Read the intro and then tell me " + "in great detail " * 8 + "what it says."
    assert len(question) > 120
    argv = ["run", question, *mock, "--workspace", str(WORKSPACE), "--no-trace"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert f"question: {question}" in err.splitlines()


def test_a_note_id_is_never_given_again(capsys):
    ids = []
    for text in ("Ada likes tea.", "Bob likes coffee."):
        assert main(["memory", "add", text]) == 0
        ids.append(json.loads(capsys.readouterr().out)["id"])
    assert main(["memory", "delete", str(ids[-1])]) == 0
    capsys.readouterr()
    assert main(["memory", "add", "Cleo likes cocoa."]) == 0
    new_id = json.loads(capsys.readouterr().out)["id"]
    assert new_id not in ids and new_id > max(ids)


def test_memory_notes_give_created_as_local_iso_time(capsys):
    from datetime import datetime

    assert main(["memory", "add", "Ada likes tea."]) == 0
    capsys.readouterr()
    assert main(["memory", "notes"]) == 0
    (note,) = json.loads(capsys.readouterr().out)
    created = datetime.fromisoformat(note["created"])  # not a Unix float
    assert created.tzinfo is not None
    assert abs(created.timestamp() - __import__("time").time()) < 600


def test_python_m_lokal_trace_into_a_closed_pipe_ends_quietly(tmp_path):
    import os
    import subprocess
    import sys

    trace = tmp_path / "trace.jsonl"
    line = json.dumps({"type": "run_start", "question": "x" * 2000})
    trace.write_text((line + "\n") * 200, encoding="utf-8")
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "lokal.trace", str(trace)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        os.close(write_end)
    _, err = process.communicate(timeout=60)
    assert process.returncode in (0, 141), err
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err


# --- every load is a step of its own (issue 18, 7b) ---------------------------------------------


@pytest.mark.slow  # loads the MiniLM of tool preselection
def test_a_mock_run_loads_no_model_and_its_steps_account_for_its_time(
    tmp_path, monkeypatch, capsys
):
    import lokal.llm.backends
    import lokal.llm.select
    from lokal.config import load_profile

    monkeypatch.setattr(lokal.llm.select, "_DEFAULT", None)  # preselection not loaded yet
    asked: list[str] = []
    real = lokal.llm.backends.get_backend

    def recording(profile, *args, **kwargs):
        asked.append(profile.backend)
        return real(profile, *args, **kwargs)

    monkeypatch.setattr(lokal.llm.backends, "get_backend", recording)
    monkeypatch.setattr("lokal.llm.request.get_backend", recording)
    trace = tmp_path / "run.jsonl"
    argv = ["run", "Use the file_reader tool to read docs/agent_intro.txt", "--backend", "mock"]
    assert main([*argv, "--workspace", str(WORKSPACE), "--trace", str(trace)]) == 0
    err = capsys.readouterr().err
    assert set(asked) == {"mock"}  # the bundled GGUF was never asked for
    display = load_profile(None).display_name  # SmolLM2-135M-Instruct …
    assert display not in err and "model SmolLM2" not in err
    assert "embeddings all-MiniLM-L6-v2 ready for tool preselection" in err
    events = [json.loads(line) for line in trace.read_text("utf-8").splitlines()]
    loads = [e for e in events if e["type"] == "model_load"]
    assert [e.get("component") for e in loads] == ["embeddings"]  # no chat model load
    # the loads, the decisions (start to end, preselection included) and the tool turns
    # account for the run's time
    at = {e["seq"]: e["elapsed_s"] for e in events}
    spent = sum(e["duration_s"] for e in loads)
    starts = {}
    for e in events:
        if e["type"] == "decision_start":
            starts[e["iteration"], "decision"] = e["elapsed_s"]
        elif e["type"] == "decision":
            spent += e["elapsed_s"] - starts[e["iteration"], "decision"]
        elif e["type"] == "tool_start":
            starts.setdefault((e["iteration"], "tools"), e["elapsed_s"])
        elif e["type"] == "tool_end":
            starts[e["iteration"], "tools_end"] = e["elapsed_s"]
    spent += sum(
        starts[i, "tools_end"] - starts[i, "tools"] for (i, kind) in starts if kind == "tools"
    )
    wall = events[-1]["duration_s"]
    assert wall - spent < 0.25 + 0.05 * wall, (wall, spent, at)
    first = next(e for e in events if e["type"] == "decision")
    assert first["elapsed_s"] - starts[1, "decision"] < 0.5 * wall  # no load hidden in it


# --- the README's MCP example works as printed (issue 18, 7e) -----------------------------------


def _lokal_script() -> str:
    import sys
    from pathlib import Path

    script = Path(sys.executable).parent / "lokal"
    # make test installs lokal (pip install -e), so its console script is beside Python
    assert script.is_file(), f"the lokal console script is not installed at {script}"
    return str(script)


@pytest.mark.slow  # starts MCP servers
def test_the_readme_mcp_example_starts_without_an_activated_environment(tmp_path):
    import os
    import re
    import subprocess

    from helpers import REPO

    readme = (REPO / "README.md").read_text("utf-8")
    printed = re.search(r"\$ cat servers\.json\n(.+)\n\$ lokal mcp list", readme).group(1)
    assert '"command": "python"' in printed  # the example as the README prints it
    servers = tmp_path / "servers.json"
    servers.write_text(printed, encoding="utf-8")
    # no virtual environment on PATH: "python" there, if any, lacks the mcp SDK
    env = {"PATH": "/usr/bin:/bin", "LOKAL_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [_lokal_script(), "mcp", "list", str(servers)],
        capture_output=True, text=True, timeout=120, cwd=REPO, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "weather: 9 tool(s)" in done.stdout and "weather_get-weather" in done.stdout
    # and the entry `lokal mcp config` prints for other clients starts lokal's server
    config = subprocess.run(
        [_lokal_script(), "mcp", "config", "--workspace", str(WORKSPACE)],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert config.returncode == 0, config.stderr
    entry = json.loads(config.stdout)["mcpServers"]["lokal"]
    assert os.path.isabs(entry["command"]) and str(WORKSPACE) in entry["args"]
    servers.write_text(config.stdout, encoding="utf-8")
    listed = subprocess.run(
        [_lokal_script(), "mcp", "list", str(servers)],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert "lokal:" in listed.stdout and "file_reader" in listed.stdout
