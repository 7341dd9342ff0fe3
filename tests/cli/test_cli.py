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


@pytest.mark.slow  # spins until the 1 s timeout
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


@pytest.mark.slow
def test_lokal_run_exit_codes(capsys, tmp_path):
    """0 when the model answered (the mock answers after its tool turn), 1 when the time
    budget ran out first, and the codes are listed in --help."""
    from helpers import DATA
    from lokal.cli.run import exit_code
    from lokal.runtime import RunResult

    workspace = str(DATA / "workspace")
    ok = main(
        ["run", "Read the intro", "--model_name", "mock", "--workspace", workspace, "--quiet"]
    )
    assert ok == 0
    capsys.readouterr()
    late = main(
        [
            *["run", "Read the intro", "--model_name", "mock", "--workspace", workspace],
            *["--quiet", "--time_budget", "1e-9", "--json"],
        ]
    )
    out, err = capsys.readouterr()
    record = json.loads(out)
    assert late == 1
    assert record["status"] == "time_budget" and record["answered"] is False
    # --json carries the exit status and the answer's source; stderr says why, in one line
    assert record["exit_code"] == 1 and record["source"] in ("appended", "none")
    assert f"no trusted answer ({record['source']})" in err and "time budget" in err

    def result(answered, status):
        return RunResult("q", "a", status, "why", [], 1, {}, 0.0, answered=answered)

    assert exit_code(result(True, "repeated_call")) == 0
    extracted = RunResult(
        "q", "a", "final", "why", [], 1, {}, 0.0, answered=False, source="extracted"
    )
    appended = RunResult(
        "q", "a", "final", "why", [], 1, {}, 0.0, answered=False, source="appended"
    )
    assert exit_code(extracted) == 0 and exit_code(appended) == 1
    assert exit_code(result(False, "decision_error")) == 1
    assert exit_code(result(False, "time_budget")) == 1
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "exit codes:" in capsys.readouterr().out
