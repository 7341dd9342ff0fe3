"""One CLI style (issue 11, part 7): every command group takes its actions as
sub-subcommands, one profile flag (``--profile``, with ``--model_name`` and, for bench,
``--profiles`` as aliases), every ``--format`` honoured, commands registered explicitly in
``lokal.cli.COMMANDS``, and a bad command line is one line on stderr with exit code 2.

Model-free: everything runs on the mock backend or stops before a backend is built."""

from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path

import pytest

from helpers import DATA, MOCK_YAML, MODEL_CONFIG
from lokal.cli import COMMANDS, build_parser, main

MESSAGES = DATA / "messages" / "messages_with_tool.json"
TOOLS = DATA / "messages" / "tools_schema_basic.json"
WORKSPACE = DATA / "workspace"
MOCK_PROFILES = (
    MOCK_YAML
    + """models:
  quick:
    display_name: quick mock (no tool preselection, so no MiniLM to load)
"""
)

GROUPS = {
    "rag": ["index", "ask", "search", "stats", "eval"],
    "conversations": ["list", "show", "export", "delete"],
    "memory": ["show", "notes", "add", "select", "delete"],
}


def _one_line_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_each_group_help_lists_its_actions(group, capsys):
    with pytest.raises(SystemExit) as done:
        main([group, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    for action in GROUPS[group]:
        assert f"\n    {action} " in out, (group, action)
    for action in GROUPS[group]:  # and each action has a help of its own
        with pytest.raises(SystemExit) as done:
            main([group, action, "--help"])
        assert done.value.code == 0
        assert capsys.readouterr().out.startswith(f"usage: lokal {group} {action}")


@pytest.mark.parametrize(
    "argv",
    [
        ["memory"],
        ["memory", "forget"],
        ["memory", "add"],
        ["memory", "select", "q", "--k", "many"],
        ["conversations"],
        ["conversations", "frob"],
        ["conversations", "show"],
        ["conversations", "show", "ada", "--format", "yaml"],
        ["rag", "frob"],
        ["run"],
        ["nonsense"],
    ],
)
def test_a_bad_command_line_is_one_line_and_exit_2(argv, capsys):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    line = _one_line_error(err)
    assert line.startswith("lokal") and ": error: " in line


def _a_conversation(name: str, tmp_path: Path, capsys) -> None:
    config = tmp_path / "mock.yaml"
    config.write_text(MOCK_PROFILES, encoding="utf-8")
    argv = ["run", "Read the intro", "--model_config", str(config), "--workspace", str(WORKSPACE)]
    assert main([*argv, "--quiet", "--conversation", name]) == 0
    capsys.readouterr()


def test_every_conversations_format_is_honoured(tmp_path, capsys):
    _a_conversation("ada", tmp_path, capsys)
    for action in ("show", "export"):
        assert main(["conversations", action, "ada", "--format", "json"]) == 0
        record = json.loads(capsys.readouterr().out)
        assert record["name"] == "ada" and len(record["runs"]) == 1
        assert main(["conversations", action, "ada", "--format", "markdown"]) == 0
        assert capsys.readouterr().out.startswith("# Conversation ada")
    # the defaults: show is for reading, export for keeping
    assert main(["conversations", "show", "ada"]) == 0
    assert capsys.readouterr().out.startswith("# Conversation ada")
    assert main(["conversations", "export", "ada"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "ada"
    assert main(["conversations", "list", "--format", "markdown"]) == 0
    assert capsys.readouterr().out.startswith("| name |")
    assert main(["conversations", "show", "bob", "--format", "json"]) == 2
    assert "no conversation named 'bob'" in _one_line_error(capsys.readouterr().err)


def test_memory_actions_take_their_own_options(tmp_path, capsys):
    db = str(tmp_path / "notes.db")
    assert main(["memory", "add", "Ada likes tea.", "--db", db]) == 0
    note_id = json.loads(capsys.readouterr().out)["id"]
    assert main(["memory", "select", "What does Ada like?", "--k", "1", "--db", db]) == 0
    capsys.readouterr()
    assert main(["memory", "notes", "--db", db]) == 0
    assert [n["id"] for n in json.loads(capsys.readouterr().out)] == [note_id]
    assert main(["memory", "add", "x", "--k", "1"]) == 2  # --k belongs to select
    _one_line_error(capsys.readouterr().err)


@pytest.mark.parametrize("flag", ["--profile", "--model_name"])
def test_one_profile_flag_with_model_name_as_alias(flag):
    parser = build_parser()
    for argv in (
        ["run", "q", flag, "mock"],
        ["decide", "--messages", "m.json", flag, "mock"],
        ["rag", "ask", "q", flag, "mock"],
    ):
        assert parser.parse_args(argv).model_name == "mock", argv
    assert parser.parse_args(["bfcl", flag, "mock"]).profile == "mock"
    assert parser.parse_args(["bench", flag, "mock"]).profiles == ["mock"]


@pytest.mark.parametrize("flag", ["--profile", "--model_name"])
def test_run_and_decide_take_either_spelling(flag, tmp_path, capsys):
    config = tmp_path / "mock.yaml"
    config.write_text(MOCK_PROFILES, encoding="utf-8")
    argv = ["run", "Read the intro", "--model_config", str(config), flag, "quick"]
    assert main([*argv, "--workspace", str(WORKSPACE), "--quiet", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["answered"] is True
    argv = ["decide", "--messages", str(MESSAGES), "--tools_schema", str(TOOLS)]
    assert main([*argv, "--model_config", str(config), flag, "quick", "--quiet"]) == 0
    assert "role" in json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    "profile_args",
    [
        ["--profile", "mock"],
        ["--model_name", "mock"],
        ["--profiles", "mock"],
        ["--profile", "smollm2-135m-free", "--profile", "smollm2-135m-constrained"],
        ["--profiles", "smollm2-135m-free,smollm2-135m-constrained"],
    ],
)
def test_bench_takes_one_or_several_profiles(profile_args, tmp_path, capsys):
    outdir = tmp_path / "bench"
    argv = ["bench", "--model_config", str(MODEL_CONFIG), *profile_args, "--mode", "mock"]
    assert main([*argv, "--limit", "1", "--outdir", str(outdir)]) == 0
    capsys.readouterr()
    meta = json.loads((outdir / "summary.json").read_text("utf-8"))
    names = [n for value in profile_args[1::2] for n in value.split(",")]
    assert meta["profiles"] == names


def test_commands_are_registered_explicitly_and_do_not_import_the_cli_back():
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a.choices, dict)]
    assert list(commands.choices) == [
        *["decide", "run", "sandbox", "bench", "bfcl", "rag", "mcp", "conversations"],
        *["memory", "serve", "trace", "traces"],
    ]
    src = Path(importlib.import_module("lokal").__file__).parent.parent
    for entry in COMMANDS:
        module, _, function = entry.partition(":")
        assert callable(getattr(importlib.import_module(module), function)), entry
        if module == "lokal.cli":
            continue
        path = src / (module.replace(".", "/") + ".py")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)} | {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        }
        assert "lokal.cli" not in imported, module
