"""``lokal run``'s inputs and endings (issue 19): every check before anything is stored, Ctrl-C
stored as ``interrupted``, the question from standard input, ``--allow-hard-links``.

Model-free: the mock backend (``LOKAL_MOCK_DELAY_S`` slows its replies for the Ctrl-C test)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import DATA, MOCK_YAML
from lokal.cli import main

WORKSPACE = DATA / "workspace"


@pytest.fixture
def mock(tmp_path) -> list[str]:
    """``--model_config`` options for a quick mock profile (no tool preselection)."""
    path = tmp_path / "mock.yaml"
    path.write_text(MOCK_YAML, encoding="utf-8")
    return ["--model_config", str(path)]


def _rows(db: Path) -> dict[str, int]:
    """Rows of every table of the store (nothing when it does not exist)."""
    if not db.exists():
        return {}
    conn = sqlite3.connect(db)
    try:
        tables = [
            row[0]
            for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            if not row[0].startswith("sqlite_")
        ]
        return {t: conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] for t in tables}
    finally:
        conn.close()


def _lokal() -> list[str]:
    script = Path(sys.executable).parent / "lokal"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from lokal.cli import main; sys.exit(main())"]


# --- 1. nothing is stored before the inputs are checked ---------------------------------------


def _refusals(tmp_path: Path) -> dict[str, list[str]]:
    """Refused command lines (the question first) by case; their files in ``tmp_path``."""
    skills = tmp_path / "skills"
    (skills / "broken").mkdir(parents=True, exist_ok=True)
    (skills / "broken" / "SKILL.md").write_text("# no front matter\n", encoding="utf-8")
    gguf = tmp_path / "gguf.yaml"
    gguf.write_text(
        "model:\n  name: gone\n  backend: llamacpp\n  model_path: /definitely/not/here.gguf\n",
        encoding="utf-8",
    )
    servers = tmp_path / "servers.json"
    servers.write_text(
        json.dumps({"mcpServers": {"gone": {"command": str(tmp_path / "no-such-command")}}}),
        encoding="utf-8",
    )
    a_file = str(WORKSPACE / "notes.txt")
    return {
        "unknown backend": ["hi", "--backend", "nosuch"],
        "unknown profile": ["hi", "--model_name", "no-such-profile"],
        "missing model file": ["hi", "--model_config", str(gguf)],
        "empty question": ["  "],
        "NUL in the question": ["a\x00b"],
        "question over the context": ["word " * 20_000],
        "missing workspace": ["hi", "--workspace", "/definitely/not/here"],
        "workspace is a file": ["hi", "--workspace", a_file],
        "missing skills folder": ["hi", "--skills", "/definitely/not/here"],
        "malformed SKILL.md": ["hi", "--skills", str(skills)],
        "missing memory folder": ["hi", "--memory_dir", "/definitely/not/here"],
        "missing document index": ["hi", "--store_path", "/definitely/not/here.db"],
        "blank conversation name": ["hi", "--conversation", "   "],
        "missing MCP servers file": ["hi", "--mcp", "/definitely/not/servers.json"],
        "MCP server that cannot start": ["hi", "--mcp", str(servers)],
        "zero time budget": ["hi", "--time_budget", "0"],
        "zero max_iterations": ["hi", "--max_iterations", "0"],
    }


REFUSALS = [
    "unknown backend",
    "unknown profile",
    "missing model file",
    "empty question",
    "NUL in the question",
    "question over the context",
    "missing workspace",
    "workspace is a file",
    "missing skills folder",
    "malformed SKILL.md",
    "missing memory folder",
    "missing document index",
    "blank conversation name",
    "missing MCP servers file",
    "MCP server that cannot start",
    "zero time budget",
    "zero max_iterations",
]


@pytest.mark.parametrize("case", REFUSALS)
def test_a_refused_run_leaves_the_store_unchanged(
    case, tmp_path, isolated_lokal_home, mock, capsys
):
    assert sorted(_refusals(tmp_path)) == sorted(REFUSALS)
    db = isolated_lokal_home / "lokal.db"
    argv = ["run", "Read the intro", *mock, "--workspace", str(WORKSPACE), "--quiet"]
    assert main([*argv, "--conversation", "kept"]) == 0  # a store with rows in it
    before = _rows(db)
    assert before["runs"] == 1 and before["messages"] > 1
    capsys.readouterr()

    options = _refusals(tmp_path)[case]
    code = main(
        ["run", *options[:1], *mock, "--workspace", str(WORKSPACE), "--quiet", *options[1:]]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and err.startswith("lokal run: error: ")
    assert _rows(db) == before


@pytest.mark.parametrize("case", ["unknown backend", "malformed SKILL.md", "empty question"])
def test_a_refused_first_run_creates_no_store(case, tmp_path, isolated_lokal_home, mock, capsys):
    options = _refusals(tmp_path)[case]
    code = main(
        ["run", *options[:1], *mock, "--workspace", str(WORKSPACE), "--quiet", *options[1:]]
    )
    assert code == 2, capsys.readouterr().err
    assert not (isolated_lokal_home / "lokal.db").exists()


def test_an_unknown_backend_is_refused_before_the_run_starts(isolated_lokal_home, tmp_path, capsys):
    trace = tmp_path / "trace.jsonl"
    code = main(["run", "hi", "--backend", "nosuch", "--quiet", "--trace", str(trace)])
    err = capsys.readouterr().err
    assert code == 2 and "unknown backend 'nosuch'" in err and "available: " in err
    assert not trace.exists()  # refused by the input checks: no run, no trace
    assert not (isolated_lokal_home / "lokal.db").exists()


# --- 2. Ctrl-C: the run is stored as interrupted ----------------------------------------------


def test_ctrl_c_mid_run_stores_the_run_as_interrupted(tmp_path, isolated_lokal_home, mock):
    db = isolated_lokal_home / "lokal.db"
    # every reply of the mock takes 3 s: the first decision (its tool calls) and the tool
    # results are stored; Ctrl-C comes while the second decision is being made
    env = {**os.environ, "LOKAL_HOME": str(isolated_lokal_home), "LOKAL_MOCK_DELAY_S": "3"}
    argv = [*_lokal(), "run", "Read the intro", *mock, "--workspace", str(WORKSPACE), "--quiet"]
    argv += ["--conversation", "stopped"]
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while _rows(db).get("messages", 0) < 4:  # question, calls, two results
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the tools never ran"
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, err
    assert out == b"" and err.decode().splitlines()[-1] == "lokal run: interrupted"
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    (run,) = conn.execute("SELECT * FROM runs").fetchall()
    assert run["status"] == "interrupted" and run["finished"] is not None
    assert "interrupted" in run["stop_reason"]
    bodies = [json.loads(r[0]) for r in conn.execute("SELECT body FROM messages ORDER BY position")]
    conn.close()
    assert [m["role"] for m in bodies] == ["user", "assistant", "tool", "tool", "assistant"]
    outcome = bodies[-1]["content"]
    assert outcome.startswith("No final answer: the run was interrupted (Ctrl-C).")
    assert "file_reader" in outcome  # with the tool results it had

    from lokal.memory import ConversationStore

    history = ConversationStore(db).history("stopped")
    assert history.repairs == []  # a valid conversation: nothing to repair
    assert [m["role"] for m in history][-1] == "assistant"


# --- 3. the question from standard input ------------------------------------------------------


def _run_stdin(data: bytes, home: Path, mock: list[str]) -> subprocess.CompletedProcess:
    argv = [*_lokal(), "run", "-", *mock, "--workspace", str(WORKSPACE), "--quiet", "--json"]
    env = {**os.environ, "LOKAL_HOME": str(home)}
    return subprocess.run(argv, input=data, env=env, capture_output=True, timeout=120)


def test_a_question_from_standard_input(isolated_lokal_home, mock):
    done = _run_stdin(b"Read the intro\n", isolated_lokal_home, mock)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["question"] == "Read the intro"
    assert _rows(isolated_lokal_home / "lokal.db")["runs"] == 1


def test_standard_input_over_the_context_is_a_clear_error(isolated_lokal_home, mock):
    done = _run_stdin(b"word " * (150 * 1024 // 5), isolated_lokal_home, mock)  # 150 KiB
    err = done.stderr.decode()
    assert done.returncode == 2 and done.stdout == b""
    assert err.startswith("lokal run: error: standard input is too long for the context")
    assert "3,584 tokens" in err and len(err.splitlines()) == 1
    assert not (isolated_lokal_home / "lokal.db").exists()


@pytest.mark.parametrize(
    "data, expected",
    [
        (b"what is\x00this", "contains a NUL character"),
        (b"\xff\xfe binary", "not UTF-8 text"),
        (b"\n  \n", "question is empty"),
    ],
)
def test_standard_input_that_is_not_a_question_is_refused(
    data, expected, isolated_lokal_home, mock
):
    done = _run_stdin(data, isolated_lokal_home, mock)
    assert done.returncode == 2 and expected in done.stderr.decode()
    assert not (isolated_lokal_home / "lokal.db").exists()


# --- 4. --allow-hard-links --------------------------------------------------------------------


def _hard_linked_workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    (workspace / "docs").mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    outside.write_text("Agent intro. A linked file. Read it.", encoding="utf-8")
    os.link(outside, workspace / "docs" / "agent_intro.txt")
    return workspace


@pytest.mark.parametrize("allow", [False, True])
def test_allow_hard_links_lets_the_tools_read_hard_linked_files(allow, tmp_path, mock, capsys):
    workspace = _hard_linked_workspace(tmp_path)
    argv = ["run", "Read the intro", *mock, "--workspace", str(workspace), "--quiet", "--json"]
    assert main([*argv, *(["--allow-hard-links"] if allow else [])]) == 0
    messages = json.loads(capsys.readouterr().out)["messages"]
    (read,) = [m for m in messages if m.get("name") == "file_reader"]
    result = json.loads(read["content"])
    if allow:
        assert result["status"] == "success"
        assert "A linked file" in json.dumps(result["output"])
    else:
        assert result["status"] == "error" and "hard link" in result["error"]


def test_allow_hard_links_has_help_and_both_spellings():
    from lokal.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["run", "q", "--allow_hard_links"]).allow_hard_links is True
    assert parser.parse_args(["run", "q"]).allow_hard_links is False
    (run,) = [
        choice
        for action in parser._actions
        if isinstance(action.choices, dict)
        for name, choice in action.choices.items()
        if name == "run"
    ]
    (option,) = [a for a in run._actions if a.dest == "allow_hard_links"]
    assert "hard link" in option.help
