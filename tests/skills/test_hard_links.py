"""Hard links do not lead out of the workspace, and too wide a workspace is refused (issue 19,
items 2 and 7).

A hard link inside the workspace to a file outside it is a second name of that file: the
workspace refuses regular files with more than one link (``st_nlink > 1``) in file_reader,
local_file_search, table_analyzer and the sandbox's ``./workspace``, unless the workspace is
made with ``allow_hard_links=True``. Symbolic links to the same file were refused already.
``lokal mcp serve`` is covered in tests/mcp/test_mcp_hard_links.py."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from lokal.cli import main
from lokal.errors import ConfigError
from lokal.skills.agent_skills import SkillLibrary, skill_tools
from lokal.skills.builtin import builtin_tools
from lokal.skills.sandbox import run_sandboxed, sandbox_capabilities
from lokal.skills.workspace import Workspace, WorkspaceError
from lokal.tools.registry import ToolRegistry

MODES = ["process"] + (["bwrap"] if sandbox_capabilities()["bwrap"] else [])


@pytest.fixture
def linked(tmp_path: Path) -> tuple[Path, str]:
    """A workspace with ``notes.txt`` (its own file) and ``link.txt``, a hard link to a
    secret outside the workspace (root-only, 0600, in a 0700 folder)."""
    secret = f"TOP-SECRET-{uuid.uuid4().hex}"
    vault = tmp_path / "vault"
    vault.mkdir(mode=0o700)
    outside = vault / "secret.txt"
    outside.write_text(f"{secret}\nneedle\n", encoding="utf-8")
    outside.chmod(0o600)
    ws = tmp_path / "ws"
    ws.mkdir()
    ws.chmod(0o755)
    (ws / "notes.txt").write_text("a needle in the notes\n", encoding="utf-8")
    os.link(outside, ws / "link.txt")
    (ws / "table.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    os.link(ws / "table.csv", vault / "table_copy.csv")  # a table with a second name outside
    assert (ws / "link.txt").stat().st_nlink == 2
    return ws, secret


# --- Workspace and the file tools --------------------------------------------------------------


def test_the_workspace_refuses_a_hard_link_unless_allowed(linked) -> None:
    ws, _ = linked
    space = Workspace(ws)
    with pytest.raises(WorkspaceError, match=r"'link\.txt' has 2 hard links"):
        space.resolve("link.txt")
    with pytest.raises(WorkspaceError, match="hard links"):
        space.open_file("link.txt")
    assert space.contains("link.txt")  # it is in the workspace; it is just not read
    assert space.resolve("notes.txt") == (ws / "notes.txt").resolve()
    allowed = Workspace(ws, allow_hard_links=True)
    assert allowed.resolve("link.txt") == (ws / "link.txt").resolve()
    with allowed.open_file("link.txt") as handle:
        assert b"TOP-SECRET" in handle.read()


def test_file_reader_refuses_a_hard_link(linked) -> None:
    ws, secret = linked
    tools = {t.name: t for t in builtin_tools(ws)}
    with pytest.raises(WorkspaceError, match="hard links"):
        tools["file_reader"](path="link.txt")
    message = ToolRegistry([tools["file_reader"]]).execute(
        {"name": "file_reader", "args": {"path": "link.txt"}}
    )
    assert message["status"] == "error" and "hard links" in message["content"]
    assert secret not in json.dumps(message)
    assert tools["file_reader"](path="notes.txt")["content"] == "a needle in the notes\n"
    allowed = {t.name: t for t in builtin_tools(Workspace(ws, allow_hard_links=True))}
    assert secret in allowed["file_reader"](path="link.txt")["content"]


def test_local_file_search_skips_hard_links_and_says_so(linked) -> None:
    ws, secret = linked
    tools = {t.name: t for t in builtin_tools(ws)}
    out = tools["local_file_search"](query="needle")
    assert [r["path"] for r in out["results"]] == ["notes.txt"]
    assert out["hard_links_skipped"] == 2  # link.txt and table.csv
    assert secret not in json.dumps(out)
    by_name = tools["local_file_search"](query="link")
    assert by_name["results"] == []  # not even found by name
    allowed = {t.name: t for t in builtin_tools(Workspace(ws, allow_hard_links=True))}
    found = allowed["local_file_search"](query="needle")
    assert sorted(r["path"] for r in found["results"]) == ["link.txt", "notes.txt"]
    assert "hard_links_skipped" not in found


def test_table_analyzer_refuses_a_hard_link(linked) -> None:
    pytest.importorskip("pandas")
    ws, _ = linked
    tools = {t.name: t for t in builtin_tools(ws)}
    with pytest.raises(WorkspaceError, match="hard links"):
        tools["table_analyzer"](path="table.csv")
    allowed = {t.name: t for t in builtin_tools(Workspace(ws, allow_hard_links=True))}
    assert allowed["table_analyzer"](path="table.csv")["rows"] == 1


# --- the sandbox -------------------------------------------------------------------------------

_LIST_AND_READ = (
    "import os\n"
    "print(sorted(os.listdir('workspace')))\n"
    "for name in ('notes.txt', 'link.txt'):\n"
    "    try:\n"
    "        print(name, open('workspace/' + name).read())\n"
    "    except OSError as exc:\n"
    "        print(name, type(exc).__name__)\n"
)


@pytest.mark.parametrize("mode", MODES)
def test_the_sandbox_leaves_hard_links_out_of_its_workspace(linked, mode: str) -> None:
    ws, secret = linked
    result = run_sandboxed(_LIST_AND_READ, mode=mode, workspace=ws)
    assert result.status == "ok", result.stderr
    assert secret not in result.stdout + result.stderr
    assert "['notes.txt']" in result.stdout
    assert "notes.txt a needle in the notes" in result.stdout
    assert "link.txt FileNotFoundError" in result.stdout
    assert result.isolation["workspace"] == "read-only copy at ./workspace"
    assert any("2 file(s) with more than one hard link" in n for n in result.isolation["notes"])


@pytest.mark.parametrize("mode", MODES)
def test_code_execution_follows_the_workspace_setting(linked, mode: str, tmp_path: Path) -> None:
    ws, secret = linked
    (tmp_path / "no-skills").mkdir()
    library = SkillLibrary(tmp_path / "no-skills")
    defaults = {"mode": mode}
    code_execution = {
        t.name: t for t in skill_tools(library, Workspace(ws), sandbox_defaults=defaults)
    }["code_execution"]
    out = code_execution(code=_LIST_AND_READ)
    assert out["status"] == "ok" and secret not in out["stdout"]
    assert "link.txt FileNotFoundError" in out["stdout"]
    allowed = Workspace(ws, allow_hard_links=True)
    code_execution = {t.name: t for t in skill_tools(library, allowed, sandbox_defaults=defaults)}[
        "code_execution"
    ]
    out = code_execution(code=_LIST_AND_READ)
    assert "link.txt" in out["stdout"].splitlines()[0]  # listed: the opt-in shows it


def test_lokal_sandbox_command_takes_the_opt_in(linked, tmp_path: Path, capsys) -> None:
    ws, _ = linked
    script = tmp_path / "list.py"
    script.write_text(_LIST_AND_READ, encoding="utf-8")
    base = ["sandbox", str(script), "--workspace", str(ws), "--mode", "process"]
    assert main(base) == 0
    refused = json.loads(capsys.readouterr().out)
    assert "link.txt" not in refused["stdout"].splitlines()[0]
    assert main([*base, "--allow-hard-links"]) == 0
    allowed = json.loads(capsys.readouterr().out)
    assert "link.txt" in allowed["stdout"].splitlines()[0]  # listed: the opt-in shows it


# --- too wide a workspace ----------------------------------------------------------------------


def test_the_root_of_the_file_system_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="root of the file system"):
        Workspace("/")
    to_root = tmp_path / "to-root"
    to_root.symlink_to("/")
    with pytest.raises(ConfigError, match="root of the file system"):
        Workspace(to_root)
    with pytest.raises(ConfigError, match="root of the file system"):
        run_sandboxed("print(1)", workspace="/")


def test_a_folder_holding_lokals_home_is_refused(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "outer" / "lokal-home"
    home.mkdir(parents=True)
    monkeypatch.setenv("LOKAL_HOME", str(home))
    with pytest.raises(ConfigError, match="contains lokal's home"):
        Workspace(tmp_path / "outer")
    with pytest.raises(ConfigError, match="contains lokal's home"):
        Workspace(home)
    (tmp_path / "project").mkdir()
    assert Workspace(tmp_path / "project").root == (tmp_path / "project").resolve()


@pytest.mark.parametrize("make", ["/", "symlink"])
def test_lokal_run_refuses_the_root_as_workspace_before_storing_anything(
    make: str, tmp_path: Path, capsys, isolated_lokal_home: Path
) -> None:
    workspace = "/"
    if make == "symlink":
        (tmp_path / "to-root").symlink_to("/")
        workspace = str(tmp_path / "to-root")
    code = main(["run", "hi", "--workspace", workspace, "--backend", "mock", "--quiet"])
    assert code == 2
    err = capsys.readouterr().err
    assert "root of the file system" in err
    assert len(err.strip().splitlines()) == 1
    assert list(isolated_lokal_home.iterdir()) == []  # nothing stored: no trace, no database
