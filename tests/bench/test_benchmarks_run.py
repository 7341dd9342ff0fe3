"""Every script of benchmarks/ runs once, on its cheapest settings, and does its work.

Each script runs as ``lokal`` users run it (``python benchmarks/<script>.py ...``, from the
repository root) in a subprocess with a timeout; the test asserts exit code 0 and lines of its
output that show the work was done (its table header and a row of numbers, its summary line).
Nothing may be written into docs/ (the scripts that update docs/*.md run with ``--no-write``
or without ``--write``) and outputs go to ``tmp_path``. What the bundled model answers differs
between CPUs, so only mechanisms are asserted: exit code, tables, counts that are numbers;
never a rate. A script added to benchmarks/ without an entry in ``SMOKES`` fails
``test_every_benchmark_has_a_smoke_run``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from helpers import REPO

BENCHMARKS = REPO / "benchmarks"
DOCS = REPO / "docs"
HELPER = "_report.py"  # imported by the scripts, not run on its own


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def _lokal(*argv: str) -> None:
    """A ``lokal`` command in a subprocess, from the repository root."""
    done = subprocess.run(
        [sys.executable, "-m", "lokal.cli", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def _bench_outputs(tmp: Path) -> None:
    """Real inputs for bench_tables.py, made on the mock backend (no model): a ``lokal bench``
    run (cases.jsonl) and a ``lokal bfcl`` run (results.jsonl)."""
    _lokal("bench", "--mode", "mock", "--limit", "2", "--outdir", str(tmp / "bench"))
    _lokal(
        *("bfcl", "--profile", "mock", "--categories", "simple_python,irrelevance"),
        *("--pipelines", "prompt_json", "--limit", "1", "--outdir", str(tmp / "bfcl")),
    )


def _run_tasks_out(tmp: Path, stdout: str) -> None:
    rows = _lines(tmp / "tasks.jsonl")
    assert len(rows) == 1
    assert {"id", "pass", "status", "source", "answer", "calls", "seconds"} <= set(rows[0])
    assert isinstance(rows[0]["pass"], bool)


def _calibration_out(tmp: Path, stdout: str) -> None:
    rows = _lines(tmp / "calibration" / "features.jsonl")
    assert len(rows) == 5
    assert all(isinstance(r["lm"], float) and isinstance(r["similarity"], float) for r in rows)
    fit = json.loads((tmp / "calibration" / "fit.json").read_text("utf-8"))
    assert {"stage1", "names", "values", "continue", "recall_at_k"} <= set(fit)


def _calibration_continue_out(tmp: Path, stdout: str) -> None:
    rows = _lines(tmp / "calibration" / "features_continue.jsonl")
    assert len(rows) == 4  # two development questions of each category
    assert {r["id"].rsplit("_", 1)[0] for r in rows} == {"parallel", "simple_python"}
    features = {"lm", "pending", "listed", "later", "cued", "again"}
    assert all(set(r["continue"]) == features for r in rows)
    # BFCL's development split only: positions that are multiples of 5
    assert all(int(r["id"].rsplit("_", 1)[1]) % 5 == 0 for r in rows)
    compared = json.loads((tmp / "calibration" / "continue.json").read_text("utf-8"))
    assert compared["kept"] in ("with_again", "without_again")


def _calibration_stage1_bfcl_out(tmp: Path, stdout: str) -> None:
    rows = _lines(tmp / "calibration" / "features_stage1_bfcl.jsonl")
    # two of lokal's cases, two development questions of each category, two of lokal's
    # development tasks and paraphrases
    sources = ["lokal"] * 2 + ["irrelevance"] * 2 + ["parallel"] * 2 + ["tasks"] * 2
    assert [r["source"] for r in rows] == [*sources, "pairs", "pairs"]
    assert [r["call"] for r in rows[2:6]] == [False, False, True, True]
    assert all(int(r["id"].rsplit("_", 1)[1]) % 5 == 0 for r in rows[2:6])
    keys = {"lm", "similarity", "bm25", "signal", "results", "blocked"}
    assert all(keys <= set(r) for r in rows)
    report = json.loads((tmp / "calibration" / "stage1_bfcl.json").read_text("utf-8"))
    assert report["configured"]["all"][1] == 10
    assert report["kept"] in ("configured", "refit")


def _calibration_names_out(tmp: Path, stdout: str) -> None:
    rows = _lines(tmp / "calibration" / "features_names.jsonl")
    assert len(rows) == 5
    scored = [r for r in rows if r.get("tools")]
    assert scored and all("file" in v for r in scored for v in r["tools"].values())
    compared = json.loads((tmp / "calibration" / "names.json").read_text("utf-8"))
    assert compared["kept"] in ("with_file", "without_file")
    for label in ("with_file", "without_file"):
        assert 0.0 <= compared[label]["out_of_fold"] <= 1.0


def _extra_features_out(tmp: Path, stdout: str) -> None:
    report = json.loads((tmp / "extra.json").read_text("utf-8"))
    features = {"name_words", "param_words", "name_similarity", "first_sentence_similarity"}
    assert set(report) == features
    for got in report.values():
        # the stored rows of BFCL's development split (lokal's own rows left out)
        assert got["of"] == 692 and len(got["fold_picks"]) == 5
        assert got["configured"] <= got["in_sample_best"] <= got["of"]
        assert 0 <= got["out_of_fold"] <= got["of"]


def _parallel_timing(tmp: Path, stdout: str) -> None:
    # two calls that each sleep 200 ms: one after the other cannot take less than 400 ms
    serial = float(re.search(r"serial (\d+\.\d+) s", stdout).group(1))
    assert serial >= 0.39, stdout


def _json_result(*keys: str) -> Callable[[Path, str], None]:
    """The script prints one JSON object: it parses and has ``keys`` (a.b for nested)."""

    def check(tmp: Path, stdout: str) -> None:
        result = json.loads(stdout[stdout.index("{") : stdout.rindex("}") + 1])
        for key in keys:
            value = result
            for part in key.split("."):
                value = value[part]
            assert isinstance(value, int | float), (key, value)

    return check


def _state_kept(*measures: str) -> Callable[[Path, str], None]:
    """The script wrote each measure to ``{tmp}/state.json`` as it went (``--state``), so an
    interrupted run resumes with ``--resume`` instead of starting over."""

    def check(tmp: Path, stdout: str) -> None:
        state = json.loads((tmp / "state.json").read_text(encoding="utf-8"))
        assert set(measures) <= set(state), sorted(state)
        assert all(state[m] for m in measures)

    return check


@dataclass(frozen=True)
class Smoke:
    script: str
    args: tuple[str, ...]  # "{tmp}" stands for the test's tmp_path
    expect: tuple[str, ...]  # regular expressions, each must match a line of stdout
    timeout: float = 120
    setup: Callable[[Path], None] | None = None
    check: Callable[[Path, str], None] | None = None
    env: dict[str, str] = field(default_factory=dict)


MODEL = pytest.mark.model
SLOW = pytest.mark.slow
ONE_THREAD = {"LOKAL_N_THREADS": "1"}

SMOKES = [
    pytest.param(
        Smoke(
            "bench_tables.py",
            ("--bench", "{tmp}/bench", "--bfcl", "{tmp}/bfcl", "--no-write"),
            (
                r"^\| code \| pipeline \| valid % \(n; 95% CI\) \| correct % \(n; 95% CI\) \|",
                r"^\| after \| \w+ \| \d+ \(\d/2; \d+–\d+\) \| \d+ \(\d/2; \d+–\d+\) \| "
                r"\d+\.\d s \| \d+\.\d s \|$",
                r"^\| category \| prompt_json \|$",
                r"^\| simple_python \| \d+ \(\d/1; \d+–\d+\) \|$",
                r"^\| lokal prompt_json, SmolLM2-135M \| \d+\.\d \| - \| - \| \d+\.\d \|$",
            ),
            timeout=60,
            setup=_bench_outputs,
        ),
        id="bench_tables",
        marks=SLOW,
    ),
    pytest.param(
        Smoke(
            "calibrate_extraction.py",
            ("--limit", "2"),
            (
                r"^questions: 2 answerable, 2 unanswerable$",
                r"^closest sentence holds the snippet: \d of 2$",
                r"^fitted threshold: \d\.\d{3} \(in use: \d\.\d+\)$",
                r"^unanswerable: \d pass the relevance threshold \d\.\d+, \d of them reach",
            ),
            timeout=120,
        ),
        id="calibrate_extraction",
        marks=SLOW,
    ),
    pytest.param(
        Smoke(
            "extraction_choice.py",
            ("--limit", "2"),
            (
                r"^questions: 2$",
                r"^closest: \d/2 hold the answer \(95 % \d+%-\d+%\)$",
                r"^likeliest of 4: \d/2 hold the answer",
            ),
            timeout=180,
        ),
        id="extraction_choice",
        marks=SLOW,
    ),
    pytest.param(
        Smoke(
            "calibrate_staged.py",
            ("--limit", "5", "--out", "{tmp}/calibration"),
            (
                r"^collecting evidence on 5 development cases \(smollm2-135m\)$",
                r"^  \S+ +lm=[+-]\d+\.\d\d sim=-?\d\.\d\d$",
                r'^staged: \{"lm_weight": .*"continue_bias": -?\d',
            ),
            timeout=180,
            check=_calibration_out,
            env=ONE_THREAD,
        ),
        id="calibrate_staged",
        marks=MODEL,
    ),
    pytest.param(
        Smoke(
            "calibrate_staged.py",
            ("--names", "--limit", "5", "--out", "{tmp}/calibration"),
            (
                r"^with_file: in-sample \d+\.\d %, out-of-fold \d+\.\d %$",
                r"^without_file: in-sample \d+\.\d %, out-of-fold \d+\.\d %$",
                r'^staged: \{"name_lm_weight": .*"name_file_weight": \d',
            ),
            timeout=180,
            check=_calibration_names_out,
            env=ONE_THREAD,
        ),
        id="calibrate_staged_names",
        marks=MODEL,
    ),
    pytest.param(
        Smoke(
            "calibrate_staged.py",
            (
                "--continue-bfcl",
                "parallel,simple_python",
                "--limit",
                "2",
                "--out",
                "{tmp}/calibration",
            ),
            (
                r"^  parallel_0 +calls=2 \{'lm': -?\d",
                r"^with_again: in-sample \d+\.\d %, out-of-fold \d+\.\d %$",
                r"^without_again: in-sample \d+\.\d %, out-of-fold \d+\.\d %$",
                r'^staged: \{"continue_lm_weight": .*"continue_again_weight": -?\d',
            ),
            timeout=180,
            check=_calibration_continue_out,
            env=ONE_THREAD,
        ),
        id="calibrate_staged_continue",
        marks=MODEL,
    ),
    pytest.param(
        Smoke(
            "calibrate_staged.py",
            (
                "--continue-bfcl",
                "parallel,parallel_multiple,simple_python,multiple,live_simple",
                "--features",
                "data/dev/calibration/continue_bfcl_dev.jsonl",
                "--out",
                "{tmp}/calibration",
            ),
            (
                # with ``again`` (a word that asks again, when values are stated later),
                # every weight refitted: out-of-fold 90.5 -> 92.1 %, but it lost parallel
                # questions on the development run; configs/model.yaml keeps the weights
                # before it and adds ``again`` at 1 (in-sample 92.1 -> 92.9 %,
                # docs/decisions.md). ``later`` and ``cued`` are recomputed with today's
                # candidates (a year or a percentage marks a value: the numbers moved)
                r"^with_again: in-sample 90\.9 %, out-of-fold 91\.7 %$",
                r"^without_again: in-sample 90\.9 %, out-of-fold 90\.5 %$",
                r"^kept: with_again$",
                r'^staged: \{"continue_lm_weight": 0\.151, .*"continue_again_weight": 2\.013, '
                r'.*"cases": 252, "multi_call_cases": 80\}$',
                r"^configured weights \+ again, in-sample by weight: 0: 91\.7 %, 0\.5: 92\.1 %, "
                r"1: 92\.5 %, .*4: 92\.5 %$",
                r"^configured weights \+ again: out-of-fold 91\.7 % \(without: 91\.7 %\), "
                r"weight 1$",
                # what a second call more often buys and costs (the configured bias at +0)
                r"^another call, configured weights, bias moved by: -1: several 66/80, one "
                r"166/172; .*\+0: several 71/80, one 162/172; .*\+2: several 78/80, one 134/172$",
            ),
            timeout=120,
        ),
        id="calibrate_staged_continue_refit",
        marks=MODEL,
    ),
    pytest.param(
        Smoke(
            "calibrate_staged.py",
            (
                "--stage1-bfcl",
                "irrelevance,parallel",
                "--limit",
                "2",
                "--out",
                "{tmp}/calibration",
            ),
            (
                r"^  irrelevance_5 +call=False lm=[+-]\d",
                r"^configured weights: all \d+/10 \(\d+\.\d %\), lokal \d/2 .*BFCL no call \d/2",
                r"^refit against configured: \d better, \d worse "
                r"\(sign test p = \d\.\d\d\); kept: ",
                r"^bias \+1\.5: all \d+/10",
            ),
            timeout=180,
            check=_calibration_stage1_bfcl_out,
            env=ONE_THREAD,
        ),
        id="calibrate_staged_stage1_bfcl",
        marks=MODEL,
    ),
    pytest.param(
        Smoke(
            "calibrate_staged.py",
            (
                "--stage1-bfcl",
                "irrelevance,live_irrelevance,simple_python,multiple,live_simple,parallel,"
                "parallel_multiple,live_multiple,live_relevance",
                "--features",
                "data/dev/calibration/stage1_bfcl_dev.jsonl",
                "--out",
                "{tmp}/calibration",
            ),
            (
                # the answer-or-call weights fitted on lokal's 133 cases, their bias moved by
                # the out-of-fold choice (+0.3), scored on BFCL's whole development split and
                # lokal's end-to-end questions as the decision is made (the filters after
                # stage 1 included; before any result, the similarity of fillable tools); a
                # refit on every row is not better; no further move is chosen on the other
                # folds (docs/decisions.md, stage 1)
                r"^configured weights: all 831/899 \(92\.4 %\), lokal 128/133 \(96\.2 %\), "
                r"lokal tasks 34/34 \(100\.0 %\), lokal pairs 39/40 \(97\.5 %\), "
                r"BFCL call 448/467 \(95\.9 %\), BFCL no call 182/225 \(80\.9 %\)$",
                r"^refit, out-of-fold: all 826/899 \(91\.9 %\), lokal 127/133 \(95\.5 %\), ",
                r"^refit against configured: 4 better, 9 worse \(sign test p = 0\.27\); "
                r"kept: configured$",
                r"^bias moved, chosen on the other folds: out-of-fold 831/899 \(configured "
                r"831/899\); moves chosen \[0\.0, 0\.0, 0\.0, 0\.0, 0\.0\]$",
                r"^bias \+0\.5: all 818/899 \(91\.0 %\), lokal 126/133 \(94\.7 %\), "
                r"lokal tasks 34/34 \(100\.0 %\), lokal pairs 37/40 \(92\.5 %\), ",
            ),
            timeout=120,
        ),
        id="calibrate_staged_stage1_refit",
        marks=MODEL,
    ),
    pytest.param(
        Smoke(
            "calibrate_thresholds.py",
            (),
            (
                r"^## Notes$",
                r"^\*\*Threshold: \d\.\d+\*\* \(`NOTE_MIN_SCORE`\)\.$",
                r"^\*\*Threshold: \d\.\d+\*\* \(`RAG_MIN_SCORE`\)\.$",
                r"^\*\*Threshold: \d\.\d+\*\* \(`CITATION_MIN_OVERLAP`\)\.$",
                r"^\| threshold \| answerable kept \| unanswerable rejected \| precision \|",
                r"^\| 0\.5 \| \d+/\d+ \| \d+/\d+ \| \d\.\d{3} \| \d\.\d{3} \| \d\.\d{3} \|$",
            ),
            timeout=180,
        ),
        id="calibrate_thresholds",
        marks=SLOW,
    ),
    pytest.param(
        Smoke(
            "decision_perf.py",
            ("--repeats", "1", "--questions", "1", "--no-write"),
            (r'^  "overhead": \{$', r'^  "backends": \{$'),
            timeout=420,
            env=ONE_THREAD,
            check=_json_result(
                "overhead.ratio",
                "constrained.ratio_llguidance",
                "constrained.ratio_gbnf",
                "staged.ratio",
                "prefix.ratio",
                "backends.ratio_tokens_per_s",
                "backends.ratio_load",
            ),
        ),
        id="decision_perf",
        marks=MODEL,
    ),
    pytest.param(
        Smoke(
            "decision_time.py",
            ("--lengths", "50", "--tools", "1", "--no-bfcl", "--no-write"),
            (
                r"^\| question \| tools \| decision time \| outcome \| attempts \| scored \| "
                r"capped \|$",
                r"^\| synthetic, \d+ chars \| 1 \| \d+\.\d s \| [^|]+ \| \d+ \| \d+ \| \d+ \|$",
            ),
            timeout=120,
            env=ONE_THREAD,
        ),
        id="decision_time",
        marks=MODEL,
    ),
    pytest.param(
        Smoke(
            "model_mechanisms_quality.py",
            (
                *("--settings", "1:512", "--limit", "1"),
                *("--only", "staged_bench,loop", "--no-write"),
            ),
            (
                r"^(ok  |FAIL) n_threads=1 n_batch=512 staged_bench \S+: ",
                r"^(ok  |FAIL) n_threads=1 n_batch=512 loop go go go: ",
                r"^staged_bench +[01]/1 = +\d+\.\d% \(95% CI \d+-\d+%\)$",
                r"^loop +[01]/1 = +\d+\.\d% \(95% CI \d+-\d+%\)$",
            ),
            timeout=120,
        ),
        id="model_mechanisms_quality",
        marks=MODEL,
    ),
    pytest.param(
        Smoke(
            "parallel_tools.py",
            ("--calls", "2", "--repeats", "1", "--no-write"),
            (r"^parallel \d+\.\d{3} s, serial \d+\.\d{3} s, ratio \d+\.\d{3}$",),
            timeout=60,
            check=_parallel_timing,
        ),
        id="parallel_tools",
    ),
    pytest.param(
        Smoke(
            "prompt_cache.py",
            ("--rounds", "1"),
            (r'^  "ratio_on_vs_off": \d+\.\d+$',),
            timeout=180,
            check=_json_result("off.total_s", "on.total_s", "off.n", "on.n"),
            env=ONE_THREAD,
        ),
        id="prompt_cache",
        marks=MODEL,
    ),
    pytest.param(
        Smoke(
            "embed_backends.py",
            (
                *("--chunks", "20", "--questions", "5", "--repeats", "1"),
                *("--sweep-repeats", "1", "--no-torch", "--no-decisions", "--no-write"),
                *("--state", "{tmp}/state.json"),
            ),
            (
                r"^\| backend \| data/docs \(\d+ chunks, median of 1\) \| ×numpy \| generated "
                r"corpus \([\d,]+ chunks\) \| ×numpy \|$",
                r"^\| onnx \| \d+\.\d \| \d+\.\d\d \| \d+\.\d \| \d+\.\d\d \|$",
                r"^\| onnx-int8 \| 2 worker\(s\), batches of 1 \| \d+\.\d \| \d+ \|$",
                r"^\| numpy \| \d+\.\d\d \| \d+\.\d\d \|$",  # one question, p50 and p95
                r"^\| onnx \| (0\.99\d{4}|1\.000000) \| (0\.99\d{4}|1\.000000) \|$",  # agreement
                r"^\| onnx-int8 \| [01]\.\d{3} \| [01]\.\d{3} \| [\d.]+ \| ",  # retrieval
                r"^\| BM25 alone \| \d+/\d+ \(\d+\.\d%\) \|$",
                r"^\| onnx \| \d+\.\d \| \d+ \| \d+\.\d\d \| \d+% \|$",  # the ceiling
            ),
            timeout=240,
            check=_state_kept("ingest", "sweep", "blas_peak", "latency", "retrieval"),
        ),
        id="embed_backends",
        marks=SLOW,
    ),
    pytest.param(
        Smoke(
            "rag_ingest.py",
            ("--sizes", "100", "--queries", "2", "--no_write"),
            (
                r"^\| chunks \| sqlite-vec ingest \(chunks/s\) \| numpy ingest \(chunks/s\) \|",
                r"^\| 100 \| [\d,]+ \| [\d,]+ \| \d+\.\d\d \| \d+\.\d\d \| \d+\.\dx \| \d+ "
                r"\| \d+% \|$",
                r"^Real pipeline over data/docs \(\d+ chunks, ",
            ),
            timeout=120,
        ),
        id="rag_ingest",
        marks=SLOW,
    ),
    pytest.param(
        Smoke(
            "run_tasks.py",
            ("--tasks", "data/dev/e2e_tasks.json", "--limit", "1", "--out", "{tmp}/tasks.jsonl"),
            (
                r"^(PASS|FAIL) \S+ +\d+\.\ds \[\w+\] ",
                r"^passed [01]/1 \(95% CI \d+-\d+%\)$",
                r"^  source \w+: [01]/1 passed$",
            ),
            timeout=180,
            check=_run_tasks_out,
            env=ONE_THREAD,
        ),
        id="run_tasks",
        marks=MODEL,
    ),
    pytest.param(
        Smoke(
            "selection_recall.py",
            ("--k", "1", "--limit", "1", "--no-write"),
            (
                r"^\| set \| k \| recall, hybrid \(95% CI\) \| recall, BM25 alone \|",
                r"^\| BFCL multiple \| 1 \| \d+\.\d \(\d+–\d+\) \| \d+\.\d \| \d\.\d\d \| 1 \|$",
                r"^\| BFCL live_multiple \| 1 \| \d+\.\d \(\d+–\d+\) \| \d+\.\d \| \d\.\d\d "
                r"\| 1 \|$",
                r"^\| lokal bench \(first expected call\) \| 1 \| \d+\.\d \(\d+–\d+\) \| \d+\.\d "
                r"\| \d\.\d\d \| \d+ \|$",
            ),
            timeout=120,
        ),
        id="selection_recall",
        marks=SLOW,
    ),
    pytest.param(
        Smoke(
            "stage1_extra_features.py",
            ("--out", "{tmp}/extra.json"),
            (r"^name_words +configured \d+/692  best in-sample \d+ at \[.+\]  out-of-fold \d+$",),
            timeout=120,
            check=_extra_features_out,
        ),
        id="stage1_extra_features",
    ),
    pytest.param(
        Smoke(
            "serve_load.py",
            ("--clients", "1", "--requests", "1", "--sequential", "1", "--gen-ms", "1"),
            (r'^  "setup": "scripted backend, 1 ms per generation",$',),
            timeout=60,
            check=_json_result("served_p50_ms", "direct_p50_ms", "throughput_rps"),
        ),
        id="serve_load",
    ),
    pytest.param(
        Smoke(
            "serve_load.py",
            ("--model", "--clients", "1", "--requests", "1", "--sequential", "1"),
            (r'^  "setup": "bundled model \(smollm2-135m, \w+\)",$',),
            timeout=120,
            check=_json_result("served_p50_ms", "direct_p50_ms", "throughput_rps"),
            env=ONE_THREAD,
        ),
        id="serve_load-model",
        marks=MODEL,
    ),
]


def _docs_state() -> tuple[str, dict[str, str]]:
    """``git status --porcelain docs/`` and the hash of every file under docs/ (a file that
    was already modified does not change the status line when written again)."""
    status = subprocess.run(
        ["git", "status", "--porcelain", "docs/"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    hashes = {
        str(path.relative_to(REPO)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(DOCS.rglob("*"))
        if path.is_file()
    }
    return status, hashes


def test_every_benchmark_has_a_smoke_run():
    scripts = {p.name for p in BENCHMARKS.glob("*.py")} - {HELPER}
    covered = {param.values[0].script for param in SMOKES}
    assert scripts - covered == set(), "benchmarks without a smoke run in SMOKES"
    assert covered - scripts == set(), "SMOKES names scripts that are not in benchmarks/"


def test_report_helper_imports(tmp_path):
    spec = importlib.util.spec_from_file_location("_report", BENCHMARKS / HELPER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.DOC == DOCS / "performance.md"
    assert re.fullmatch(r".+, \d+ cores, Python \d+\.\d+\.\d+", module.machine())
    doc = tmp_path / "performance.md"  # never the real one
    module.write_section("smoke", "| a |\n| 1 |", doc=doc)
    module.write_section("smoke", "| a |\n| 2 |", doc=doc)
    text = doc.read_text("utf-8")
    assert text.count("<!-- BEGIN smoke -->") == 1 and "| 2 |" in text and "| 1 |" not in text


@pytest.mark.parametrize("smoke", SMOKES)
def test_benchmark_runs(smoke: Smoke, tmp_path):
    before = _docs_state()
    if smoke.setup is not None:
        smoke.setup(tmp_path)
    args = [a.replace("{tmp}", str(tmp_path)) for a in smoke.args]
    # a smoke run checks that the script works, not llama.cpp's batch settings: a small
    # LOKAL_N_BATCH (set to flush out CPU-dependent model tests) makes prompt_cache.py 15x slower
    env = {k: v for k, v in os.environ.items() if k != "LOKAL_N_BATCH"}
    env = {**env, "OPENBLAS_NUM_THREADS": "1", **smoke.env}
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / smoke.script), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=smoke.timeout,
    )
    report = f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
    assert done.returncode == 0, report
    for pattern in smoke.expect:
        assert re.search(pattern, done.stdout, re.M), f"no line matches {pattern!r}\n{report}"
    if smoke.check is not None:
        smoke.check(tmp_path, done.stdout)
    (status, hashes), (status_before, hashes_before) = _docs_state(), before
    assert status == status_before, "git status --porcelain docs/ changed during the run"
    changed = sorted(
        p for p in hashes.keys() | hashes_before.keys() if hashes.get(p) != hashes_before.get(p)
    )
    assert changed == [], f"the run wrote into docs/: {changed}"


def test_run_tasks_judges_the_arguments_a_task_expects():
    # h_table_group passed with column and group_by swapped: a task can name the arguments
    spec = importlib.util.spec_from_file_location("_run_tasks", BENCHMARKS / "run_tasks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    class Result:  # what judge reads of a RunResult
        trusted, status, source, answer = True, "final", "model", "East 52, South 70"

        def __init__(self, args):
            call = {"name": "table_analyzer", "args": args}
            self.messages = [{"role": "assistant", "content": "", "tool_calls": [call]}]

    task = {
        "id": "t",
        "expect_tools": ["table_analyzer"],
        "expect_args": {"table_analyzer": {"group_by": "Region", "column": "units"}},
        "expect_contains": ["70"],
    }
    right = Result({"path": "data/sales.csv", "group_by": "region", "column": "units"})
    assert module.judge(task, right) == (True, "ok")
    swapped = Result({"path": "data/sales.csv", "group_by": "units", "column": "region"})
    passed, why = module.judge(task, swapped)
    assert not passed and "not called with" in why
    assert module.judge({**task, "expect_args": {}}, swapped)[0]


def test_the_sign_test_weighs_the_cases_two_decisions_disagree_on():
    # calibrate_staged.py keeps a refit of every answer-or-call weight only when it is
    # better beyond chance on the cases where it and the configured weights disagree
    spec = importlib.util.spec_from_file_location("_calibrate", BENCHMARKS / "calibrate_staged.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.sign_test(0, 0) == 1.0
    assert module.sign_test(8, 4) == pytest.approx(0.3877, abs=1e-4)  # 2 * 794 / 4096
    assert module.sign_test(4, 8) == module.sign_test(8, 4)
    assert module.sign_test(10, 0) == pytest.approx(2 / 1024)
    assert module.sign_test(3, 3) == 1.0


def test_the_end_to_end_rows_see_the_tools_lokal_run_has(tmp_path, monkeypatch):
    # the answer-or-call rows of lokal's end-to-end questions are scored on the tools the
    # run offers: built with the skills, they hold the weather skill's tools (scored on the
    # built-in tools alone, "How many days are in a week?" read -0.58 where the run had +0.78)
    monkeypatch.setenv("LOKAL_HOME", str(tmp_path))
    spec = importlib.util.spec_from_file_location("_calibrate", BENCHMARKS / "calibrate_staged.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    root = BENCHMARKS.parent
    tools, system = module.run_tools(
        str(root / "configs" / "model.yaml"),
        str(root / "data" / "workspace"),
        str(root / "data" / "skills"),
    )
    names = {t.name for t in tools}
    assert {"file_reader", "read_skill", "code_execution", "remember"} <= names
    assert {"weather_forecast_current", "weather_forecast_forecast"} <= names
    assert "weather-forecast" in system  # the skills' catalog, as the run's system prompt
    without = module.run_tools(
        str(root / "configs" / "model.yaml"),
        str(root / "data" / "workspace"),
        "",
    )[0]
    assert "read_skill" not in {t.name for t in without}


def test_a_feature_that_tells_the_rows_apart_gains_out_of_fold():
    # stage1_extra_features.py keeps the configured decision unless the grid chosen on the
    # other folds gains on the held-out one: a feature that marks the calls exactly does,
    # one that is the same on every row does not
    spec = importlib.util.spec_from_file_location("_extra", BENCHMARKS / "stage1_extra_features.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    weights = {w: 0.0 for w in module.STAGE1_WEIGHTS} | {"call_bias": -1.0}
    rows = [{"call": i % 3 == 0, "exact": float(i % 3 == 0), "flat": 0.5} for i in range(60)]
    exact = module.out_of_fold(rows, weights, "exact")
    assert exact["configured"] == 40 and exact["out_of_fold"] == 60
    flat = module.out_of_fold(rows, weights, "flat")
    assert flat["out_of_fold"] == flat["configured"] == 40

    # the model's judgement: the Yes-over-No margin, best over the functions; a stand-in
    # backend that says Yes to the function the question names
    class Judge:
        def score(self, request, continuations):
            said = request.messages[-1]["content"]
            fits = "Function: area" in said or "Tool: area" in said
            return [0.0, -2.0] if fits else [-3.0, 0.0]

    functions = [{"name": "bmi", "description": "Body mass index."}, {"name": "area"}]
    judged = module.model_judgements(Judge(), None, "the area of a triangle", functions)
    assert judged == {"model_fits": 2.0, "model_relevant": 2.0}
    assert module.model_judgements(Judge(), None, "x", functions[:1]) == {
        "model_fits": -3.0,
        "model_relevant": -3.0,
    }
    triangle = [{"name": "geometry.triangle_area"}]
    assert module.name_share("Find the area of a triangle", triangle) == 1.0
    assert (
        module.param_share(
            "base 10 and height 5",
            [{"name": "bmi", "parameters": {"required": ["weight", "height"]}}],
        )
        == 0.5
    )
