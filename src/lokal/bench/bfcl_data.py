"""BFCL v4 questions and possible answers, read from the installed ``bfcl-eval`` package.

The package is located with ``importlib.util.find_spec`` and its data files are read as
JSON lines; nothing is imported from it (its imports pull heavy extras) and nothing is
downloaded. Install it with ``pip install --no-deps bfcl-eval``.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from lokal.errors import ConfigError

__all__ = ["AST_CATEGORIES", "bfcl_data_dir", "load_category"]

AST_CATEGORIES = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "live_relevance",
    "live_irrelevance",
)
_INSTALL = "pip install --no-deps bfcl-eval"


def bfcl_data_dir() -> Path:
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"BFCL data needs the bfcl-eval package: {_INSTALL}")
    path = Path(next(iter(spec.submodule_search_locations))) / "data"
    if not path.is_dir():
        raise ConfigError(f"bfcl-eval is installed but has no data folder at {path}")
    return path


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def load_category(category: str, limit: int | None = None) -> list[dict[str, Any]]:
    """The entries of one category, each with ``ground_truth`` merged in when BFCL has it."""
    if category not in AST_CATEGORIES:
        raise ConfigError(
            f"unknown BFCL category {category!r}; available: {', '.join(AST_CATEGORIES)}"
        )
    data = bfcl_data_dir()
    entries = _read_jsonl(data / f"BFCL_v4_{category}.json")
    if limit is not None:
        entries = entries[:limit]
    answers_path = data / "possible_answer" / f"BFCL_v4_{category}.json"
    if answers_path.is_file():
        answers = {a["id"]: a["ground_truth"] for a in _read_jsonl(answers_path)}
        for entry in entries:
            entry["ground_truth"] = answers.get(entry["id"])
    return entries
