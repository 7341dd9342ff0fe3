"""Parallel tool calls: 8 tools that each wait 200 ms, run in one turn, parallel vs serial.

    .venv/bin/python benchmarks/parallel_tools.py

Writes the ratio (parallel wall time / serial wall time) to the `parallel_tools` section of
docs/performance.md.
"""

from __future__ import annotations

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
    registry = ToolRegistry([wait_a_bit])
    calls = [
        {"id": f"call_{i:03d}", "name": "wait_a_bit", "args": {"label": str(i)}}
        for i in range(1, CALLS + 1)
    ]

    def timed(workers: int) -> float:
        start = time.perf_counter()
        messages = registry.execute_many(calls, max_workers=workers)
        elapsed = time.perf_counter() - start
        if [m["status"] for m in messages] != ["success"] * CALLS:
            raise RuntimeError("a call failed")
        return elapsed

    parallel = statistics.median(timed(CALLS) for _ in range(5))
    serial = statistics.median(timed(1) for _ in range(5))
    ratio = parallel / serial
    print(f"parallel {parallel:.3f} s, serial {serial:.3f} s, ratio {ratio:.3f}")
    write_section(
        "parallel_tools",
        f"""
## Parallel tool calls

Command: `.venv/bin/python benchmarks/parallel_tools.py` on {machine()}.
{CALLS} calls of a tool that waits {int(WAIT_S * 1000)} ms, in one turn through
`ToolRegistry.execute_many`; median of 5 runs each.

| run | wall time | ratio to serial |
| --- | --- | --- |
| serial (`max_workers=1`) | {serial:.3f} s | 1.000 |
| parallel (`max_workers={CALLS}`) | {parallel:.3f} s | {ratio:.3f} |
""",
    )


if __name__ == "__main__":
    main()
