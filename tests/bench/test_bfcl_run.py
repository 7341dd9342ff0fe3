"""A short real BFCL run on the bundled model, through the CLI.

The first three questions (``--limit 3``) of all 10 categories on the ``constrained``
pipeline, and the first two ``simple_python`` questions on the other three pipelines (replies
capped at 96 new tokens): 36 decisions, to keep CI time modest on 2 cores (live categories
have 1,000+ token prompts). What is asserted is the run's mechanics (rows, fields, scores,
valid or a labelled error), never how many the 135M model gets right or valid: its greedy
text differs between CPUs (benchmarks/model_mechanisms_quality.py measures the rates).
"""

from __future__ import annotations

import json

import pytest
import yaml

from helpers import MODEL_CONFIG
from lokal.bench.bfcl import PIPELINES
from lokal.bench.bfcl_data import AST_CATEGORIES
from lokal.cli import main
from lokal.records import ERROR_KINDS

pytestmark = pytest.mark.model

FIELDS = (
    "id", "category", "pipeline", "decoded", "raw_text", "valid", "correct", "latency_ms",
    "prompt_tokens", "completion_tokens",
)  # fmt: skip


def _config(tmp_path, max_new_tokens):
    config = yaml.safe_load(MODEL_CONFIG.read_text("utf-8"))
    config["generation"]["max_new_tokens"] = max_new_tokens
    path = tmp_path / "model.yaml"
    path.write_text(yaml.safe_dump(config), "utf-8")
    return path


def _run(tmp_path, name, categories, pipelines, limit, max_new_tokens=96):
    outdir = tmp_path / name
    code = main(
        [
            "bfcl",
            "--model_config", str(_config(tmp_path, max_new_tokens)),
            "--categories", ",".join(categories),
            "--pipelines", ",".join(pipelines),
            "--limit", str(limit),
            "--outdir", str(outdir),
        ]
    )  # fmt: skip
    assert code == 0
    rows = [json.loads(line) for line in (outdir / "results.jsonl").read_text("utf-8").splitlines()]
    scores = json.loads((outdir / "scores.json").read_text("utf-8"))
    assert (outdir / "scores.md").read_text("utf-8").count("\n| ") == len(pipelines) + 1
    assert len(rows) == limit * len(categories) * len(pipelines)
    for row in rows:
        for field in FIELDS:
            assert field in row, field
        assert isinstance(row["decoded"], list)
        for call in row["decoded"]:
            assert isinstance(call, dict) and len(call) == 1
            assert isinstance(next(iter(call.values())), dict)
        assert row["correct"] in (True, False) and row["latency_ms"] > 0
        assert row["valid"] in (True, False)
        # an invalid reply says why: lokal's pipelines with a labelled kind of failure
        if not row["valid"]:
            assert row["error"], row
            if row["pipeline"] != "bfcl-prompt":
                assert row["error"].split(":")[0] in ERROR_KINDS, row
    for pipeline in pipelines:
        entry = scores["pipelines"][pipeline]
        assert entry["description"] == PIPELINES[pipeline]
        assert set(entry["categories"]) == set(categories)
        for cat in entry["categories"].values():
            assert cat["total"] == limit and 0 <= cat["accuracy"] <= 100
    return rows, scores


def test_constrained_pipeline_on_all_categories(tmp_path):
    # the profile's own 256-token cap: a truncated envelope would not be valid JSON
    rows, _ = _run(tmp_path, "constrained", AST_CATEGORIES, ["constrained"], 3, 256)
    # the grammar makes every reply a JSON envelope; an invalid one is labelled (a loop, a
    # copied instruction, a reply cut off at its token budget), checked in _run
    assert all(row["raw_text"].lstrip().startswith("{") for row in rows)
    assert {row["pipeline"] for row in rows} == {"constrained"}


def test_other_pipelines_on_simple_python(tmp_path):
    rows, scores = _run(
        tmp_path,
        "others",
        ["simple_python"],
        ["bfcl-prompt", "prompt_json", "builtin"],
        limit=2,
    )
    assert {row["pipeline"] for row in rows} == {"bfcl-prompt", "prompt_json", "builtin"}
    assert scores["profile"] == "smollm2-135m"
