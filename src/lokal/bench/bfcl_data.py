"""BFCL v4 questions and possible answers, read from the installed ``bfcl-eval`` package.

The package is located with ``importlib.util.find_spec`` and its data files are read as
JSON lines; nothing is imported from it (its imports pull heavy extras) and nothing is
downloaded. Install it with ``pip install --no-deps bfcl-eval``.
"""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path
from typing import Any

from lokal.errors import ConfigError

__all__ = [
    "AST_CATEGORIES",
    "EVAL_SAMPLE",
    "FULL_UP_TO",
    "SAMPLE_SEED",
    "SPLITS",
    "bfcl_data_dir",
    "is_development",
    "load_category",
    "load_split",
]

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

# The evaluation protocol (issue 21). In every category the questions at positions that are
# multiples of 5 (0, 5, 10, ...) are the development split: study failures and calibrate on
# those only. The others are the evaluation split, which is reported. An evaluation split of
# at most FULL_UP_TO questions is run whole; a larger one (live_multiple, live_irrelevance)
# by a sample of EVAL_SAMPLE drawn with SAMPLE_SEED, the same on every machine.
SPLITS = ("eval", "dev", "all")
FULL_UP_TO = 400
EVAL_SAMPLE = 200
SAMPLE_SEED = 21


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


def is_development(position: int) -> bool:
    """Whether the question at ``position`` (0-based, in the category's file) is a
    development question."""
    return position % 5 == 0


def load_split(
    category: str,
    split: str = "eval",
    *,
    sample: int | None = EVAL_SAMPLE,
    seed: int = SAMPLE_SEED,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """The questions of ``split`` of one category, in file order, each with its
    ``position``. The evaluation split is sampled (``sample`` questions, ``seed``) when it
    has more than ``FULL_UP_TO``; ``sample=None`` keeps it whole. ``limit`` keeps the first
    questions of what is left (smoke runs)."""
    if split not in SPLITS:
        raise ConfigError(f"unknown split {split!r}; available: {', '.join(SPLITS)}")
    entries = load_category(category)
    for position, entry in enumerate(entries):
        entry["position"] = position
    if split == "dev":
        entries = [e for e in entries if is_development(e["position"])]
    elif split == "eval":
        entries = [e for e in entries if not is_development(e["position"])]
        if sample is not None and len(entries) > FULL_UP_TO:
            chosen = random.Random(f"{seed}:{category}").sample(entries, sample)
            entries = sorted(chosen, key=lambda e: e["position"])
    return entries[:limit] if limit is not None else entries
