"""End-to-end tasks through the agent, the way ``lokal run`` does them, with a pass/fail each.

    .venv/bin/python benchmarks/run_tasks.py [--tasks data/dev/e2e_tasks.json] \
        [--profile smollm2-135m] [--workspace data/workspace] [--skills data/skills] \
        [--max_iterations 4] [--out outputs/tasks.jsonl]

A task file is a JSON list of ``{"id", "question", "expect_tools": [names the run must
call], "expect_contains": [texts the answer must contain, case-insensitive]}``. A task
passes when the run answered (``RunResult.answered``), called every expected tool (an empty
list: no tool at all) and the answer holds every expected text. Each result line is written
as soon as its task ends; the summary says how many passed, with a 95% Wilson interval.

``data/dev/e2e_tasks.json`` are development tasks (used while building the staged decisions),
run in a temporary ``LOKAL_HOME`` so that memory notes of earlier runs do not leak in.
"""

from __future__ import annotations

import argparse
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


def judge(task: dict, result) -> tuple[bool, str]:
    called = [
        c["name"]
        for m in result.messages
        if m.get("role") == "assistant"
        for c in m.get("tool_calls") or []
    ]
    if not result.answered:
        return False, f"no answer ({result.status})"
    wanted = task.get("expect_tools") or []
    if not wanted and called:
        return False, f"called {called}, expected no tool"
    missing = [t for t in wanted if t not in called]
    if missing:
        return False, f"did not call {missing} (called {called})"
    absent = [
        t for t in task.get("expect_contains") or [] if t.casefold() not in result.answer.casefold()
    ]
    if absent:
        return False, f"answer lacks {absent}"
    return True, "ok"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="data/dev/e2e_tasks.json")
    parser.add_argument("--model_config", default="configs/model.yaml")
    parser.add_argument("--profile", default=None)
    parser.add_argument("--tool_calling", default=None)
    parser.add_argument("--workspace", default="data/workspace")
    parser.add_argument("--skills", default="data/skills")
    parser.add_argument("--max_iterations", type=int, default=4)
    parser.add_argument("--strategy", default="react")
    parser.add_argument("--out", default="outputs/tasks.jsonl")
    args = parser.parse_args(argv)
    os.environ["LOKAL_HOME"] = tempfile.mkdtemp(prefix="lokal-tasks-")
    from lokal.cli_run import build_agent

    tasks = json.loads(Path(args.tasks).read_text(encoding="utf-8"))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    passed = 0
    with out.open("w", encoding="utf-8") as handle:
        for task in tasks:
            namespace = argparse.Namespace(
                model_config=args.model_config,
                model_name=args.profile,
                tool_calling=args.tool_calling,
                workspace=args.workspace,
                skills=args.skills,
                max_iterations=args.max_iterations,
                strategy=args.strategy,
                time_budget=600.0,
                memory_dir=None,
                conversation=None,
                summarize=False,
                store=None,
                store_path=None,
                chroma_url=None,
            )
            agent = build_agent(namespace)
            started = time.perf_counter()
            result = agent.run(task["question"])
            ok, why = judge(task, result)
            passed += ok
            row = {
                "id": task["id"],
                "pass": ok,
                "why": why,
                "status": result.status,
                "answered": result.answered,
                "answer": result.answer,
                "calls": [
                    {"name": c["name"], "args": c["args"]}
                    for m in result.messages
                    if m.get("role") == "assistant"
                    for c in m.get("tool_calls") or []
                ],
                "seconds": round(time.perf_counter() - started, 1),
            }
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            handle.flush()
            mark = "PASS" if ok else "FAIL"
            print(
                f"{mark} {task['id']:12s} {row['seconds']:6.1f}s {why}: {result.answer[:120]!r}",
                flush=True,
            )
    low, high = wilson(passed, len(tasks))
    print(f"passed {passed}/{len(tasks)} (95% CI {100 * low:.0f}-{100 * high:.0f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
