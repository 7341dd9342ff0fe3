"""Runs that tell the truth (issue 10, parts 2, 6 and 7): input checks before any model work,
one set of exit codes for every command, quiet broken pipes and Ctrl-C, and the small things
(rag index on a missing folder, bench --limit and its table, the mock named as the mock,
deleting notes and conversations, conversations list times and Markdown, bfcl --help).

Model-free: everything runs on the mock backend or stops before a backend is built."""

from __future__ import annotations

import io
import json
import math
import os
import sqlite3
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from helpers import DATA, MOCK_YAML, MODEL_CONFIG, REPO
from lokal.cli import EXIT_CODES, build_parser, main

MESSAGES = DATA / "messages" / "messages_with_tool.json"
TOOLS = DATA / "messages" / "tools_schema_basic.json"
WORKSPACE = DATA / "workspace"
SECRET = "the-private-note-7f3a"


@pytest.fixture
def mock(tmp_path) -> list[str]:
    """``--model_config`` options for a quick mock profile."""
    path = tmp_path / "mock.yaml"
    path.write_text(MOCK_YAML, encoding="utf-8")
    return ["--model_config", str(path)]


@pytest.fixture
def no_model(monkeypatch):
    """Any attempt to build an agent or a backend fails the test."""
    import lokal.cli.run
    import lokal.llm.backends
    import lokal.llm.request

    def forbidden(*args, **kwargs):
        raise AssertionError("a model was about to be loaded")

    monkeypatch.setattr(lokal.llm.backends, "get_backend", forbidden)
    monkeypatch.setattr(lokal.llm.request, "get_backend", forbidden)
    monkeypatch.setattr(lokal.cli.run, "build_agent", forbidden)


def _one_line_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# --- 2. input checks before any model work ----------------------------------------------------


@pytest.mark.parametrize("question", ["", "   ", "\n\t "])
def test_an_empty_question_is_exit_2_before_any_model(
    question, no_model, isolated_lokal_home, capsys
):
    memory = isolated_lokal_home / "memory"
    memory.mkdir()
    (memory / "private.md").write_text(f"My secret: {SECRET}\n", encoding="utf-8")
    started = time.perf_counter()
    code = main(["run", question, "--model_name", "mock", "--quiet", "--json"])
    out, err = capsys.readouterr()
    assert code == 2
    assert time.perf_counter() - started < 5
    assert out == ""  # no answer, no system prompt, no memory
    assert SECRET not in err and "helpful assistant" not in err
    assert "question is empty" in _one_line_error(err)


@pytest.mark.parametrize(
    "options, expected",
    [
        (["--workspace", str(DATA / "messages" / "messages_with_tool.json")], "--workspace"),
        (["--workspace", "/definitely/not/here"], "--workspace"),
        (["--skills", "/definitely/not/here"], "--skills"),
        (["--time_budget", "0"], "--time_budget"),
        (["--time_budget", "-5"], "--time_budget"),
        (["--time_budget", "nan"], "--time_budget"),
        (["--max_iterations", "0"], "--max_iterations"),
        (["--trace", str(MESSAGES / "t.jsonl")], "--trace"),  # a file in the way
    ],
)
def test_bad_run_options_are_exit_2_before_any_model(options, expected, no_model, capsys):
    code = main(["run", "Read the intro", "--model_name", "mock", "--quiet", *options])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert expected in _one_line_error(err)


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "hi", "--model_name", "no-such-profile"],
        ["run", "hi", "--model_config", "/no/such/model.yaml"],
        ["decide", "--messages", str(MESSAGES), "--model_name", "no-such-profile"],
        ["decide", "--messages", "/no/such/messages.json", "--mode", "mock"],
        ["rag", "ask", "what?", "--model_name", "no-such-profile"],
        ["bench", "--profiles", "no-such-profile"],
        ["bench", "--limit", "0"],
        ["bfcl", "--categories", "no_such_category", "--profile", "mock"],
    ],
)
def test_bad_config_or_input_is_exit_2_in_one_line(argv, no_model, tmp_path, capsys):
    code = main([*argv, "--outdir", str(tmp_path)] if argv[0] in ("bench", "bfcl") else argv)
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert _one_line_error(err).startswith(f"lokal {argv[0]}: error: ")


def test_malformed_yaml_and_binary_json_are_exit_2(tmp_path, no_model, capsys):
    config = tmp_path / "model.yaml"
    config.write_text("model: [unclosed\n", encoding="utf-8")
    assert main(["run", "hi", "--model_config", str(config), "--quiet"]) == 2
    assert "not valid YAML" in _one_line_error(capsys.readouterr().err)
    binary = tmp_path / "messages.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    assert main(["decide", "--messages", str(binary), "--mode", "mock"]) == 2
    assert "not valid JSON" in _one_line_error(capsys.readouterr().err)


def test_an_unusable_output_folder_is_exit_2_without_a_traceback(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    argv = ["decide", "--messages", str(MESSAGES), "--mode", "mock"]
    code = main([*argv, "--outdir", str(blocker / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "a-file" in err.splitlines()[-1]


# --- 6. exit codes, the same for every command ------------------------------------------------


def _subcommand_parsers():
    parser = build_parser()
    found = {"lokal": parser}

    def walk(prefix, p):
        for action in p._actions:
            if hasattr(action, "choices") and isinstance(action.choices, dict):
                for name, child in action.choices.items():
                    found[f"{prefix} {name}"] = child
                    walk(f"{prefix} {name}", child)

    walk("lokal", parser)
    return found


def test_every_help_ends_with_the_same_exit_codes(capsys):
    parsers = _subcommand_parsers()
    assert {"lokal run", "lokal decide", "lokal rag ask", "lokal bench", "lokal memory"} <= set(
        parsers
    )
    for name in parsers:
        argv = name.split()[1:]
        with pytest.raises(SystemExit) as done:
            main([*argv, "--help"])
        assert done.value.code == 0
        out = capsys.readouterr().out
        assert out.rstrip().endswith(EXIT_CODES.rstrip()), name
    for code in ("0 ", "1 ", "2 ", "130", "141"):
        assert f"\n  {code}" in EXIT_CODES


def test_the_readme_documents_the_same_codes():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    for code in ("0", "1", "2", "130", "141"):
        assert f"| {code} |" in section


def test_a_forced_final_answer_exits_0_and_a_spent_budget_exits_1(mock, capsys):
    base = ["run", "Read the intro", *mock, "--workspace", str(WORKSPACE)]
    code = main([*base, "--quiet", "--json", "--max_iterations", "1"])
    record = json.loads(capsys.readouterr().out)
    assert record["status"] == "max_iterations" and record["answered"] is True
    assert code == 0
    code = main([*base, "--quiet", "--json", "--time_budget", "1e-9"])
    record = json.loads(capsys.readouterr().out)
    assert record["status"] == "time_budget" and record["answered"] is False
    assert code == 1


def test_decide_exits_1_when_the_reply_is_unusable(monkeypatch, capsys):
    import lokal.llm.decide
    from lokal.records import Decision, DecisionError

    unusable = Decision(
        model={"profile": "mock", "display_name": "mock", "backend": "mock"},
        strategy="react",
        purpose="decide",
        tool_calling="prompt_json",
        prompt=[],
        error=DecisionError("parse_error", "garbage"),
    )
    monkeypatch.setattr(lokal.llm.decide, "generate_ai_message", lambda *a, **k: unusable)
    code = main(["decide", "--messages", str(MESSAGES), "--mode", "mock"])
    assert code == 1
    assert json.loads(capsys.readouterr().out)["status"] == "error"


class _FakeStore:
    name = "fake"

    def count(self):
        return 3

    def close(self):
        pass


class _FakeEmbedder:
    def close(self):
        pass


@pytest.mark.parametrize(
    "record, expected",
    [
        ({"status": "success", "raw_answer": "WAL [1]", "citations": [{"n": 1}]}, 0),
        ({"status": "no_context", "raw_answer": "", "citations": []}, 1),
        ({"status": "success", "raw_answer": "The documents do not contain this information.",
          "citations": []}, 1),
        ({"status": "error", "raw_answer": "", "citations": [{"n": 1}]}, 1),
        ({"status": "not_found", "raw_answer": "The document is not available.",
          "citations": []}, 1),
        ({"status": "unsupported", "raw_answer": "WAL [2]", "citations": []}, 1),
        ({"status": "extracted", "raw_answer": "WAL lets readers read. [1]",
          "citations": [{"n": 1}]}, 0),
    ],
)  # fmt: skip
def test_rag_ask_exits_1_when_it_cannot_answer(record, expected, monkeypatch, capsys):
    import lokal.cli.rag
    import lokal.llm.answer

    monkeypatch.setattr(lokal.cli.rag, "open_from_args", lambda a: (_FakeStore(), _FakeEmbedder()))
    monkeypatch.setattr(
        lokal.llm.answer, "answer_question", lambda *a, **k: {**record, "answer": "shown"}
    )
    code = main(["rag", "ask", "Can readers work during a write?", "--model_name", "mock"])
    assert code == expected
    assert capsys.readouterr().out.strip() == "shown"


@pytest.mark.parametrize("argv", [["rag", "ask", "  "], ["rag", "search", ""]])
def test_rag_empty_questions_are_exit_2_before_the_index_opens(argv, monkeypatch, capsys):
    import lokal.cli.rag

    def forbidden(args):
        raise AssertionError("the index was opened")

    monkeypatch.setattr(lokal.cli.rag, "open_from_args", forbidden)
    assert main(argv) == 2
    assert "is empty" in _one_line_error(capsys.readouterr().err)


def _lokal() -> list[str]:
    """The ``lokal`` command: the console script when installed, else the same entry point
    through this Python."""
    script = Path(sys.executable).parent / "lokal"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from lokal.cli import main; sys.exit(main())"]


def _run_into_a_closed_pipe(argv: list[str], env_home: Path) -> tuple[int, str]:
    """Run ``lokal argv`` with stdout a pipe whose reader is already gone."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {**os.environ, "LOKAL_HOME": str(env_home)}
    try:
        process = subprocess.Popen(
            [*_lokal(), *argv], stdout=write_end, stderr=subprocess.PIPE, env=env, text=True
        )
    finally:
        os.close(write_end)
    _, err = process.communicate(timeout=120)
    return process.returncode, err


def test_a_closed_pipe_ends_quietly(isolated_lokal_home):
    argv = ["decide", "--messages", str(MESSAGES), "--mode", "mock"]
    code, err = _run_into_a_closed_pipe([*argv, "--quiet"], isolated_lokal_home)
    assert code == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err


def test_a_closed_pipe_keeps_the_trace_of_the_run(isolated_lokal_home, tmp_path, mock):
    trace = tmp_path / "trace.jsonl"
    argv = [
        *["run", "Read the intro", *mock, "--workspace", str(WORKSPACE)],
        *["--quiet", "--json", "--trace", str(trace)],
    ]
    code, err = _run_into_a_closed_pipe(argv, isolated_lokal_home)
    assert code == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    assert events[-1]["type"] == "final"


def test_a_broken_pipe_in_process_is_141_without_a_traceback(monkeypatch, capsys):
    import lokal.llm.decide

    def closed(*args, **kwargs):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(lokal.llm.decide, "generate_ai_message", closed)
    assert main(["decide", "--messages", str(MESSAGES), "--mode", "mock"]) == 141
    assert "Traceback" not in capsys.readouterr().err


def test_ctrl_c_is_130_in_one_line_and_the_trace_is_kept(monkeypatch, tmp_path, mock, capsys):
    import lokal.runtime

    original = lokal.runtime.Agent.run

    def interrupted(self, question, history=None):
        self.subscribe(_interrupt_on_first_decision)
        return original(self, question, history)

    monkeypatch.setattr(lokal.runtime.Agent, "run", interrupted)
    trace = tmp_path / "trace.jsonl"
    argv = ["run", "Read the intro", *mock, "--workspace", str(WORKSPACE)]
    code = main([*argv, "--quiet", "--trace", str(trace)])
    out, err = capsys.readouterr()
    assert code == 130 and out == ""
    assert err.splitlines()[-1] == "lokal run: interrupted" and "Traceback" not in err
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    assert any(e["type"] == "decision" for e in events)  # written before Ctrl-C, kept


def _interrupt_on_first_decision(event):
    from lokal.events import DecisionMade

    if isinstance(event, DecisionMade):
        raise KeyboardInterrupt


# --- 7. the small things ----------------------------------------------------------------------


def test_rag_index_of_a_missing_folder_says_so(tmp_path, capsys):
    index = tmp_path / "index.db"
    code = main(["rag", "index", "/no/such/dir", "--store_path", str(index), "--quiet"])
    line = _one_line_error(capsys.readouterr().err)
    assert code == 2
    assert "no such file or folder" in line and "/no/such/dir" in line
    assert "unsupported" not in line
    assert not index.exists()  # checked before the index was opened


def test_load_file_reports_a_missing_file_before_its_type(tmp_path):
    from lokal.errors import LokalError
    from lokal.rag.loaders import UnsupportedFileType, load_file

    with pytest.raises(LokalError, match="no such file or folder") as error:
        load_file(tmp_path / "missing")
    assert not isinstance(error.value, UnsupportedFileType)
    with pytest.raises(LokalError, match="is a folder"):
        load_file(tmp_path)


def test_decide_in_mock_mode_announces_the_mock(capsys):
    argv = ["decide", "--messages", str(MESSAGES), "--mode", "mock"]
    assert main([*argv, "--model_config", str(MODEL_CONFIG)]) == 0
    model_line = next(
        line for line in capsys.readouterr().err.splitlines() if line.startswith("model:")
    )
    assert "mock" in model_line
    assert "llama.cpp" not in model_line and "SmolLM2" not in model_line


def test_model_line_names_the_mock_profile_and_the_real_model():
    from lokal.config import load_profile, model_line

    assert "mock" in model_line(load_profile(MODEL_CONFIG, "mock"))
    default = load_profile(MODEL_CONFIG)
    assert model_line(default) == f"model: {default.display_name}"
    assert "llama.cpp" not in model_line(default.with_backend("mock"))


def test_bench_limit_labels_the_mock_and_prints_whole_columns(tmp_path, capsys):
    outdir = tmp_path / "bench"
    config = tmp_path / "model.yaml"  # a llama.cpp profile (never loaded: --mode mock)
    config.write_text(
        "model: {name: smollm2-135m, backend: llamacpp, model_path: /no/such.gguf}\n"
        "tool_calling: {mode: prompt_json}\n",
        encoding="utf-8",
    )
    code = main(
        [
            *["bench", "--model_config", str(config), "--cases", str(DATA / "bench_cases")],
            *["--tools_schema", str(TOOLS), "--mode", "mock", "--modes", "prompt_json"],
            *["--limit", "2", "--outdir", str(outdir)],
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    summary = json.loads((outdir / "summary.json").read_text("utf-8"))
    assert list(summary["summary"]) == ["mock/prompt_json"]  # not the llama.cpp profile
    assert summary["summary"]["mock/prompt_json"]["cases"] == 2 and summary["limit"] == 2
    assert len((outdir / "cases.jsonl").read_text("utf-8").splitlines()) == 2
    assert "lokal bench: 2 cases" in out
    for text in ("mock/prompt_json", "mean latency (ms)", "p50 latency (ms)", "p95 latency (ms)"):
        assert text in out  # on one line: not wrapped, not cut
    assert "mean latency (ms)" in (outdir / "report.html").read_text("utf-8")


def test_tables_into_a_pipe_are_not_cut():
    from rich.console import Console
    from rich.table import Table

    from lokal.cli.bench import print_table

    table = Table()
    for header in ("profile/mode", "success %", "mean latency (ms)", "p95 latency (ms)"):
        table.add_column(header, overflow="fold")
    table.add_row("smollm2-135m-constrained/constrained", "100.0", "1234", "5678")
    buffer = io.StringIO()
    print_table(Console(file=buffer, width=40), table)
    text = buffer.getvalue()
    for cell in ("smollm2-135m-constrained/constrained", "mean latency (ms)", "5678"):
        assert cell in text


def test_run_bench_labels_mock_rows_per_profile_when_there_are_several():
    from lokal.bench.batch import run_bench
    from lokal.config import load_profile

    case = {"id": "c", "messages": [{"role": "user", "content": "hi"}], "expect": {}}
    free = load_profile(MODEL_CONFIG, "smollm2-135m-free")
    constrained = load_profile(MODEL_CONFIG, "smollm2-135m-constrained")
    records = run_bench([free, constrained], [None], [case], [], decision_mode="mock")
    assert [r["profile"] for r in records] == [
        "mock:smollm2-135m-free",
        "mock:smollm2-135m-constrained",
    ]
    (record,) = run_bench([load_profile(MODEL_CONFIG, "mock")], [None], [case], [])
    assert record["profile"] == "mock"


def test_memory_delete_removes_a_note(capsys):
    assert main(["memory", "add", "Ada likes tea."]) == 0
    note_id = json.loads(capsys.readouterr().out)["id"]
    assert main(["memory", "delete", str(note_id)]) == 0
    assert json.loads(capsys.readouterr().out) == {"deleted": note_id}
    assert main(["memory", "notes"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["memory", "delete", str(note_id)]) == 2
    assert "no note with id" in _one_line_error(capsys.readouterr().err)
    for bad in ("abc", "  "):
        assert main(["memory", "delete", bad]) == 2
        _one_line_error(capsys.readouterr().err)
    assert main(["memory", "add", "   "]) == 2
    assert "empty" in _one_line_error(capsys.readouterr().err)


def _a_conversation(name: str, mock: list[str], capsys) -> None:
    argv = ["run", "Read the intro", *mock, "--workspace", str(WORKSPACE)]
    assert main([*argv, "--quiet", "--conversation", name]) == 0
    capsys.readouterr()


def test_conversations_delete_removes_runs_and_messages(isolated_lokal_home, mock, capsys):
    _a_conversation("ada", mock, capsys)
    _a_conversation("bob", mock, capsys)
    assert main(["conversations", "delete", "ada"]) == 0
    deleted = json.loads(capsys.readouterr().out)
    assert deleted["deleted"] == "ada" and deleted["runs"] == 1 and deleted["messages"] > 0
    assert main(["conversations", "list"]) == 0
    assert [row["name"] for row in json.loads(capsys.readouterr().out)] == ["bob"]
    conn = sqlite3.connect(isolated_lokal_home / "lokal.db")
    try:
        runs = conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        orphans = conn.execute(
            "SELECT COUNT(*) FROM messages WHERE conversation_id NOT IN"
            " (SELECT id FROM conversations)"
        ).fetchone()[0]
    finally:
        conn.close()
    assert runs == 1 and orphans == 0
    assert main(["conversations", "delete", "ada"]) == 2
    assert "no conversation named 'ada'" in _one_line_error(capsys.readouterr().err)
    assert main(["conversations", "delete"]) == 2
    _one_line_error(capsys.readouterr().err)


def test_conversations_list_gives_local_iso_times_and_a_markdown_table(mock, capsys):
    _a_conversation("ada|b", mock, capsys)
    assert main(["conversations", "list"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    for key in ("created", "last_run"):
        when = datetime.fromisoformat(row[key])
        assert when.tzinfo is not None
        assert math.isclose(when.timestamp(), time.time(), abs_tol=120)
    assert main(["conversations", "list", "--format", "markdown"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "| name | runs | messages | created | last run |"
    assert set(lines[1].replace("|", "").split()) == {"---"}
    cells = [c.strip() for c in lines[2].strip("|").split(" | ")]
    assert cells[0] == "ada\\|b" and cells[1] == "1" and cells[3] == row["created"]
    assert "\t" not in "".join(lines)


def test_bfcl_help_lists_the_categories(capsys):
    from lokal.bench.bfcl_data import AST_CATEGORIES

    with pytest.raises(SystemExit):
        main(["bfcl", "--help"])
    out = capsys.readouterr().out
    for category in AST_CATEGORIES:
        assert category in out
