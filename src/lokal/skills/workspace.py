"""Path confinement: every path a tool touches must stay inside one workspace root.

``Workspace(root).resolve(path)`` turns a model-written path (relative to the root, or
absolute) into an absolute path after following symlinks, and refuses it when the result is
not inside the root: ``..`` escapes, absolute paths elsewhere, and symlinks pointing out of
the workspace are all rejected the same way.

**Hard links.** A hard link is a second name of a file, so a name inside the workspace can be a
file that also lives outside it (``/etc/shadow``, another user's notes), and following symlinks
does not show it. A regular file with more than one link (``st_nlink > 1``) is refused, unless
the workspace was made with ``allow_hard_links=True``. ``open_file`` checks the link count of
the file it opened (``fstat``), so the file cannot be swapped between the check and the read.

**Too wide a root.** ``/`` (or a symlink to it) and a folder holding lokal's home
(``lokal.paths.lokal_home()``: conversations, memory, traces) are refused with a ConfigError.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from lokal.errors import ConfigError, LokalError

__all__ = ["Workspace", "WorkspaceError"]


class WorkspaceError(LokalError, ValueError):
    """A path is outside the workspace, does not exist, or is of the wrong kind."""


class Workspace:
    """A directory that confines the paths given to tools."""

    def __init__(self, root: str | os.PathLike[str], *, allow_hard_links: bool = False) -> None:
        path = Path(root).expanduser()
        if not path.is_dir():
            raise ConfigError(f"workspace root {str(path)!r} is not an existing directory")
        self.root = path.resolve()
        self.allow_hard_links = bool(allow_hard_links)
        if self.root == Path(self.root.anchor):
            raise ConfigError(
                f"workspace {str(path)!r} is the root of the file system ({self.root}); the "
                "tools would read every file on this machine: give a project folder"
            )
        from lokal.paths import lokal_home

        home = lokal_home().expanduser().resolve()
        if home.is_relative_to(self.root):
            raise ConfigError(
                f"workspace {str(path)!r} contains lokal's home {home} (conversations, "
                "memory, traces); the tools could read them: give a folder that does not "
                "hold it (or set LOKAL_HOME elsewhere)"
            )

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    def hard_link_problem(self, info: os.stat_result, shown: str) -> str | None:
        """Why a file with this ``stat`` is refused (a hard link), or None."""
        if self.allow_hard_links or not stat.S_ISREG(info.st_mode) or info.st_nlink <= 1:
            return None
        return (
            f"'{shown}' has {info.st_nlink} hard links, so it may be a file from outside the "
            "workspace; files with more than one hard link are refused (a workspace made with "
            "allow_hard_links=True accepts them)"
        )

    def open_file(self, path: str | os.PathLike[str]) -> BinaryIO:
        """``path`` (a regular file in the workspace) opened for reading in binary mode; the
        checks of ``resolve(kind="file")`` and the hard-link rule hold for the file opened."""
        resolved = self.resolve(path, kind="file")
        shown = os.fspath(path) or "."
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        try:
            fd = os.open(resolved, flags)
        except OSError as exc:
            raise WorkspaceError(f"cannot open '{shown}': {exc.strerror}") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise WorkspaceError(f"'{shown}' is not a regular file")
            opened = f"/proc/self/fd/{fd}"
            if os.path.exists(opened) and not Path(os.readlink(opened)).is_relative_to(self.root):
                raise WorkspaceError(f"path '{shown}' is outside the workspace {self.root}")
            problem = self.hard_link_problem(info, shown)
            if problem is not None:
                raise WorkspaceError(problem)
            os.set_blocking(fd, True)
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise

    def _suggest(self, wanted: str, *, limit: int = 3, scan: int = 2000) -> str:
        """Up to ``limit`` workspace files whose name is close to ``wanted``'s (the first
        ``scan`` files, hidden ones left out), as ``'a.txt', 'b/a.txt'``; empty if none."""
        import difflib

        name = Path(wanted).name.casefold()
        if not name:
            return ""
        found: dict[str, str] = {}
        for count, file in enumerate(self.root.rglob("*")):
            if count >= scan:
                break
            relative = file.relative_to(self.root)
            if any(part.startswith(".") for part in relative.parts) or not file.is_file():
                continue
            found.setdefault(file.name.casefold(), relative.as_posix())
        close = difflib.get_close_matches(name, list(found), n=limit, cutoff=0.6)
        return ", ".join(repr(found[c]) for c in close)

    def resolve(
        self,
        path: str | os.PathLike[str],
        must_exist: bool = True,
        *,
        kind: str | None = None,
        links: bool = True,
    ) -> Path:
        """The absolute, symlink-free path of ``path``; raise WorkspaceError when it escapes.

        ``kind`` may be ``"file"`` or ``"dir"`` to also check what the path is. A regular file
        with more than one hard link is refused too, unless the workspace allows them or
        ``links`` is False (only the place is checked, as by ``contains``).
        """
        text = os.fspath(path)
        if not isinstance(text, str):
            text = os.fsdecode(text)
        if "\x00" in text:
            raise WorkspaceError(f"path {text!r} contains a NUL byte")
        shown = text if text else "."
        candidate = Path(text) if os.path.isabs(text) else self.root / text
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError) as exc:  # symlink loops
            raise WorkspaceError(f"path '{shown}' cannot be resolved: {exc}") from None
        if not resolved.is_relative_to(self.root):
            raise WorkspaceError(f"path '{shown}' is outside the workspace {self.root}")
        if must_exist and not resolved.exists():
            hint = self._suggest(text)
            raise WorkspaceError(
                f"no such file or directory: '{shown}' (workspace {self.root})"
                + (f"; did you mean {hint}?" if hint else "")
            )
        if kind == "file" and resolved.is_dir():
            raise WorkspaceError(f"'{shown}' is a directory, not a file")
        if kind == "file" and resolved.exists() and not resolved.is_file():
            raise WorkspaceError(f"'{shown}' is not a regular file")
        if kind == "dir" and resolved.exists() and not resolved.is_dir():
            raise WorkspaceError(f"'{shown}' is a file, not a directory")
        if not self.allow_hard_links and links:
            try:
                info = resolved.stat()
            except OSError:
                info = None
            problem = None if info is None else self.hard_link_problem(info, shown)
            if problem is not None:
                raise WorkspaceError(problem)
        return resolved

    def relative(self, path: str | os.PathLike[str]) -> str:
        """``path`` (inside the workspace) relative to the root, with forward slashes."""
        resolved = Path(path).resolve()
        if not resolved.is_relative_to(self.root):
            raise WorkspaceError(f"path '{path}' is outside the workspace {self.root}")
        relative = resolved.relative_to(self.root).as_posix()
        return relative or "."

    def contains(self, path: str | os.PathLike[str]) -> bool:
        """True when ``path`` resolves inside the workspace (existing or not)."""
        try:
            self.resolve(path, must_exist=False, links=False)
        except WorkspaceError:
            return False
        return True
