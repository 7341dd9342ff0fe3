"""Tool preselection recall: is the expected tool among the k tools offered?

    .venv/bin/python benchmarks/selection_recall.py [--k 1,2,3,4,5] [--limit N] [--no-write]

Over BFCL v4 ``multiple`` and ``live_multiple`` (the expected function of the possible
answer) and over lokal bench's cases (``data/bench_cases``, the first expected call, the
tools of ``data/messages/tools_schema_basic.json`` unless a case has its own), for each k:
recall@k with its 95% Wilson interval, the mean number of tools on offer, and the same for
BM25 alone. No model is run: this is the ranking of ``lokal.llm.select`` only. Results are
printed and go to the ``selection_recall`` section of docs/benchmarks.md (unless
``--no-write``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import machine, write_section

from lokal.bench.batch import load_cases
from lokal.bench.bfcl_data import load_category
from lokal.bench.stats import wilson_interval
from lokal.llm.select import ToolSelector
from lokal.tools.schema import tool_specs

ROOT = Path(__file__).resolve().parent.parent


def bfcl_items(category: str, limit: int | None):
    for entry in load_category(category, limit):
        expected = next(iter(entry["ground_truth"][0]))
        yield entry["question"][0], entry["function"], expected


def bench_items():
    default = json.loads((ROOT / "data/messages/tools_schema_basic.json").read_text("utf-8"))
    for case in load_cases(ROOT / "data/bench_cases"):
        calls = case["expect"].get("tool_calls")
        if calls and not any(m.get("role") == "tool" for m in case["messages"]):
            yield case["messages"], case.get("tools") or default, calls[0]["name"]


def measure(items, ks, selector) -> dict:
    """Recall@k for every k from one ranking per question (top k plus the pinned tools)."""
    hits = dict.fromkeys(ks, 0)
    offered = dict.fromkeys(ks, 0)
    total = 0
    for messages, functions, expected in items:
        tools = tool_specs(functions)
        ranking = selector.select(messages, tools, k=None).ranking
        for k in ks:
            chosen = {t.name for t in ranking[:k]} | {t.name for t in ranking if t.pinned}
            hits[k] += expected in chosen
            offered[k] += len(chosen)
        total += 1
    return {
        k: {
            "recall": hits[k] / total,
            "ci95": wilson_interval(hits[k], total),
            "offered": offered[k] / total,
            "n": total,
        }
        for k in ks
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", default="1,2,3,4,5")
    parser.add_argument("--limit", type=int, default=None, help="questions per BFCL category")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    ks = [int(k) for k in args.k.split(",")]
    sets = {
        "BFCL multiple": lambda: bfcl_items("multiple", args.limit),
        "BFCL live_multiple": lambda: bfcl_items("live_multiple", args.limit),
        "lokal bench (first expected call)": bench_items,
    }
    results = {}
    for name, items in sets.items():
        results[name] = {
            "hybrid": measure(items(), ks, ToolSelector()),
            "bm25": measure(items(), ks, ToolSelector(use_embeddings=False)),
        }
        print(name, json.dumps(results[name], default=str), flush=True)
    lines = [
        "| set | k | recall, hybrid (95% CI) | recall, BM25 alone | tools offered (mean) | n |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, by in results.items():
        for k in ks:
            h, b = by["hybrid"][k], by["bm25"][k]
            lines.append(
                f"| {name} | {k} | {100 * h['recall']:.1f} ({100 * h['ci95'][0]:.0f}–"
                f"{100 * h['ci95'][1]:.0f}) | {100 * b['recall']:.1f} | {h['offered']:.2f} | {h['n']} |"
            )
    markdown = f"""
## Tool preselection recall

Command: `.venv/bin/python benchmarks/selection_recall.py --k {args.k}` on {machine()}.
Recall@k: the expected tool is among the tools offered (top k, plus tools named in the
question). Hybrid = BM25 + all-MiniLM-L6-v2 (hubness-corrected), fused by reciprocal rank.
BFCL's `multiple` questions offer 2–4 functions, `live_multiple` up to dozens.

{chr(10).join(lines)}
"""
    print(markdown)
    if not args.no_write:
        write_section("selection_recall", markdown, doc=ROOT / "docs" / "benchmarks.md")


if __name__ == "__main__":
    main()
