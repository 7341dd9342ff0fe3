"""The `lokal` command line: subcommands are wired and print what they promise."""

import json

import pytest

from lokal.cli import build_parser, main


def test_every_subcommand_has_help():
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # argparse keeps them here
    assert {"decide", "run", "sandbox"} <= set(commands)


def test_lokal_sandbox_prints_one_json_object(tmp_path, capsys):
    script = tmp_path / "hello.py"
    script.write_text("print('hello from the sandbox')\n", encoding="utf-8")
    code = main(["sandbox", str(script), "--timeout", "20"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0
    assert result["status"] == "ok" and result["exit_code"] == 0
    assert result["stdout"].strip() == "hello from the sandbox"
    assert {"status", "exit_code", "stdout", "stderr", "limit"} <= set(result)


def test_lokal_sandbox_reports_a_timeout(tmp_path, capsys):
    script = tmp_path / "loop.py"
    script.write_text("while True:\n    pass\n", encoding="utf-8")
    code = main(["sandbox", str(script), "--timeout", "1"])
    result = json.loads(capsys.readouterr().out)
    assert code == 1
    assert result["status"] in ("timeout", "limit") and result["limit"] in ("timeout", "cpu")


def test_unknown_profile_is_a_clear_cli_error(capsys):
    code = main(["run", "hi", "--model_name", "no-such-profile", "--quiet"])
    assert code == 2
    assert "Available:" in capsys.readouterr().err


@pytest.mark.parametrize("workspace", ["/definitely/not/here"])
def test_missing_workspace_is_a_clear_cli_error(capsys, workspace):
    code = main(["run", "hi", "--model_name", "mock", "--workspace", workspace, "--quiet"])
    assert code == 2
    assert "workspace" in capsys.readouterr().err
