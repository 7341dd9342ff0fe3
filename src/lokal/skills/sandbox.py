"""Run untrusted Python (model-written code, skill scripts) in a confined child process.

``run_sandboxed(code)`` or ``run_sandboxed(command=["python", "scripts/x.py", ...])`` runs the
code in a fresh temporary directory (a copy of ``files_from``, plus the workspace read-only at
``./workspace``: a copy without files that have more than one hard link, unless
``allow_hard_links``) and returns a ``SandboxResult``. docs/sandbox.md states exactly what each mode
isolates:

* ``bwrap`` (bubblewrap works here): new mount, network, PID, IPC and UTS namespaces; only /usr,
  the Python installation, the temp dir and the workspace are visible.
* ``process`` (fallback): new network namespace where the kernel allows it; the host file
  system is guarded by file permissions (of uid ``nobody`` when started as root).
* Both: uid ``nobody`` when root, ``no_new_privs``, rlimits, a new session killed as a whole, a
  scrubbed environment, closed stdin, output capped while read, and a Python audit hook
  (defence in depth only).

A launcher (``_sandbox_child.py``'s ``launch`` role, run with ``-I -S``) applies rlimits, the
network namespace, ``no_new_privs`` and the uid switch in a fresh single-threaded process, then
execs the child; ``preexec_fn`` is avoided because it is unsafe in threaded callers.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import math
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Literal

from lokal.errors import ConfigError
from lokal.skills.workspace import Workspace

__all__ = ["SandboxResult", "run_sandboxed", "sandbox_capabilities", "sandbox_main"]

Mode = Literal["auto", "bwrap", "process"]
_PYTHON_RE = re.compile(r"^python(3(\.\d+)?)?$")
_SKIP_COPY = {"__pycache__", ".git", ".venv", "node_modules", ".mypy_cache", ".pytest_cache"}
MAX_WORKSPACE_COPY_BYTES = 100 * 1024 * 1024
OUTPUT_KILL_FACTOR = 2  # kill the child once a stream has produced twice the cap


@functools.cache
def _child_source() -> str:
    """The text of ``_sandbox_child.py``, passed to child interpreters with ``-c``."""
    return (Path(__file__).with_name("_sandbox_child.py")).read_text(encoding="utf-8")


@dataclasses.dataclass
class SandboxResult:
    """How a sandboxed run ended. ``limit`` names the limit that was hit, if any."""

    status: Literal["ok", "error", "timeout", "limit"]
    exit_code: int | None
    stdout: str
    stderr: str
    limit: str | None = None
    isolation: dict[str, Any] = dataclasses.field(default_factory=dict)
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# --- capability probes (lazy, cached) ----------------------------------------------------------


def _nobody() -> tuple[int, int]:
    """The uid and gid of ``nobody`` (65534 when the system does not say)."""
    try:
        import pwd  # POSIX only; imported here so that lokal.skills imports everywhere

        entry = pwd.getpwnam("nobody")
        return entry.pw_uid, entry.pw_gid
    except (ImportError, KeyError):
        return 65534, 65534


def _host_dirs() -> list[str]:
    """bwrap arguments recreating /bin, /lib… as on the host (symlinks or read-only binds)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for item in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/alternatives"):
        args += ["--ro-bind-try", item, item]
    return args


_BWRAP_NAMESPACES = ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]


@functools.cache
def _bwrap() -> str | None:
    """The bwrap binary when it can create the namespaces we need here, else None."""
    binary = shutil.which("bwrap")
    if binary is None:
        return None
    probe = [binary, *_BWRAP_NAMESPACES, "--die-with-parent", *_host_dirs()]
    probe += ["--proc", "/proc", "--dev", "/dev", "/usr/bin/env", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=20, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return binary if done.returncode == 0 else None


@functools.cache
def _python_for(uid: int, gid: int) -> str | None:
    """A Python interpreter the given uid can start (the current one when possible)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [sys.executable, getattr(sys, "_base_executable", None)]
    candidates += [shutil.which(version), "/usr/bin/python3", "/usr/local/bin/python3"]
    for candidate in dict.fromkeys(c for c in candidates if c and os.path.exists(c)):
        try:
            done = subprocess.run(
                [candidate, "-I", "-S", "-c", "import json, os"],
                user=uid,
                group=gid,
                extra_groups=[],
                capture_output=True,
                timeout=20,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode == 0:
            return candidate
    return None


def sandbox_capabilities() -> dict[str, Any]:
    """What the sandbox can use on this machine (probed once, then cached)."""
    root = os.geteuid() == 0
    uid, gid = _nobody()
    return {
        "bwrap": _bwrap(),
        "root": root,
        "unprivileged_uid": uid if root else None,
        "process_mode_python": _python_for(uid, gid) if root else sys.executable,
        "default_mode": "bwrap" if _bwrap() else "process",
    }


# --- helpers ---------------------------------------------------------------------------------


def _copy_single_link(source: Path, src: str, dst: str) -> str | None:
    """Copy the regular file ``src`` to ``dst`` when the file opened has one link and lies in
    ``source``; else copy nothing and say why (``"hard link"``, ``"other"``). Checked on the
    open file, so a file swapped after the walk is never copied."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)  # a FIFO must not block the copy
    try:
        fd = os.open(src, flags)
    except OSError:
        return "other"
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return "other"
        if info.st_nlink != 1:
            return "hard link"
        opened = f"/proc/self/fd/{fd}"
        if os.path.exists(opened) and not Path(os.readlink(opened)).is_relative_to(source):
            return "other"
        os.set_blocking(fd, True)
        with open(dst, "wb") as out:
            shutil.copyfileobj(handle, out)
    shutil.copystat(src, dst)
    return None


def _copy_tree(
    source: Path, target: Path, *, max_bytes: int | None = None, single_link: bool = False
) -> int:
    """Copy ``source`` into ``target``, skipping caches and symlinks that leave ``source``;
    with ``single_link``, files with more than one hard link are left out too (they may be
    files from outside ``source``). Returns how many such files were left out."""
    source = source.resolve()
    if source.is_file():
        shutil.copy2(source, target / source.name)
        return 0
    total = 0
    left_out = 0

    def copy(src: str, dst: str) -> None:
        nonlocal left_out
        left_out += _copy_single_link(source, src, dst) == "hard link"

    def ignore(directory: str, names: list[str]) -> list[str]:
        nonlocal total, left_out
        skipped = []
        for name in names:
            path = Path(directory) / name
            if name in _SKIP_COPY or (
                path.is_symlink() and not path.resolve().is_relative_to(source)
            ):
                skipped.append(name)
            elif single_link and path.is_file() and path.stat().st_nlink > 1:
                skipped.append(name)
                left_out += 1
            elif path.is_file():
                total += path.stat().st_size
        if max_bytes is not None and total > max_bytes:
            raise ConfigError(
                f"{source} holds more than {max_bytes // (1024 * 1024)} MB; too large to copy "
                "into the sandbox (install bubblewrap to mount it instead)"
            )
        return skipped

    shutil.copytree(
        source,
        target,
        ignore=ignore,
        dirs_exist_ok=True,
        symlinks=False,
        copy_function=copy if single_link else shutil.copy2,
    )
    return left_out


def _chown_tree(root: Path, uid: int, gid: int, skip: Path | None = None) -> None:
    """Give ``root`` and everything in it (but the folder ``skip``) to ``uid``:``gid``."""
    os.chown(root, uid, gid)
    for current, dirs, files in os.walk(root):
        if skip is not None:
            dirs[:] = [d for d in dirs if Path(current, d) != skip]
        for name in dirs + files:
            os.chown(Path(current, name), uid, gid, follow_symlinks=False)


def _make_read_only(root: Path) -> None:
    """Take the write bits off every folder and file under ``root``."""
    for current, _dirs, files in os.walk(root):
        os.chmod(current, 0o555)
        for name in files:
            path = Path(current, name)
            mode = path.stat().st_mode
            path.chmod(0o555 if mode & stat.S_IXUSR else 0o444)


def _task_count(uid: int) -> int:
    """Threads the uid runs now (RLIMIT_NPROC counts them all)."""
    count = 0
    if not os.path.isdir("/proc"):
        return 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry.name}/task"))
    return count


def _reap(workdir: str) -> None:
    """Kill processes left over from a run (started in, or naming, its temp dir)."""
    marker = workdir.encode()
    for _ in range(5 if os.path.isdir("/proc") else 0):
        found = False
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as handle:
                    cmdline = handle.read()
                cwd = os.readlink(f"/proc/{entry.name}/cwd")
            except OSError:
                continue
            if marker in cmdline or cwd == workdir or cwd.startswith(workdir + os.sep):
                found = True
                with contextlib.suppress(OSError):
                    os.kill(int(entry.name), signal.SIGKILL)
        if not found:
            return
        time.sleep(0.05)


def _reader(stream: Any, cap: int, sink: dict[str, Any], overflow: threading.Event) -> None:
    """Read a pipe to EOF keeping ``cap`` bytes; flag overflow past OUTPUT_KILL_FACTOR x cap."""
    chunks: list[bytes] = []
    kept = seen = 0
    fd = stream.fileno()
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        seen += len(data)
        if kept < cap:
            chunks.append(data[: cap - kept])
            kept += len(chunks[-1])
        if seen > cap * OUTPUT_KILL_FACTOR:
            overflow.set()
    sink["data"] = b"".join(chunks)
    sink["truncated"] = seen > cap


def _python_command(command: list[str]) -> tuple[str, str | None, list[str]] | None:
    """``(kind, target, argv)`` for ``python …`` commands, None for other programs."""
    head = command[0]
    if head != sys.executable and not _PYTHON_RE.match(os.path.basename(head)):
        return None
    rest = list(command[1:])
    while rest and rest[0] in {"-u", "-B", "-I", "-E", "-s", "-S", "-O", "-OO", "-q", "-X"}:
        rest.pop(0)
    if not rest:
        raise ConfigError("a python command needs a script, -c CODE or -m MODULE")
    if rest[0] == "-c" and len(rest) > 1:
        return "code", rest[1], ["-c", *rest[2:]]
    if rest[0] == "-m" and len(rest) > 1:
        return "module", rest[1], [rest[1], *rest[2:]]
    if rest[0].startswith("-"):
        raise ConfigError(f"unsupported python option {rest[0]!r} in the sandbox")
    return "script", rest[0], rest


def _limit_from(stderr: str, sig: int | None) -> str | None:
    """The limit a failed run hit, read from its stderr and the signal that ended it."""
    if "MemoryError" in stderr or "Cannot allocate memory" in stderr or "bad_alloc" in stderr:
        return "memory"
    if "File too large" in stderr or sig == signal.SIGXFSZ:
        return "file_size"
    if "can't start new thread" in stderr or (
        "Resource temporarily unavailable" in stderr and ("fork" in stderr or "thread" in stderr)
    ):
        return "processes"
    if sig == signal.SIGXCPU:
        return "cpu"
    return None


# --- the sandbox ------------------------------------------------------------------------------


def run_sandboxed(
    code: str | None = None,
    *,
    command: list[str] | None = None,
    files_from: Path | str | None = None,
    workspace: Path | str | Workspace | None = None,
    timeout: float = 10,
    memory_mb: int = 512,
    cpu_seconds: int | None = None,
    max_file_mb: int = 16,
    max_processes: int = 64,
    max_output_bytes: int = 64_000,
    mode: Mode = "auto",
    audit_hook: bool = True,
    allow_hard_links: bool = False,
) -> SandboxResult:
    """Run Python ``code`` or a ``command`` in the sandbox; see the module docstring.

    ``files_from`` (a skill folder or file) is copied into the fresh working directory;
    ``workspace`` (a folder or a ``Workspace``) appears read-only at ``./workspace``: a copy
    without the files that have more than one hard link (they may be files from outside it),
    unless ``allow_hard_links`` (or the ``Workspace``'s own setting) allows them, when it is
    bind-mounted where bwrap can. ``cpu_seconds`` defaults to the timeout rounded up plus
    one. ``mode`` picks the isolation (``auto``: bwrap when it works here, else process);
    ``audit_hook=False`` leaves out the Python audit hook (tests use it to check the kernel
    layers alone).
    """
    _check_arguments(code, command, mode)
    plan = _plan(mode)
    limits = _Limits(timeout, cpu_seconds, memory_mb, max_file_mb, max_processes, max_output_bytes)
    workdir = tempfile.mkdtemp(prefix="lokal-sbx-")
    started = time.perf_counter()
    try:
        if files_from is not None:
            _copy_tree(Path(files_from), Path(workdir))
        source, ws_mount = _show_workspace(workspace, workdir, plan, allow_hard_links)
        config = _boot_config(workdir, code, command, plan, audit_hook, source is not None)
        if plan.drop is not None:
            _chown_tree(Path(workdir), plan.drop[0], plan.drop[1], skip=Path(workdir, "workspace"))
        child = _child_argv(plan, workdir, source, ws_mount, config)
        outcome, applied = _launch(child, plan, limits, workdir)
        plan.notes += applied.get("errors", [])
        isolation = _isolation(plan, applied, audit_hook, config["kind"], ws_mount, limits)
        return _result(outcome, plan.mode, isolation, time.perf_counter() - started)
    finally:
        _reap(workdir)
        shutil.rmtree(workdir, ignore_errors=True)


def _check_arguments(code: str | None, command: list[str] | None, mode: str) -> None:
    """Refuse (ConfigError) anything but one of code or a command of strings, and unknown modes."""
    if (code is None) == (command is None):
        raise ConfigError("give exactly one of code or command")
    if command is not None and (not command or not all(isinstance(a, str) for a in command)):
        raise ConfigError("command must be a non-empty list of strings")
    if mode not in ("auto", "bwrap", "process"):
        raise ConfigError(f"unknown sandbox mode {mode!r}; use auto, bwrap or process")


@dataclasses.dataclass
class _Plan:
    """How a run is isolated: the mode, the programs, the uid to drop to, notes for the caller
    (added to while the run is prepared)."""

    mode: Literal["bwrap", "process"]
    bwrap: str | None  # the bwrap binary, in bwrap mode
    python: str  # the interpreter that runs the code
    drop: list[int] | None  # [uid, gid] of nobody when started as root
    notes: list[str]


def _plan(mode: Mode) -> _Plan:
    """The isolation ``mode`` gets on this machine; a ConfigError when bwrap is asked for and
    cannot work here."""
    bwrap = _bwrap() if mode in ("auto", "bwrap") else None
    if mode == "bwrap" and bwrap is None:
        raise ConfigError("bubblewrap (bwrap) is not installed or cannot create namespaces here")
    chosen: Literal["bwrap", "process"] = "bwrap" if bwrap else "process"
    root = os.geteuid() == 0
    uid, gid = _nobody()
    plan = _Plan(chosen, bwrap, sys.executable, [uid, gid] if root else None, [])
    if chosen == "process" and root:
        _pick_python_for_nobody(plan, uid, gid)
    if not root:
        plan.notes.append("not started as root: the code runs under the caller's uid")
    return plan


def _pick_python_for_nobody(plan: _Plan, uid: int, gid: int) -> None:
    """Process mode as root: an interpreter uid nobody can start, else stay root (both noted)."""
    usable = _python_for(uid, gid)
    plan.python = usable or sys.executable
    if usable is None:
        plan.drop = None
        plan.notes.append("no Python interpreter is usable by uid nobody: running as root")
    elif plan.python != sys.executable:
        plan.notes.append(
            f"{plan.python} runs the code (the current interpreter is not usable by uid "
            "nobody), so packages of the current environment are not importable"
        )


@dataclasses.dataclass(frozen=True)
class _Limits:
    """The resource limits of a run, as asked for."""

    timeout: float
    cpu_seconds: int | None  # None: the timeout rounded up, plus one
    memory_mb: int
    max_file_mb: int
    max_processes: int
    max_output_bytes: int

    @property
    def cpu(self) -> int:
        """The CPU time limit in seconds."""
        if self.cpu_seconds is not None:
            return self.cpu_seconds
        return math.ceil(self.timeout) + 1

    def rlimits(self, nproc_base: int) -> dict[str, list[int]]:
        """The launcher's rlimits; RLIMIT_NPROC counts the uid's ``nproc_base`` tasks too."""
        cpu = self.cpu
        return {
            "RLIMIT_CORE": [0, 0],
            "RLIMIT_CPU": [cpu, cpu + 1],
            "RLIMIT_AS": [self.memory_mb * 1024 * 1024] * 2,
            "RLIMIT_FSIZE": [self.max_file_mb * 1024 * 1024] * 2,
            "RLIMIT_NPROC": [nproc_base + self.max_processes] * 2,
        }

    def summary(self) -> dict[str, int]:
        """The limits as the result's ``isolation`` reports them."""
        return {
            "cpu_seconds": self.cpu,
            "memory_mb": self.memory_mb,
            "file_mb": self.max_file_mb,
            "processes": self.max_processes,
        }


def _show_workspace(
    workspace: Path | str | Workspace | None, workdir: str, plan: _Plan, allow_hard_links: bool
) -> tuple[Path | None, str | None]:
    """Put ``workspace`` read-only at ``./workspace``: a bind mount where bwrap can and hard
    links are allowed, else a copy; (its resolved path, how it is shown), or (None, None)."""
    if workspace is None:
        return None, None
    if isinstance(workspace, Workspace):
        allow_hard_links = allow_hard_links or workspace.allow_hard_links
        workspace = workspace.root
    source = Path(workspace).resolve()
    if not source.is_dir():
        raise ConfigError(f"workspace {str(workspace)!r} is not a directory")
    Workspace(source)  # refuses / and a folder holding lokal's home
    ws_path = Path(workdir) / "workspace"
    world = source.stat().st_mode & (stat.S_IROTH | stat.S_IXOTH) == 0o5
    if plan.mode == "bwrap" and allow_hard_links and (world or plan.drop is None):
        ws_path.mkdir(exist_ok=True)
        return source, "read-only bind mount at ./workspace"
    left_out = _copy_tree(
        source, ws_path, max_bytes=MAX_WORKSPACE_COPY_BYTES, single_link=not allow_hard_links
    )
    _make_read_only(ws_path)
    if left_out:
        plan.notes.append(
            f"{left_out} file(s) with more than one hard link left out of "
            "./workspace (they may be files from outside it)"
        )
    return source, "read-only copy at ./workspace"


def _boot_config(
    workdir: str,
    code: str | None,
    command: list[str] | None,
    plan: _Plan,
    audit_hook: bool,
    has_workspace: bool,
) -> dict[str, Any]:
    """The config of the child's ``boot`` role: its directory, the uid to drop to (bwrap mode),
    the paths the audit hook allows, and the program to run."""
    ws_path = Path(workdir) / "workspace"
    config: dict[str, Any] = {
        "cwd": workdir,
        "drop": plan.drop if plan.mode == "bwrap" else None,
        "hook": audit_hook,
        "read": ["/usr", workdir, "/dev/null", "/dev/urandom", "/dev/zero", "/etc/localtime"],
        "write": [workdir, "/dev/null"],
        "readonly": [str(ws_path)] if has_workspace else [],
    }
    config.update(_program(Path(workdir), code, command))
    return config


def _program(work: Path, code: str | None, command: list[str] | None) -> dict[str, Any]:
    """What the child runs: ``kind`` (code, module, script or exec), ``target`` and ``argv``."""
    if code is not None:
        return _code_file(work, code, ["<code>"])
    assert command is not None
    parsed = _python_command(command)
    if parsed is None:
        return {"kind": "exec", "argv": command}
    kind, target, argv = parsed
    if kind == "code":
        return _code_file(work, target or "", argv)
    return {"kind": kind, "target": target, "argv": argv}


def _code_file(work: Path, code: str, argv: list[str]) -> dict[str, Any]:
    """Write ``code`` to the file the child runs it from; the config entries naming it."""
    path = work / ".lokal_code.py"
    path.write_text(code, encoding="utf-8")
    return {"kind": "code", "code_file": str(path), "argv": argv}


def _child_argv(
    plan: _Plan, workdir: str, source: Path | None, ws_mount: str | None, config: dict[str, Any]
) -> list[str]:
    """The command line of the child (``boot`` role), inside bwrap in bwrap mode."""
    child = [plan.python, "-I", "-B", "-c", _child_source(), "boot", json.dumps(config)]
    if plan.mode == "bwrap":
        assert plan.bwrap is not None
        child = _bwrap_argv(plan.bwrap, plan.python, workdir, source, ws_mount) + child
    return child


def _environment(python: str, workdir: str) -> dict[str, str]:
    """The scrubbed environment of the sandboxed process."""
    return {
        "PATH": f"{os.path.dirname(python)}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": workdir,
        "TMPDIR": workdir,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONIOENCODING": "utf-8",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def _launch(
    child: list[str], plan: _Plan, limits: _Limits, workdir: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Start the launcher (rlimits, network namespace, no_new_privs, uid switch, then exec of
    ``child``) and supervise it; (the outcome, the layers the launcher reports it applied)."""
    nproc_base = _task_count(plan.drop[0]) if plan.drop else _task_count(os.getuid())
    rlimits = limits.rlimits(nproc_base)
    env = _environment(plan.python, workdir)
    read_fd, write_fd = os.pipe()  # the launcher reports the layers it applied here
    launcher = {
        "rlimits": rlimits,
        "netns": plan.mode == "process",
        "drop": plan.drop if plan.mode == "process" else None,
        "fd": write_fd,
        "argv": child,
    }
    argv = [sys.executable, "-I", "-S", "-B", "-c", _child_source(), "launch"]
    with os.fdopen(read_fd, "rb") as status_pipe:
        try:
            proc = subprocess.Popen(
                [*argv, json.dumps(launcher)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=workdir,
                env=env,
                start_new_session=True,
                pass_fds=(write_fd,),
            )
        finally:
            os.close(write_fd)
        outcome = _supervise(proc, limits.timeout, limits.max_output_bytes, workdir)
        raw_status = status_pipe.read()
    return outcome, _launcher_report(raw_status)


def _launcher_report(raw: bytes) -> dict[str, Any]:
    """The launcher's JSON report (empty when it wrote none or garbage)."""
    try:
        return json.loads(raw or b"{}")
    except json.JSONDecodeError:
        return {}


def _isolation(
    plan: _Plan,
    applied: dict[str, Any],
    audit_hook: bool,
    kind: str,
    ws_mount: str | None,
    limits: _Limits,
) -> dict[str, Any]:
    """What isolated the run, as the result's ``isolation`` tells the caller."""
    bwrap = plan.mode == "bwrap"
    return {
        "mode": plan.mode,
        "network_namespace": bwrap or bool(applied.get("netns")),
        "pid_namespace": bwrap,
        "mount_namespace": bwrap,
        "filesystem": _filesystem(plan, audit_hook),
        "uid": plan.drop[0] if plan.drop else applied.get("uid", os.getuid()),
        "no_new_privs": bool(applied.get("no_new_privs")),
        "audit_hook": audit_hook and kind != "exec",
        "workspace": ws_mount,
        "rlimits": limits.summary(),
        "notes": plan.notes,
    }


def _filesystem(plan: _Plan, audit_hook: bool) -> str:
    """What of the host's file system the code can reach, in words."""
    if plan.mode == "bwrap":
        return (
            "bwrap: only /usr, the Python installation, the temp dir and the workspace are visible"
        )
    return (
        "host file system, guarded by file permissions"
        + (" of uid nobody" if plan.drop else "")
        + (" and the audit hook" if audit_hook else "")
    )


def _bwrap_argv(
    bwrap: str, python: str, workdir: str, workspace: Path | str | None, ws_mount: str | None
) -> list[str]:
    """bwrap's arguments: the namespaces, the host's /usr and Python, the temp dir (writable)
    and the workspace when it is bind-mounted."""
    argv = [bwrap, *_BWRAP_NAMESPACES, "--unshare-cgroup-try", "--die-with-parent"]
    argv += ["--new-session", "--hostname", "sandbox", *_host_dirs()]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    made: set[str] = {"/", "/usr", "/tmp", "/proc", "/dev"}

    def parents(path: str) -> list[str]:
        out = []
        for parent in reversed(Path(path).parents):
            text = str(parent)
            if text not in made:
                made.add(text)
                out += ["--perms", "0755", "--dir", text]
        return out

    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(python)}
    prefixes |= {os.path.realpath(p) for p in list(prefixes)}
    for prefix in sorted(prefixes):
        if prefix.startswith("/usr/") or prefix == "/usr" or not os.path.isdir(prefix):
            continue
        argv += [*parents(prefix), "--ro-bind", prefix, prefix]
    argv += [*parents(workdir), "--bind", workdir, workdir]
    if workspace is not None and ws_mount and ws_mount.startswith("read-only bind"):
        target = str(Path(workdir) / "workspace")
        argv += ["--ro-bind", str(Path(workspace).resolve()), target]
    return [*argv, "--chdir", workdir, "--"]


def _supervise(
    proc: subprocess.Popen[bytes], timeout: float, cap: int, workdir: str
) -> dict[str, Any]:
    """Wait for the child, enforcing the timeout and the output cap; kill its whole group."""
    overflow = threading.Event()
    sinks: list[dict[str, Any]] = [{}, {}]
    readers = [
        threading.Thread(target=_reader, args=(stream, cap, sink, overflow), daemon=True)
        for stream, sink in zip((proc.stdout, proc.stderr), sinks, strict=True)
    ]
    for thread in readers:
        thread.start()
    deadline = time.monotonic() + timeout
    killed: str | None = None
    while proc.poll() is None:
        if overflow.is_set():
            killed = "output"
        elif time.monotonic() >= deadline:
            killed = "timeout"
        if killed:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            break
        overflow.wait(min(0.05, max(0.0, deadline - time.monotonic())))
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)  # stragglers left in the group
    _reap(workdir)
    for thread in readers:
        thread.join(timeout=5)
    for stream in (proc.stdout, proc.stderr):
        with contextlib.suppress(OSError):
            stream.close()  # type: ignore[union-attr]
    if killed is None and overflow.is_set():
        killed = "output"
    return {
        "returncode": proc.returncode,
        "killed": killed,
        "stdout": sinks[0].get("data", b""),
        "stderr": sinks[1].get("data", b""),
        "truncated": bool(sinks[0].get("truncated") or sinks[1].get("truncated")),
    }


def _result(
    outcome: dict[str, Any], mode: str, isolation: dict[str, Any], duration: float
) -> SandboxResult:
    """The ``SandboxResult`` of a supervised run: its status and the limit it hit, if any."""
    stdout = outcome["stdout"].decode("utf-8", errors="replace")
    stderr = outcome["stderr"].decode("utf-8", errors="replace")
    code = outcome["returncode"]
    sig: int | None = None
    if code is not None and code < 0:
        sig = -code
    elif mode == "bwrap" and code is not None and 128 < code < 128 + 65:
        sig = code - 128  # bwrap reports a child killed by a signal as 128 + signal
    evidence = _limit_from(stderr, sig) if code != 0 else None
    if outcome["killed"] == "output":
        status, limit = "limit", "output"
        stderr += f"\n[sandbox: output exceeded {OUTPUT_KILL_FACTOR}x the cap; process killed]"
    elif evidence is not None:
        status, limit = "limit", evidence
    elif outcome["killed"] == "timeout":
        status, limit = "timeout", "timeout"
    elif code == 0:
        status, limit = "ok", ("output" if outcome["truncated"] else None)
    else:
        status, limit = "error", ("output" if outcome["truncated"] else None)
    return SandboxResult(status, code, stdout, stderr, limit, isolation, round(duration, 3))


# --- CLI --------------------------------------------------------------------------------------


def sandbox_main(argv: list[str] | None = None) -> int:
    """``lokal sandbox FILE.py [--timeout S] [--memory MB] [--workspace DIR]
    [--allow-hard-links]``: print one JSON.

    Returns 0 when the run ended with status ``ok``, 1 otherwise, 2 when it could not run.
    """
    parser = argparse.ArgumentParser(
        prog="lokal sandbox", description="Run a Python file in the lokal sandbox."
    )
    parser.add_argument("file", help="the Python file to run")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds (default 10)")
    parser.add_argument("--memory", type=int, default=512, help="address space in MB")
    parser.add_argument("--workspace", help="directory shown read-only at ./workspace")
    parser.add_argument("--mode", choices=["auto", "bwrap", "process"], default="auto")
    parser.add_argument(
        "--allow-hard-links",
        action="store_true",
        help="show workspace files that have more than one hard link (refused by default)",
    )
    args = parser.parse_args(argv)
    failure = {"status": "error", "exit_code": None, "stdout": "", "limit": None}
    try:
        code = Path(args.file).read_text(encoding="utf-8")
        result = run_sandboxed(
            code,
            workspace=args.workspace,
            timeout=args.timeout,
            memory_mb=args.memory,
            mode=args.mode,
            allow_hard_links=args.allow_hard_links,
        )
    except (OSError, UnicodeDecodeError, ConfigError) as exc:
        print(json.dumps({**failure, "stderr": f"cannot run {args.file}: {exc}"}))
        return 2
    print(json.dumps(result.to_dict(), ensure_ascii=False))
    return 0 if result.status == "ok" else 1
