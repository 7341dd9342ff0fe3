"""Path confinement: every path a tool touches must stay inside one workspace root.

``Workspace(root).resolve(path)`` turns a model-written path (relative to the root, or
absolute) into an absolute path after following symlinks, and refuses it when the result is
not inside the root: ``..`` escapes, absolute paths elsewhere, and symlinks pointing out of
the workspace are all rejected the same way.
"""

from __future__ import annotations

import os
from pathlib import Path

from lokal.errors import ConfigError, LokalError

__all__ = ["Workspace", "WorkspaceError"]


class WorkspaceError(LokalError, ValueError):
    """A path is outside the workspace, does not exist, or is of the wrong kind."""


class Workspace:
    """A directory that confines the paths given to tools."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        path = Path(root).expanduser()
        if not path.is_dir():
            raise ConfigError(f"workspace root {str(path)!r} is not an existing directory")
        self.root = path.resolve()

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    def resolve(
        self,
        path: str | os.PathLike[str],
        must_exist: bool = True,
        *,
        kind: str | None = None,
    ) -> Path:
        """The absolute, symlink-free path of ``path``; raise WorkspaceError when it escapes.

        ``kind`` may be ``"file"`` or ``"dir"`` to also check what the path is.
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
            raise WorkspaceError(f"no such file or directory: '{shown}' (workspace {self.root})")
        if kind == "file" and resolved.is_dir():
            raise WorkspaceError(f"'{shown}' is a directory, not a file")
        if kind == "file" and resolved.exists() and not resolved.is_file():
            raise WorkspaceError(f"'{shown}' is not a regular file")
        if kind == "dir" and resolved.exists() and not resolved.is_dir():
            raise WorkspaceError(f"'{shown}' is a file, not a directory")
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
            self.resolve(path, must_exist=False)
        except WorkspaceError:
            return False
        return True
