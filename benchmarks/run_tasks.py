"""End-to-end tasks through the agent, the way ``lokal run`` does them, with a pass/fail each.

    .venv/bin/python benchmarks/run_tasks.py [--tasks data/dev/e2e_tasks.json] \
        [--profile smollm2-135m] [--workspace data/workspace] [--skills data/skills] \
        [--max_iterations 4] [--limit N] [--out outputs/tasks.jsonl]

A task file is a JSON list of ``{"id", "question", "expect_tools": [names the run must
call], "expect_contains": [texts the answer must contain, case-insensitive]}``, and
optionally ``"expect_args": {tool: {argument: value}}`` (some call of that tool had those
arguments; strings compared case-insensitively). A task passes when the run ended with a
trusted answer (``RunResult.trusted``: source ``model``, ``quoted``, ``forced`` or
``extracted``), called every expected tool (an empty list: no tool at all) with the expected
arguments, and the answer holds every expected text. The summary counts passes by source. Each result line is written
as soon as its task ends; the summary says how many passed, with a 95% Wilson interval.

Tasks that carry a ``pair`` (``data/dev/e2e_pairs.json``: 20 pairs asking the same thing in
different words, some in Chinese) are also reported as paraphrase agreement: how many pairs
got the same first decision (the first reply's tool names, or ``answer``).

``data/dev/e2e_tasks.json`` are development tasks (used while building the staged decisions),
run in a temporary ``LOKAL_HOME`` so that memory notes of earlier runs do not leak in.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 0.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def _has_args(args: dict, expected: dict) -> bool:
    """Every expected argument given, equal (strings case-insensitively)."""

    def same(a, b) -> bool:
        if isinstance(a, str) and isinstance(b, str):
            return a.strip().casefold() == b.strip().casefold()
        return a == b

    return all(key in args and same(args[key], value) for key, value in expected.items())


def judge(task: dict, result) -> tuple[bool, str]:
    """Pass: a trusted answer (source model, quoted, forced or extracted; never appended),
    every expected tool called (none when the list is empty), every expected text held."""
    called = [
        c["name"]
        for m in result.messages
        if m.get("role") == "assistant"
        for c in m.get("tool_calls") or []
    ]
    if not result.trusted:
        return False, f"no trusted answer ({result.status}, source {result.source})"
    wanted = task.get("expect_tools") or []
    if not wanted and called:
        return False, f"called {called}, expected no tool"
    missing = [t for t in wanted if t not in called]
    if missing:
        return False, f"did not call {missing} (called {called})"
    calls = [
        c
        for m in result.messages
        if m.get("role") == "assistant"
        for c in m.get("tool_calls") or []
    ]
    for name, expected in (task.get("expect_args") or {}).items():
        if not any(c["name"] == name and _has_args(c.get("args") or {}, expected) for c in calls):
            made = [c.get("args") for c in calls if c["name"] == name]
            return False, f"{name} not called with {expected} (called with {made})"
    absent = [
        t for t in task.get("expect_contains") or [] if t.casefold() not in result.answer.casefold()
    ]
    if absent:
        return False, f"answer lacks {absent}"
    return True, "ok"


def run_namespace(task: dict, args: argparse.Namespace) -> argparse.Namespace:
    """The options of ``lokal run`` for one task, parsed by lokal's own parser (so that every
    option it has gets its default, as on the command line)."""
    from lokal.cli import build_parser

    argv = ["run", task["question"], "--workspace", args.workspace, "--quiet", "--no-trace"]
    argv += ["--model_config", args.model_config, "--max_iterations", str(args.max_iterations)]
    argv += ["--strategy", args.strategy, "--time_budget", str(args.time_budget)]
    if args.skills:
        argv += ["--skills", args.skills]
    if args.profile:
        argv += ["--model_name", args.profile]
    if args.tool_calling:
        argv += ["--tool_calling", args.tool_calling]
    return build_parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="data/dev/e2e_tasks.json", help="the task file")
    parser.add_argument("--model_config", default="configs/model.yaml", help="model.yaml")
    parser.add_argument("--profile", default=None, help="a profile (default: the default)")
    parser.add_argument("--tool_calling", default=None, help="override the tool-calling mode")
    parser.add_argument("--workspace", default="data/workspace", help="the workspace folder")
    parser.add_argument("--skills", default="data/skills", help="the skills folder ('' none)")
    parser.add_argument("--max_iterations", type=int, default=4, help="steps per run")
    parser.add_argument("--time_budget", type=float, default=600.0, help="seconds per run")
    parser.add_argument("--strategy", default="react", help="react or plan_execute")
    parser.add_argument("--limit", type=int, default=None, help="the first N tasks only")
    parser.add_argument("--out", default="outputs/tasks.jsonl", help="one JSON line per task")
    args = parser.parse_args(argv)
    os.environ["LOKAL_HOME"] = tempfile.mkdtemp(prefix="lokal-tasks-")
    from lokal.bench.pairs import first_decision, pair_agreement
    from lokal.cli.run import build_agent, check_run_inputs

    tasks = json.loads(Path(args.tasks).read_text(encoding="utf-8"))[: args.limit]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    passed = 0
    decisions: dict[str, str] = {}  # task id -> its first decision (paraphrase pairs)
    by_source: dict[str, list[int]] = {}  # source -> [passed, runs]
    with out.open("w", encoding="utf-8") as handle:
        for task in tasks:
            namespace = run_namespace(task, args)
            check_run_inputs(namespace)
            with contextlib.ExitStack() as resources:
                agent = build_agent(namespace, resources)
                started = time.perf_counter()
                result = agent.run(task["question"])
            ok, why = judge(task, result)
            passed += ok
            counts = by_source.setdefault(result.source, [0, 0])
            counts[0] += ok
            counts[1] += 1
            row = {
                "id": task["id"],
                "pass": ok,
                "why": why,
                "status": result.status,
                "source": result.source,
                "answered": result.answered,
                "answer": result.answer,
                "calls": [
                    {"name": c["name"], "args": c["args"]}
                    for m in result.messages
                    if m.get("role") == "assistant"
                    for c in m.get("tool_calls") or []
                ],
                "first_decision": first_decision(result.messages),
                "seconds": round(time.perf_counter() - started, 1),
            }
            decisions[task["id"]] = row["first_decision"]
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            handle.flush()
            mark = "PASS" if ok else "FAIL"
            print(
                f"{mark} {task['id']:12s} {row['seconds']:6.1f}s [{result.source}] {why}: "
                f"{result.answer[:120]!r}",
                flush=True,
            )
    low, high = wilson(passed, len(tasks))
    print(f"passed {passed}/{len(tasks)} (95% CI {100 * low:.0f}-{100 * high:.0f}%)")
    for source, (good, runs) in sorted(by_source.items()):
        print(f"  source {source}: {good}/{runs} passed")
    agreement = pair_agreement(tasks, decisions)
    if agreement["pairs"]:
        low, high = wilson(agreement["agreed"], agreement["pairs"])
        print(
            f"paraphrase pairs with the same first decision: {agreement['agreed']}/"
            f"{agreement['pairs']} (95% CI {100 * low:.0f}-{100 * high:.0f}%)"
        )
        for pair, split in agreement["disagreements"].items():
            print(f"  {pair}: {split}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
