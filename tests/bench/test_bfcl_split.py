"""The BFCL evaluation protocol (issue 21): positions that are multiples of 5 are the
development split, the rest the evaluation split; an evaluation split of more than 400
questions is a fixed-seed sample of 200, the same on every machine."""

import json
from pathlib import Path

import pytest

from helpers import MODEL_CONFIG, REPO
from lokal.bench.bfcl import plan_jobs, run_bfcl, write_scores
from lokal.bench.bfcl_data import (
    AST_CATEGORIES,
    EVAL_SAMPLE,
    FULL_UP_TO,
    is_development,
    load_category,
    load_split,
)
from lokal.config import load_profile
from lokal.errors import ConfigError


@pytest.mark.parametrize("category", AST_CATEGORIES)
def test_the_splits_part_every_category(category):
    everything = load_category(category)
    dev = load_split(category, "dev")
    whole_eval = load_split(category, "eval", sample=None)
    assert {e["id"] for e in dev} | {e["id"] for e in whole_eval} == {e["id"] for e in everything}
    assert not {e["id"] for e in dev} & {e["id"] for e in whole_eval}
    assert all(e["position"] % 5 == 0 for e in dev)
    assert all(e["position"] % 5 for e in whole_eval)
    assert [e["id"] for e in everything[::5]] == [e["id"] for e in dev]
    reported = load_split(category, "eval")
    if len(whole_eval) > FULL_UP_TO:
        assert len(reported) == EVAL_SAMPLE
        assert {e["id"] for e in reported} <= {e["id"] for e in whole_eval}
        positions = [e["position"] for e in reported]
        assert positions == sorted(positions)
    else:
        assert [e["id"] for e in reported] == [e["id"] for e in whole_eval]


def test_the_large_categories_are_sampled_the_same_way_every_time():
    for category in ("live_multiple", "live_irrelevance"):
        first = [e["id"] for e in load_split(category, "eval")]
        assert first == [e["id"] for e in load_split(category, "eval")]
        assert len(first) == EVAL_SAMPLE
        other = [e["id"] for e in load_split(category, "eval", seed=22)]
        assert other != first  # the seed, not the order of the file, chooses


def test_development_positions():
    assert [p for p in range(12) if is_development(p)] == [0, 5, 10]


def test_an_unknown_split_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown split"):
        load_split("simple_python", "test")


def test_a_run_on_the_development_split_records_positions_and_says_which_split(tmp_path):
    def runner(pipeline, entry):
        return {
            "decoded": [],
            "raw_text": "",
            "valid": True,
            "latency_ms": float(entry["position"]),
        }

    profile = load_profile(MODEL_CONFIG)
    rows = run_bfcl(profile, ["irrelevance"], ["staged"], limit=3, runner=runner, split="dev")
    assert [r["position"] for r in rows] == [0, 5, 10]
    scores = write_scores(tmp_path, rows, ["irrelevance"], {"split": "dev", "model": "m"})
    cat = scores["pipelines"]["staged"]["categories"]["irrelevance"]
    assert cat["ci95"][0] <= cat["accuracy"] <= cat["ci95"][1]
    assert cat["longest_id"] == rows[-1]["id"]  # the longest decision is named
    assert "development split" in (tmp_path / "scores.md").read_text()
    jobs = plan_jobs(["live_irrelevance"], ["staged"], None, split="eval")
    assert len(jobs) == EVAL_SAMPLE and not any(is_development(e["position"]) for *_, e in jobs)


def test_lokal_bfcl_reports_the_evaluation_split_by_default(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "bfcl"
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "lokal"),  # the console script make test installs
            "bfcl",
            "--model_config",
            str(REPO / "configs" / "model.yaml"),
            "--profile",
            "mock",
            "--categories",
            "irrelevance",
            "--pipelines",
            "staged",
            "--limit",
            "2",
            "--outdir",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["position"] for r in rows] == [1, 2]
    assert json.loads((out / "scores.json").read_text())["split"] == "eval"


def test_ids_run_only_the_named_questions_of_the_split(tmp_path):
    # the questions a change can move, run before and after it
    jobs = plan_jobs(["irrelevance"], ["staged"], None, split="dev", ids={"irrelevance_10"})
    assert [e["id"] for *_, e in jobs] == ["irrelevance_10"]
    # a question of the other split is not run: named, it is an error before any model
    from lokal.cli import main

    argv = ["bfcl", "--model_config", str(REPO / "configs" / "model.yaml"), "--profile", "mock"]
    argv += ["--categories", "irrelevance", "--pipelines", "staged", "--split", "dev"]
    argv += ["--outdir", str(tmp_path)]
    assert main([*argv, "--ids", "irrelevance_10,irrelevance_11"]) == 2
    assert not (tmp_path / "results.jsonl").exists()
    assert main([*argv, "--ids", "irrelevance_10"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["irrelevance_10"]
    assert json.loads((tmp_path / "scores.json").read_text())["ids"] == ["irrelevance_10"]
