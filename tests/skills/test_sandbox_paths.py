"""The sandbox's less travelled paths: refused arguments, the kinds of program it runs, how a
workspace is shown, the fallbacks when bwrap or a Python for uid nobody is missing, and the
``isolation`` report (limits, file system, notes)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import lokal.skills.sandbox as sandbox
from lokal.errors import ConfigError
from lokal.skills.sandbox import run_sandboxed, sandbox_capabilities
from lokal.skills.workspace import Workspace

MODES = ["process"] + (["bwrap"] if sandbox_capabilities()["bwrap"] else [])
AS_ROOT = os.geteuid() == 0
LIST_WORKSPACE = "import os; print(sorted(os.listdir('workspace')))"


@pytest.fixture
def linked_workspace(tmp_path: Path) -> Path:
    """A world-readable workspace holding one file under two names (a hard link)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    ws.chmod(0o755)
    (ws / "a.txt").write_text("a\n", encoding="utf-8")
    os.link(ws / "a.txt", ws / "b.txt")
    return ws


# --- refused before anything runs --------------------------------------------------------------


@pytest.mark.parametrize("command", [[], ["python", 1]])
def test_a_command_must_be_a_non_empty_list_of_strings(command) -> None:
    with pytest.raises(ConfigError, match="non-empty list of strings"):
        run_sandboxed(command=command)


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["python", "-u"], "needs a script, -c CODE or -m MODULE"),
        (["python3", "-W", "error", "x.py"], "unsupported python option '-W'"),
    ],
)
def test_python_commands_the_sandbox_cannot_run(command: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        run_sandboxed(command=command, mode="process")


def test_a_workspace_that_is_not_a_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file.txt").write_text("x", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"workspace '.*file\.txt' is not a directory"):
        run_sandboxed("print(1)", mode="process", workspace=tmp_path / "file.txt")
    with pytest.raises(ConfigError, match="is not a directory"):
        run_sandboxed("print(1)", mode="process", workspace=tmp_path / "missing")


def test_without_bwrap_mode_bwrap_is_refused_and_auto_falls_back(monkeypatch) -> None:
    monkeypatch.setattr(sandbox, "_bwrap", lambda: None)
    with pytest.raises(ConfigError, match="bubblewrap"):
        run_sandboxed("print(1)", mode="bwrap")
    result = run_sandboxed("print(1)", mode="auto")
    assert result.status == "ok" and result.stdout == "1\n"
    assert result.isolation["mode"] == "process" and result.isolation["pid_namespace"] is False


# --- what runs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_program_other_than_python_runs_without_the_audit_hook(mode: str) -> None:
    result = run_sandboxed(command=["/bin/echo", "hi", "there"], mode=mode)
    assert result.status == "ok" and result.stdout == "hi there\n"
    assert result.isolation["audit_hook"] is False
    assert run_sandboxed("print(1)", mode=mode).isolation["audit_hook"] is True


@pytest.mark.parametrize("mode", MODES)
def test_python_dash_m_runs_the_module_with_its_arguments(mode: str) -> None:
    result = run_sandboxed(command=["python", "-B", "-m", "json.tool", "--help"], mode=mode)
    assert result.status == "ok", result.stderr
    assert result.stdout.startswith("usage: python -m json.tool")


@pytest.mark.parametrize("mode", MODES)
def test_a_python_script_runs_with_its_arguments(mode: str, tmp_path: Path) -> None:
    skill = tmp_path / "skill"
    (skill / "scripts").mkdir(parents=True)
    (skill / "scripts" / "echo.py").write_text("import sys\nprint(sys.argv)\n", encoding="utf-8")
    result = run_sandboxed(
        command=["python3", "scripts/echo.py", "a", "b"], mode=mode, files_from=skill
    )
    assert result.status == "ok", result.stderr
    assert result.stdout == "['scripts/echo.py', 'a', 'b']\n"


# --- how the workspace is shown ----------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_allowed_hard_links_are_bind_mounted_where_bwrap_can(mode: str, linked_workspace) -> None:
    for workspace, allow in (
        (linked_workspace, True),
        (Workspace(linked_workspace, allow_hard_links=True), False),
    ):
        result = run_sandboxed(
            LIST_WORKSPACE, mode=mode, workspace=workspace, allow_hard_links=allow
        )
        assert result.status == "ok" and result.stdout == "['a.txt', 'b.txt']\n"
        shown = "bind mount" if mode == "bwrap" else "copy"
        assert result.isolation["workspace"] == f"read-only {shown} at ./workspace"
        assert not any("hard link" in n for n in result.isolation["notes"])
    refused = run_sandboxed(LIST_WORKSPACE, mode=mode, workspace=Workspace(linked_workspace))
    assert refused.stdout == "[]\n"
    assert refused.isolation["workspace"] == "read-only copy at ./workspace"
    assert any("2 file(s) with more than one hard link" in n for n in refused.isolation["notes"])


@pytest.mark.skipif(not AS_ROOT, reason="uid nobody is used only when started as root")
@pytest.mark.skipif("bwrap" not in MODES, reason="bubblewrap cannot create namespaces here")
def test_a_workspace_nobody_cannot_read_is_copied_even_with_hard_links_allowed(tmp_path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (private / "p.txt").write_text("p", encoding="utf-8")
    result = run_sandboxed(LIST_WORKSPACE, mode="bwrap", workspace=private, allow_hard_links=True)
    assert result.status == "ok" and result.stdout == "['p.txt']\n"
    assert result.isolation["workspace"] == "read-only copy at ./workspace"


# --- the isolation report ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_the_isolation_reports_the_limits(mode: str) -> None:
    asked = {"memory_mb": 256, "max_file_mb": 2, "max_processes": 9}
    result = run_sandboxed("print(1)", mode=mode, timeout=2.5, **asked)
    expected = {"cpu_seconds": 4, "memory_mb": 256, "file_mb": 2, "processes": 9}
    assert result.isolation["rlimits"] == expected  # the timeout rounded up, plus one
    result = run_sandboxed("print(1)", mode=mode, timeout=2.5, cpu_seconds=7, **asked)
    assert result.isolation["rlimits"] == {**expected, "cpu_seconds": 7}


@pytest.mark.parametrize("hook", [True, False])
def test_process_mode_describes_what_guards_the_file_system(hook: bool) -> None:
    result = run_sandboxed("print(1)", mode="process", audit_hook=hook)
    nobody = " of uid nobody" if AS_ROOT else ""
    audit = " and the audit hook" if hook else ""
    expected = f"host file system, guarded by file permissions{nobody}{audit}"
    assert result.isolation["filesystem"] == expected
    assert result.isolation["mount_namespace"] is False


@pytest.mark.skipif("bwrap" not in MODES, reason="bubblewrap cannot create namespaces here")
def test_bwrap_mode_describes_its_mount_namespace() -> None:
    result = run_sandboxed("print(1)", mode="bwrap", audit_hook=False)
    assert result.isolation["filesystem"].startswith("bwrap: only /usr, the Python installation")
    assert result.isolation["mount_namespace"] and result.isolation["pid_namespace"]
    assert result.isolation["network_namespace"] is True


@pytest.mark.skipif(not AS_ROOT, reason="uid nobody is used only when started as root")
def test_without_a_python_for_nobody_process_mode_runs_as_root_and_says_so(monkeypatch) -> None:
    monkeypatch.setattr(sandbox, "_python_for", lambda uid, gid: None)
    result = run_sandboxed("import os; print(os.getuid())", mode="process")
    assert result.status == "ok" and result.stdout == "0\n"
    assert result.isolation["uid"] == 0
    assert result.isolation["notes"] == [
        "no Python interpreter is usable by uid nobody: running as root"
    ]
    assert " of uid nobody" not in result.isolation["filesystem"]


def test_a_caller_that_is_not_root_is_told_the_code_keeps_its_uid(monkeypatch) -> None:
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)  # what the sandbox sees
    result = run_sandboxed("print(1)", mode="process")
    assert result.status == "ok"
    assert result.isolation["notes"] == [
        "not started as root: the code runs under the caller's uid"
    ]
    assert result.isolation["uid"] == os.getuid()  # as the launcher reports it
    assert " of uid nobody" not in result.isolation["filesystem"]
