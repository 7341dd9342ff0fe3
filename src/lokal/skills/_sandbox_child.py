"""The child side of the sandbox. Never imported by lokal: ``sandbox.py`` reads this file's text
and runs it with ``python -I … -c SOURCE ROLE CONFIG_JSON``, so the child needs no access to
the lokal installation. It must run on any Python 3.8+ interpreter using the stdlib only.

Roles:

* ``launch`` (trusted, still privileged): set rlimits, unshare the network namespace,
  ``no_new_privs``, switch to the unprivileged uid, report what worked on a pipe, exec argv.
* ``boot`` (inside the sandbox): drop privileges if still root (bwrap mode), install the audit
  hook, then run the user's code, script or module as ``__main__``, or exec another program.
"""

from __future__ import annotations

import json
import os
import sys

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
PR_SET_NO_NEW_PRIVS = 38


def _switch_user(drop: list[int]) -> None:
    os.setgroups([])
    os.setgid(drop[1])
    os.setuid(drop[0])


def launch(cfg: dict) -> None:
    import resource

    status: dict = {"netns": False, "no_new_privs": False, "uid": None, "errors": []}
    os.umask(0o022)
    for name, value in cfg["rlimits"].items():
        try:
            resource.setrlimit(getattr(resource, name), tuple(value))
        except (ValueError, OSError) as exc:
            status["errors"].append(f"{name}: {exc}")
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
    except Exception as exc:  # ctypes can be missing from minimal Pythons
        libc = None
        status["errors"].append(f"ctypes unavailable: {exc}")
    if cfg["netns"] and libc is not None and hasattr(libc, "unshare"):
        flags = CLONE_NEWNET if os.geteuid() == 0 else CLONE_NEWNET | CLONE_NEWUSER
        if libc.unshare(flags) == 0:
            status["netns"] = True
        else:
            reason = os.strerror(ctypes.get_errno())
            status["errors"].append(f"unshare(CLONE_NEWNET) failed: {reason}")
    if (
        libc is not None
        and hasattr(libc, "prctl")
        and libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
    ):
        status["no_new_privs"] = True
    drop = cfg.get("drop")
    if drop and os.getuid() == 0:
        try:
            _switch_user(drop)
        except OSError as exc:
            status["errors"].append(f"cannot switch to uid {drop[0]}: {exc}")
    status["uid"] = os.getuid()
    os.write(cfg["fd"], json.dumps(status).encode())
    os.close(cfg["fd"])
    if drop and os.getuid() != drop[0]:
        sys.stderr.write("sandbox: refusing to run without dropping privileges\n")
        os._exit(125)
    try:
        os.execv(cfg["argv"][0], cfg["argv"])
    except OSError as exc:
        sys.stderr.write(f"sandbox: cannot start {cfg['argv'][0]!r}: {exc}\n")
        os._exit(127)


def _install_hook(cfg: dict) -> None:
    """Refuse file access outside the sandbox, network use and starting programs."""
    real, sep = os.path.realpath, os.sep

    def norm(paths: list) -> tuple:
        return tuple(sorted({real(p) for p in paths if p}))

    own = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    reads = norm(list(cfg["read"]) + own + [p for p in sys.path if p])
    writes = norm(cfg["write"])
    frozen = norm(cfg["readonly"])
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    path_at = {"os.remove": 1, "os.rmdir": 1, "os.mkdir": 2, "os.chmod": 2, "os.chown": 3}
    path_at.update({"os.utime": 3, "os.truncate": None})
    lookups = {"socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr"}
    lookups.add("socket.getnameinfo")
    spawns = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn"}
    spawns.add("pty.spawn")

    def inside(path: str, roots: tuple) -> bool:
        return any(path == r or path.startswith(r.rstrip(sep) + sep) for r in roots)

    def deny(what: str, target: object) -> None:
        raise PermissionError(f"sandbox: {what} {target!r} is not allowed")

    def check(path: object, write: bool, dir_fd: object = None) -> None:
        if path is None or isinstance(path, int):
            return
        text = os.fsdecode(os.fspath(path))  # type: ignore[arg-type]
        if isinstance(dir_fd, int) and not os.path.isabs(text):
            text = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), text)
        resolved = real(text)
        if write and (not inside(resolved, writes) or inside(resolved, frozen)):
            deny("writing", resolved)
        if not write and not inside(resolved, reads + writes):
            deny("reading", resolved)

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = args
            writing = bool((flags or 0) & write_flags) or any(c in (mode or "") for c in "wax+")
            check(path, writing)
        elif event in ("os.listdir", "os.scandir"):
            check("." if args[0] is None else args[0], False)
        elif event in path_at:
            at = path_at[event]
            check(args[0], True, args[at] if at is not None and len(args) > at else None)
        elif event in ("os.rename", "os.link"):
            check(args[0], True, args[2] if len(args) > 2 else None)
            check(args[1], True, args[3] if len(args) > 3 else None)
        elif event == "os.symlink":
            check(args[1], True, args[2] if len(args) > 2 else None)
        elif event in ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"):
            address = args[1] if len(args) > 1 else None
            unix_path = isinstance(address, (str, bytes))  # a tuple: runs on Python 3.8+
            if getattr(args[0], "family", None) == 1 and unix_path:
                check(address, True)  # an AF_UNIX socket file: only inside the sandbox dir
            else:
                deny("network access to", address)
        elif event in lookups:
            deny("network lookup of", args[0] if args else None)
        elif event in spawns:
            deny("starting the program", args[0] if args else None)

    sys.addaudithook(hook)


def _trim(tb: object) -> object:
    """The traceback without the bootstrap's own frames."""
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename  # type: ignore[attr-defined]
        if name != "<string>" and "runpy" not in name:
            break
        tb = tb.tb_next  # type: ignore[attr-defined]
    return tb


def boot(cfg: dict) -> None:
    drop = cfg.get("drop")
    if drop and os.getuid() == 0:
        try:
            _switch_user(drop)
        except OSError as exc:
            sys.stderr.write(f"sandbox: cannot drop privileges: {exc}\n")
            os._exit(125)
    os.chdir(cfg["cwd"])
    kind = cfg["kind"]
    if kind == "exec":
        try:
            os.execvp(cfg["argv"][0], cfg["argv"])
        except OSError as exc:
            sys.stderr.write(f"sandbox: cannot run {cfg['argv'][0]!r}: {exc}\n")
            os._exit(127)
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(encoding="utf-8", errors="backslashreplace")
    source = ""
    if kind == "code":
        with open(cfg["code_file"], encoding="utf-8") as handle:
            source = handle.read()
        os.remove(cfg["code_file"])
    if cfg["hook"]:
        _install_hook(cfg)
    import linecache
    import runpy
    import traceback
    import types

    sys.argv = list(cfg["argv"])
    try:
        if kind == "code":
            linecache.cache["<code>"] = (len(source), None, source.splitlines(True), "<code>")
            sys.path.insert(0, cfg["cwd"])
            module = types.ModuleType("__main__")
            sys.modules["__main__"] = module
            exec(compile(source, "<code>", "exec"), module.__dict__)  # inside the sandbox only
        elif kind == "module":
            sys.path.insert(0, cfg["cwd"])
            runpy.run_module(cfg["target"], run_name="__main__", alter_sys=True)
        else:
            sys.path.insert(0, os.path.dirname(os.path.abspath(cfg["target"])))
            runpy.run_path(cfg["target"], run_name="__main__")
    except SystemExit:
        raise
    except BaseException as exc:
        traceback.print_exception(type(exc), exc, _trim(exc.__traceback__))
        sys.stderr.flush()
        sys.exit(1)


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] in ("launch", "boot"):
    _role, _config = sys.argv[1], json.loads(sys.argv[2])
    del sys.argv[1:]
    if _role == "launch":
        launch(_config)
    else:
        boot(_config)
