"""The sandbox: normal runs, errors, and attempts to escape or exhaust resources.

Every isolation test runs in each mode available here (``process`` always, ``bwrap`` when
bubblewrap works) and, where the kernel layers alone should hold, also without the audit hook.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import REPO
from lokal.errors import ConfigError
from lokal.skills.sandbox import run_sandboxed, sandbox_capabilities, sandbox_main

ROOT = REPO
WEATHER = ROOT / "data" / "skills" / "weather-forecast"
WORKSPACE = ROOT / "data" / "workspace"
CAPS = sandbox_capabilities()
MODES = ["process"] + (["bwrap"] if CAPS["bwrap"] else [])
AS_ROOT = os.geteuid() == 0
# (mode, audit_hook) pairs for which a given guarantee must hold.
ALL = [(m, h) for m in MODES for h in (True, False)]
# World-readable/-writable places outside the sandbox are hidden only by bwrap's mount
# namespace or, in process mode, by the audit hook (file permissions allow them).
HIDDEN = [(m, h) for m, h in ALL if m == "bwrap" or h]


@pytest.fixture
def public_dir() -> Iterator[Path]:
    """A world-writable directory that uid nobody could reach on the host (like /tmp)."""
    path = Path(tempfile.mkdtemp(prefix="lokal-test-public-"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _private_secret(tmp_path: Path) -> tuple[Path, str]:
    secret = f"TOP-SECRET-{uuid.uuid4().hex}"
    directory = tmp_path / "vault"
    directory.mkdir(mode=0o700)
    target = directory / "secret.txt"
    target.write_text(secret)
    target.chmod(0o600)
    return target, secret


# --- normal behaviour --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_normal_run(mode: str) -> None:
    result = run_sandboxed("print('hello', 6 * 7)", mode=mode)
    assert result.status == "ok" and result.exit_code == 0
    assert result.stdout == "hello 42\n" and result.stderr == ""
    assert result.limit is None
    assert result.isolation["mode"] == mode
    assert result.isolation["network_namespace"] is True
    assert result.isolation["audit_hook"] is True
    if AS_ROOT:
        assert result.isolation["uid"] == 65534
    data = result.to_dict()
    assert set(data) >= {"status", "exit_code", "stdout", "stderr", "limit", "isolation"}


@pytest.mark.parametrize("mode", MODES)
def test_code_runs_as_unprivileged_user_in_a_fresh_temp_dir(mode: str) -> None:
    code = "import os, json; print(json.dumps([os.getuid(), os.getcwd(), sorted(os.listdir())]))"
    result = run_sandboxed(code, mode=mode, files_from=WEATHER)
    uid, cwd, listing = json.loads(result.stdout)
    if AS_ROOT:
        assert uid == 65534
    assert Path(cwd).name.startswith("lokal-sbx-")
    assert listing == ["SKILL.md", "data", "scripts"]
    assert not Path(cwd).exists()  # the temp dir is removed afterwards


def test_environment_is_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOKAL_TEST_TOKEN", "hunter2")
    result = run_sandboxed("import os, json; print(json.dumps(dict(os.environ)))")
    env = json.loads(result.stdout)
    assert "LOKAL_TEST_TOKEN" not in env
    assert set(env) <= {
        "PATH",
        "LANG",
        "HOME",
        "TMPDIR",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONIOENCODING",
        "OPENBLAS_NUM_THREADS",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "LC_CTYPE",  # Python's locale coercion may add it
        "PWD",  # bwrap --chdir sets it
    }


@pytest.mark.parametrize("mode", MODES)
def test_exception_gives_error_and_traceback(mode: str) -> None:
    code = "def explode():\n    raise ValueError('boom')\n\nexplode()\n"
    result = run_sandboxed(code, mode=mode)
    assert result.status == "error" and result.exit_code != 0
    assert result.limit is None
    assert "Traceback (most recent call last)" in result.stderr
    assert 'File "<code>", line 2, in explode' in result.stderr
    assert "raise ValueError('boom')" in result.stderr
    assert result.stderr.rstrip().endswith("ValueError: boom")


@pytest.mark.parametrize("mode", MODES)
def test_skill_script_with_arguments(mode: str) -> None:
    result = run_sandboxed(
        command=["python", "scripts/weather_helper.py", "current", "--location", "Beijing"],
        files_from=WEATHER,
        mode=mode,
    )
    assert result.status == "ok", result.stderr
    expected = json.loads((WEATHER / "data" / "weather.json").read_text())["cities"]["Beijing"]
    data = json.loads(result.stdout)
    assert data["location"] == "Beijing"
    assert data["temperature_c"] == expected["current"]["temperature_c"]
    failed = run_sandboxed(
        command=["python3", "scripts/weather_helper.py", "current", "--location", "Atlantis"],
        files_from=WEATHER,
        mode=mode,
    )
    assert failed.status == "error" and failed.exit_code == 2
    assert "unknown location 'Atlantis'" in failed.stderr


@pytest.mark.parametrize("mode", MODES)
def test_workspace_is_visible_read_only(mode: str) -> None:
    code = (
        "print(open('workspace/docs/agent_intro.txt', encoding='utf-8').read()[:40])\n"
        "open('workspace/notes.txt', 'a').write('tampered')\n"
    )
    before = (WORKSPACE / "notes.txt").read_bytes()
    result = run_sandboxed(code, mode=mode, workspace=WORKSPACE)
    assert result.stdout.startswith("Agent")
    assert result.status == "error" and "PermissionError" in result.stderr
    assert (WORKSPACE / "notes.txt").read_bytes() == before
    assert result.isolation["workspace"].startswith("read-only")


def test_argument_errors() -> None:
    with pytest.raises(ConfigError, match="exactly one"):
        run_sandboxed("print(1)", command=["python", "-c", "print(1)"])
    with pytest.raises(ConfigError, match="exactly one"):
        run_sandboxed()
    with pytest.raises(ConfigError, match="unknown sandbox mode"):
        run_sandboxed("1", mode="docker")  # type: ignore[arg-type]


def test_python_dash_c_command() -> None:
    result = run_sandboxed(command=["python", "-c", "import sys; print(sys.argv[1:])", "a", "b"])
    assert result.status == "ok" and result.stdout == "['a', 'b']\n"


# --- escapes --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "hook"), ALL)
def test_cannot_read_private_file_outside(mode: str, hook: bool, tmp_path: Path) -> None:
    target, secret = _private_secret(tmp_path)
    result = run_sandboxed(f"print(open({str(target)!r}).read())", mode=mode, audit_hook=hook)
    assert result.status == "error"
    assert secret not in result.stdout + result.stderr
    assert "PermissionError" in result.stderr or "FileNotFoundError" in result.stderr


@pytest.mark.parametrize(("mode", "hook"), HIDDEN)
def test_cannot_read_world_readable_file_outside(mode: str, hook: bool, public_dir: Path) -> None:
    secret = f"PUBLIC-BUT-HIDDEN-{uuid.uuid4().hex}"
    target = public_dir / "data.txt"
    target.write_text(secret)
    target.chmod(0o644)
    result = run_sandboxed(f"print(open({str(target)!r}).read())", mode=mode, audit_hook=hook)
    assert result.status == "error"
    assert secret not in result.stdout


@pytest.mark.parametrize(("mode", "hook"), HIDDEN)
def test_cannot_write_outside(mode: str, hook: bool, public_dir: Path) -> None:
    target = public_dir / "pwned.txt"
    result = run_sandboxed(f"open({str(target)!r}, 'w').write('pwned')", mode=mode, audit_hook=hook)
    assert result.status == "error"
    assert not target.exists()


@pytest.mark.parametrize(("mode", "hook"), ALL)
def test_cannot_write_into_root_owned_dir(mode: str, hook: bool, tmp_path: Path) -> None:
    directory = tmp_path / "protected"
    directory.mkdir(mode=0o755)
    target = directory / "pwned.txt"
    result = run_sandboxed(f"open({str(target)!r}, 'w').write('pwned')", mode=mode, audit_hook=hook)
    assert result.status == "error"
    assert not target.exists()


@pytest.mark.parametrize(("mode", "hook"), ALL)
def test_cannot_connect_to_loopback_listener(mode: str, hook: bool) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(5)
        port = server.getsockname()[1]
        code = (
            "import socket\n"
            f"s = socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
            "s.sendall(b'leak')\n"
            "print('connected')\n"
        )
        result = run_sandboxed(code, mode=mode, audit_hook=hook)
        server.settimeout(0.3)
        with pytest.raises(TimeoutError):
            server.accept()  # nobody ever connected
    assert result.status == "error"
    assert "connected" not in result.stdout
    assert any(
        marker in result.stderr
        for marker in ("PermissionError", "Network is unreachable", "Connection refused")
    )


def _lingering(marker: str) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as handle:
                    if marker.encode() in handle.read():
                        found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("mode", MODES)
def test_fork_bomb_is_contained(mode: str) -> None:
    marker = f"forkbomb-{uuid.uuid4().hex}"
    result = run_sandboxed(
        command=["python", "-c", "import os\nwhile True:\n    os.fork()\n", marker],
        mode=mode,
        max_processes=16,
        timeout=5,
    )
    assert result.status in ("limit", "error")
    assert result.limit == "processes"
    assert _lingering(marker) == []
    # The host is fine: it can still start processes, and so can the sandbox.
    assert subprocess.run(["true"], check=False).returncode == 0
    again = run_sandboxed("print('still fine')", mode=mode)
    assert again.status == "ok" and again.stdout == "still fine\n"


@pytest.mark.slow  # spins until the 1 s timeout
@pytest.mark.parametrize("mode", MODES)
def test_infinite_loop_times_out(mode: str) -> None:
    result = run_sandboxed("while True:\n    pass\n", mode=mode, timeout=1)
    assert result.status == "timeout" and result.limit == "timeout"
    assert result.exit_code != 0


@pytest.mark.slow  # spins until the 1 s CPU limit
@pytest.mark.parametrize("mode", MODES)
def test_cpu_limit(mode: str) -> None:
    result = run_sandboxed("while True:\n    pass\n", mode=mode, timeout=20, cpu_seconds=1)
    assert result.status == "limit" and result.limit == "cpu"


@pytest.mark.parametrize("mode", MODES)
def test_allocating_10_gb_hits_memory_limit(mode: str) -> None:
    result = run_sandboxed("block = bytearray(10 * 1024 ** 3)\nprint('allocated')", mode=mode)
    assert result.status in ("limit", "error")
    assert result.limit == "memory"
    assert "allocated" not in result.stdout
    assert "MemoryError" in result.stderr


@pytest.mark.parametrize("mode", MODES)
def test_printing_100_mb_is_capped(mode: str) -> None:
    code = "import sys\nfor _ in range(100):\n    sys.stdout.write('x' * 1_000_000)\n"
    result = run_sandboxed(code, mode=mode, max_output_bytes=64_000, timeout=20)
    assert result.limit == "output" and result.status == "limit"
    assert 0 < len(result.stdout.encode()) <= 64_000
    assert set(result.stdout) == {"x"}


@pytest.mark.parametrize("mode", MODES)
def test_big_file_hits_file_size_limit(mode: str) -> None:
    code = "open('big.bin', 'wb').write(b'x' * (3 * 1024 * 1024))\n"
    result = run_sandboxed(code, mode=mode, max_file_mb=1)
    assert result.status == "limit" and result.limit == "file_size"


@pytest.mark.parametrize("mode", MODES)
def test_audit_hook_blocks_starting_programs(mode: str) -> None:
    result = run_sandboxed("import subprocess\nsubprocess.run(['id'])\n", mode=mode)
    assert result.status == "error"
    assert "starting the program" in result.stderr


# --- CLI --------------------------------------------------------------------------------------


def test_sandbox_main_prints_one_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "hello.py"
    script.write_text("import os\nprint(sorted(os.listdir('workspace')))\n")
    code = sandbox_main([str(script), "--timeout", "5", "--workspace", str(WORKSPACE)])
    out = capsys.readouterr().out
    data = json.loads(out)
    assert code == 0
    assert data["status"] == "ok" and data["exit_code"] == 0 and data["limit"] is None
    assert data["stdout"] == "['data', 'docs', 'notes.txt']\n"
    assert data["stderr"] == ""


@pytest.mark.slow  # spins until the 1 s timeout
def test_sandbox_main_timeout_and_missing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "loop.py"
    script.write_text("while True:\n    pass\n")
    assert sandbox_main([str(script), "--timeout", "1", "--memory", "256"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "timeout" and data["limit"] == "timeout"
    assert sandbox_main([str(tmp_path / "missing.py")]) == 2
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "error" and "cannot run" in data["stderr"]
