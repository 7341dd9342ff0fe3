"""Staged decision time against question length, on the bundled model (issue 18, part 5).

    .venv/bin/python benchmarks/decision_time.py [--lengths 50,100,200,400,800,1600]
        [--tools 1,2,3] [--max-candidates N] [--budget S] [--no-write]

Synthetic questions of 50..1600 characters (sentences that each ask for one of three tools,
with file names, cities and numbers to copy) with 1 to 3 tools, and the two BFCL v4 questions
that stalled (``parallel_multiple_182``, ``live_simple_108-65-0``, read from the installed
bfcl-eval package), each decided once by ``generate_ai_message`` with the default profile
(tool_calling ``staged``). The table (decision time, status, continuations scored, most
candidates one value had before the cap) goes to the ``decision_time`` section of
docs/performance.md. ``--max-candidates`` and ``--budget`` override
``tool_calling.staged.max_candidates`` and ``tool_calling.decision_budget_s`` (``--budget 0``:
no time budget) to measure the settings against each other.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import machine, write_section

from lokal.config import load_profile
from lokal.llm.backends import get_backend
from lokal.llm.decide import generate_ai_message

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "configs" / "model.yaml"
BFCL = (("parallel_multiple", "parallel_multiple_182"), ("live_simple", "live_simple_108-65-0"))

TOOLS = [
    {
        "name": "read_file",
        "description": "Read a text file from the workspace.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "file path"},
                "max_chars": {"type": "integer", "description": "characters to read"},
            },
            "required": ["path"],
        },
    },
    {
        "name": "get_weather",
        "description": "Get the weather forecast for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "the city"},
                "days": {"type": "integer", "description": "days ahead"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "days"],
        },
    },
    {
        "name": "convert_currency",
        "description": "Convert an amount of money from one currency to another.",
        "parameters": {
            "type": "object",
            "properties": {
                "amount": {"type": "number"},
                "source": {"type": "string", "description": "currency code to convert from"},
                "target": {"type": "string", "description": "currency code to convert to"},
            },
            "required": ["amount", "source", "target"],
        },
    },
]
SENTENCES = [
    "Please read the file reports/q3_summary.txt and tell me what it says.",
    "What will the weather be in Lisbon over the next 3 days?",
    "Convert 250 EUR to USD for the hotel booking.",
    "I am planning a trip with my family and we have not decided much yet.",
    "Also read notes/packing_list.md so that nothing is forgotten.",
    "How warm will it be in Porto in 5 days, in celsius?",
    "Then convert 1200 GBP to JPY, since the flight is paid in yen.",
    "My sister says the old town is lovely in the spring, with many small cafes.",
]


def question(length: int) -> str:
    text = ""
    i = 0
    while len(text) < length:
        text += ("" if not text else " ") + SENTENCES[i % len(SENTENCES)]
        i += 1
    return text[:length].rsplit(" ", 1)[0] if len(text) > length + 20 else text


def decide(profile, messages, tools) -> dict:
    start = time.perf_counter()
    result = generate_ai_message(profile, messages, tools)
    seconds = time.perf_counter() - start
    staged = (result.attempts[-1].staged or {}) if result.attempts else {}
    scored = sum((a.staged or {}).get("continuations_scored", 0) for a in result.attempts)
    outcome = (
        f"{len(result.tool_calls)} call(s)"
        if result.ok and result.tool_calls
        else ("answer" if result.ok else f"error: {result.error.type}")
    )
    if result.partial is not None:
        outcome += f" ({len(result.partial.get('tool_calls') or [])} call(s) in partial)"
    return {
        "seconds": seconds,
        "outcome": outcome,
        "scored": scored or (result.partial or {}).get("scored", 0),
        "capped": staged.get("candidates_capped", 0),
        "attempts": len(result.attempts),
    }


def bfcl_entries() -> list[tuple[str, dict]]:
    from lokal.bench.bfcl_data import load_category

    out = []
    for category, wanted in BFCL:
        entry = next(e for e in load_category(category) if e["id"] == wanted)
        out.append((wanted, entry))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="50,100,200,400,800,1600")
    parser.add_argument("--tools", default="1,2,3")
    parser.add_argument("--max-candidates", type=int, default=None)
    parser.add_argument("--budget", type=float, default=None, help="seconds; 0: no budget")
    parser.add_argument("--no-bfcl", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    profile = load_profile(CONFIG)
    changes: dict = {}
    if args.max_candidates is not None:
        changes["staged"] = {
            **profile.tool_calling.staged.model_dump(),
            "max_candidates": args.max_candidates,
        }
    if args.budget is not None:
        changes["decision_budget_s"] = args.budget or None
    if changes:
        profile = profile.with_tool_calling(**changes)
    settings = profile.tool_calling
    get_backend(profile)  # loaded before the clock starts
    # warm-up: the embedding model of the preselection and the first prompt
    generate_ai_message(profile, [{"role": "user", "content": "Hello"}], TOOLS[:1])

    rows = []
    for n_tools in [int(x) for x in args.tools.split(",")]:
        for length in [int(x) for x in args.lengths.split(",")]:
            text = question(length)
            row = decide(profile, [{"role": "user", "content": text}], TOOLS[:n_tools])
            rows.append((f"synthetic, {len(text)} chars", n_tools, row))
            print(rows[-1], flush=True)
    if not args.no_bfcl:
        for name, entry in bfcl_entries():
            messages = entry["question"][0]
            chars = sum(len(m.get("content") or "") for m in messages)
            row = decide(profile, messages, entry["function"])
            rows.append((f"BFCL `{name}`, {chars} chars", len(entry["function"]), row))
            print(rows[-1], flush=True)

    budget = settings.decision_budget_s
    lines = [
        "## Staged decision time against question length",
        "",
        f"Command: `.venv/bin/python benchmarks/decision_time.py"
        f"{' ' + ' '.join(sys.argv[1:]) if sys.argv[1:] else ''}` on {machine()}, "
        f"SmolLM2-135M-Instruct Q4_1 through llama.cpp, default profile (tool_calling "
        f"`staged`, `max_candidates: {settings.staged.max_candidates}`, `decision_budget_s: "
        f"{budget if budget else 'none'}`). One decision per row, after a warm-up decision; "
        "synthetic questions are sentences that each ask for one of three tools (read a file, "
        "weather, currency), cut to the length; the tools are the first 1 to 3 of them. "
        '"scored": continuations the model scored; "capped": the most candidate values one '
        "argument had before the cap (0: under the cap).",
        "",
        "| question | tools | decision time | outcome | attempts | scored | capped |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, n_tools, row in rows:
        lines.append(
            f"| {label} | {n_tools} | {row['seconds']:.1f} s | {row['outcome']} | "
            f"{row['attempts']} | {row['scored']} | {row['capped']} |"
        )
    markdown = "\n".join(lines)
    print(markdown)
    if not args.no_write:
        write_section("decision_time", markdown)


if __name__ == "__main__":
    main()
