"""Tables for docs/benchmarks.md from the outputs of `lokal bench` and `lokal bfcl` runs.

    .venv/bin/python benchmarks/bench_tables.py --bench outputs/bench_after \
        [--bench-before outputs/bench_before] [--bfcl outputs/bfcl20] [--no-write]

Every rate comes with its 95% Wilson interval. Writes the ``bench`` and ``bfcl`` sections of
docs/benchmarks.md (between their markers, unless ``--no-write``) and prints them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section

from lokal.bench.stats import wilson_interval

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"

# BFCL V4 leaderboard rows of sub-1B models (non-live AST / live / relevance / irrelevance),
# from the BFCL leaderboard page, last updated 2026-04-12, as the issue quotes them.
PUBLISHED = [
    ("Qwen3-0.6B (FC)", 71.79, 56.62, 75.0, 80.84),
    ("Hammer2.1-0.5b (FC)", 65.98, 54.63, 68.75, 80.79),
    ("Granite-4.0-350m (FC)", 67.92, 46.11, 81.25, 60.84),
]
NON_LIVE = ("simple_python", "multiple", "parallel", "parallel_multiple")
LIVE = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")


def cell(correct: int, total: int) -> str:
    if not total:
        return "-"
    low, high = wilson_interval(correct, total)
    return f"{100 * correct / total:.0f} ({correct}/{total}; {100 * low:.0f}–{100 * high:.0f})"


def bench_rows(outdir: Path, label: str) -> list[str]:
    records = [json.loads(line) for line in (outdir / "cases.jsonl").read_text().splitlines()]
    groups: dict[str, list[dict]] = {}
    for record in records:
        groups.setdefault(record["mode"], []).append(record)
    rows = []
    for mode, group in groups.items():
        n = len(group)
        valid = sum(r["valid"] for r in group)
        correct = sum(r["correct"] for r in group)
        latency = sorted(r["latency_ms"] for r in group)
        mean = sum(latency) / n / 1000
        p50 = latency[n // 2] / 1000
        rows.append(
            f"| {label} | {mode} | {cell(valid, n)} | {cell(correct, n)} | {mean:.1f} s | "
            f"{p50:.1f} s |"
        )
    return rows


def bench_section(after: Path, before: Path | None) -> str:
    lines = [
        "| code | pipeline | valid % (n; 95% CI) | correct % (n; 95% CI) | latency mean | "
        "latency p50 |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    if before is not None and (before / "cases.jsonl").is_file():
        lines += bench_rows(before, "before (a6f125f)")
    lines += bench_rows(after, "after")
    return "\n".join(lines)


def bfcl_section(outdir: Path) -> str:
    rows = [json.loads(line) for line in (outdir / "results.jsonl").read_text().splitlines()]
    categories = list(dict.fromkeys(r["category"] for r in rows))
    pipelines = list(dict.fromkeys(r["pipeline"] for r in rows))
    table = {}
    for r in rows:
        c = table.setdefault((r["pipeline"], r["category"]), [0, 0])
        c[0] += r["correct"]
        c[1] += 1
    # one row per category, one column per pipeline: % (correct/n; 95% CI)
    head = ["category", *pipelines]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for category in categories:
        cells = [cell(*table.get((p, category), (0, 0))) for p in pipelines]
        lines.append("| " + " | ".join([category, *cells]) + " |")
    # the leaderboard's groups: non-live AST (mean of categories), live AST, relevance,
    # irrelevance, as far as the categories were run
    summary = [
        "| pipeline or model | non-live AST | live AST | relevance | irrelevance |",
        "| --- | --- | --- | --- | --- |",
    ]

    def mean_of(pipeline: str, names: tuple[str, ...]) -> str:
        got = [table[(pipeline, c)] for c in names if (pipeline, c) in table]
        if not got:
            return "-"
        return f"{sum(100 * a / b for a, b in got) / len(got):.1f}"

    def pooled(pipeline: str, names: tuple[str, ...]) -> str:
        got = [table[(pipeline, c)] for c in names if (pipeline, c) in table]
        if not got:
            return "-"
        return f"{100 * sum(a for a, _ in got) / sum(b for _, b in got):.1f}"

    for pipeline in pipelines:
        summary.append(
            f"| lokal {pipeline}, SmolLM2-135M | {mean_of(pipeline, NON_LIVE)} | "
            f"{pooled(pipeline, LIVE)} | {pooled(pipeline, ('live_relevance',))} | "
            f"{pooled(pipeline, ('irrelevance', 'live_irrelevance'))} |"
        )
    for name, *values in PUBLISHED:
        summary.append(f"| {name}, published | " + " | ".join(f"{v:.2f}" for v in values) + " |")
    return "\n".join(lines) + "\n\n" + "\n".join(summary)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=None)
    parser.add_argument("--bench-before", type=Path, default=None)
    parser.add_argument("--bfcl", type=Path, default=None)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    if args.bench:
        text = bench_section(args.bench, args.bench_before)
        print(text)
        if not args.no_write:
            write_section("bench_table", text, doc=DOC)
    if args.bfcl:
        text = bfcl_section(args.bfcl)
        print(text)
        if not args.no_write:
            write_section("bfcl_table", text, doc=DOC)


if __name__ == "__main__":
    main()
