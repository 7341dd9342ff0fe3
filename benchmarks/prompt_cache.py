"""Conversations that take turns (a server's clients) with and without saved prompt states.

    .venv/bin/python benchmarks/prompt_cache.py [--rounds 4] [--write]

Two conversations, each with its own long history, ask the bundled model (default profile,
staged decisions) for a decision in turn: A, B, A, B, ... Without a prompt cache llama.cpp can
reuse only the prefix of the previous prompt, which is the other conversation's, so each turn
reads its whole history again; with ``model.prompt_cache_mb`` each turn resumes from its own
saved state. Both runs are in one process, one after the other, and the result is the ratio of
their total decision times (these machines are noisy: compare within a run). Writes the
``prompt_cache`` section of docs/performance.md with ``--write``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import machine, write_section

from lokal.config import Profile, load_profile
from lokal.llm.backends import clear_backend_cache
from lokal.llm.decide import generate_ai_message

REPO = Path(__file__).resolve().parent.parent
TOOLS = json.loads((REPO / "data/messages/tools_schema_basic.json").read_text("utf-8"))


def history(topic: str, turns: int) -> list[dict]:
    """A conversation of ``turns`` question/answer pairs about ``topic`` (a long prefix)."""
    messages = [{"role": "system", "content": f"You help with questions about {topic}."}]
    for n in range(turns):
        messages += [
            {"role": "user", "content": f"Tell me fact number {n + 1} about {topic}."},
            {
                "role": "assistant",
                "content": f"Fact {n + 1} about {topic}: it has been studied for many years, "
                f"and people who work with {topic} describe it in long and detailed notes.",
            },
        ]
    return messages


def run(cache_mb: int, rounds: int) -> dict:
    clear_backend_cache()
    base = load_profile(REPO / "configs/model.yaml")
    model = base.model.model_copy(update={"prompt_cache_mb": cache_mb})
    profile = Profile(base.name, model, base.generation, base.tool_calling, base.source)
    conversations = {"A": history("volcanoes", 8), "B": history("the history of tea", 8)}
    generate_ai_message(profile, [{"role": "user", "content": "hi"}], TOOLS)  # load, warm
    times = []
    for r in range(rounds):
        for name, messages in conversations.items():
            question = {"role": "user", "content": f"Read notes_{name}_{r}.txt please."}
            started = time.perf_counter()
            generate_ai_message(profile, [*messages, question], TOOLS)
            times.append(time.perf_counter() - started)
    clear_backend_cache()
    return {"total_s": sum(times), "per_decision_s": sum(times) / len(times), "n": len(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--cache-mb", type=int, default=512)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    off = run(0, args.rounds)
    on = run(args.cache_mb, args.rounds)
    ratio = on["total_s"] / off["total_s"]
    result = {"off": off, "on": on, "ratio_on_vs_off": round(ratio, 3)}
    print(json.dumps(result, indent=2))
    if args.write:
        write_section(
            "prompt_cache",
            f"""## Saved prompt states for conversations that take turns

`benchmarks/prompt_cache.py --rounds {args.rounds} --cache-mb {args.cache_mb}` ({machine()}):
two conversations with long histories ask the bundled model (default profile, staged) in
turn, {off["n"]} decisions each way.

| prompt cache | mean decision | total |
| --- | --- | --- |
| off (only the previous prompt's prefix) | {off["per_decision_s"]:.2f} s | {off["total_s"]:.1f} s |
| `model.prompt_cache_mb: {args.cache_mb}` | {on["per_decision_s"]:.2f} s | {on["total_s"]:.1f} s |

Ratio on/off: **{ratio:.2f}x** (measured in one run).""",
        )


if __name__ == "__main__":
    main()
