"""Where lokal keeps its state: one home folder, and every default file in it.

The home is ``$LOKAL_HOME`` if set, else the user data directory
(``platformdirs.user_data_dir("lokal")``). In it:

- ``lokal.db``: conversations, runs, messages and notes (``lokal.memory``);
- ``memory/``: global memory, markdown files (``lokal.memory.store``);
- ``embedding_cache.db``: the embeddings of memory's notes;
- ``rag/index.db``: the default document index, with its own ``rag/embedding_cache.db``;
- ``traces/``: one JSON-lines trace per ``lokal run`` (``lokal traces list``);
- ``models/``: the ONNX graphs of the bundled MiniLM, built on this machine from its installed
  weights (``lokal.rag.onnx_minilm``; ``$LOKAL_MODEL_CACHE`` puts them elsewhere).

Every function reads the environment when called (tests set ``LOKAL_HOME`` per test) and
creates nothing: the code that opens a file makes its folder.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "db_path",
    "embedding_cache_path",
    "index_path",
    "lokal_home",
    "memory_dir",
    "model_cache_dir",
    "traces_dir",
]


def lokal_home() -> Path:
    """``$LOKAL_HOME``, else the platform's user data directory for lokal."""
    env = os.environ.get("LOKAL_HOME")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("lokal", appauthor=False))


def db_path() -> Path:
    """The SQLite file of conversations and notes."""
    return lokal_home() / "lokal.db"


def memory_dir() -> Path:
    """The folder of global memory (``*.md``)."""
    return lokal_home() / "memory"


def embedding_cache_path() -> Path:
    """The embedding cache of memory's notes (an index keeps its cache next to itself)."""
    return lokal_home() / "embedding_cache.db"


def index_path() -> Path:
    """The default SQLite document index of ``lokal rag``."""
    return lokal_home() / "rag" / "index.db"


def traces_dir() -> Path:
    """The folder where ``lokal run`` keeps the trace of every run (``lokal traces list``)."""
    return lokal_home() / "traces"


def model_cache_dir() -> Path:
    """Where models derived on this machine are kept: the ONNX graphs of the bundled MiniLM,
    named by a hash of the weights they come from. ``$LOKAL_MODEL_CACHE`` if set (the tests
    share one across their homes), else ``models/`` in the home."""
    env = os.environ.get("LOKAL_MODEL_CACHE")
    if env:
        return Path(env).expanduser()
    return lokal_home() / "models"
