"""Parallel tool calls: 8 tools that each wait 200 ms, run in one turn, parallel vs serial.

    .venv/bin/python benchmarks/parallel_tools.py [--calls 8] [--repeats 5] [--no-write]

Writes the ratio (parallel wall time / serial wall time) to the `parallel_tools` section of
docs/performance.md (unless ``--no-write``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import machine, write_section

from lokal.tools.registry import ToolRegistry, tool

CALLS = 8
WAIT_S = 0.2


@tool
def wait_a_bit(label: str) -> str:
    """Wait 200 ms (stands in for an I/O-bound tool: an HTTP call, a database query).

    Args:
        label: which call this is.
    """
    time.sleep(WAIT_S)
    return label


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=CALLS, help="tool calls in the turn")
    parser.add_argument("--repeats", type=int, default=5, help="runs each way (median)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    n_calls, repeats = max(1, args.calls), max(1, args.repeats)
    registry = ToolRegistry([wait_a_bit])
    calls = [
        {"id": f"call_{i:03d}", "name": "wait_a_bit", "args": {"label": str(i)}}
        for i in range(1, n_calls + 1)
    ]

    def timed(workers: int) -> float:
        start = time.perf_counter()
        messages = registry.execute_many(calls, max_workers=workers)
        elapsed = time.perf_counter() - start
        if [m["status"] for m in messages] != ["success"] * n_calls:
            raise RuntimeError("a call failed")
        return elapsed

    parallel = statistics.median(timed(n_calls) for _ in range(repeats))
    serial = statistics.median(timed(1) for _ in range(repeats))
    ratio = parallel / serial
    print(f"parallel {parallel:.3f} s, serial {serial:.3f} s, ratio {ratio:.3f}")
    if args.no_write:
        return
    options = "".join(
        f" --{name} {value}"
        for name, value, default in (("calls", n_calls, CALLS), ("repeats", repeats, 5))
        if value != default
    )
    write_section(
        "parallel_tools",
        f"""
## Parallel tool calls

Command: `.venv/bin/python benchmarks/parallel_tools.py{options}` on {machine()}.
{n_calls} calls of a tool that waits {int(WAIT_S * 1000)} ms, in one turn through
`ToolRegistry.execute_many`; median of {repeats} runs each.

| run | wall time | ratio to serial |
| --- | --- | --- |
| serial (`max_workers=1`) | {serial:.3f} s | 1.000 |
| parallel (`max_workers={n_calls}`) | {parallel:.3f} s | {ratio:.3f} |
""",
    )


if __name__ == "__main__":
    main()
