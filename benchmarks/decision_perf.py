"""Decision performance on the bundled model, as ratios measured in one run.

    .venv/bin/python benchmarks/decision_perf.py [--repeats 5]

1. decision overhead: generate_ai_message vs the bare llama.cpp call on the same prompt;
2. constrained vs free decoding: time per generated token and tokens per reply;
3. second turn of a growing conversation: prefix reuse vs cold (KV cache reset);
4. llama.cpp vs transformers on the same GGUF: load time and tokens per second.

Results go to the `decision_perf` section of docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import machine, write_section

from lokal.config import load_profile
from lokal.llm.backends import GenerationRequest, clear_backend_cache, get_backend
from lokal.llm.decide import generate_ai_message
from lokal.llm.grammar import reply_schema
from lokal.llm.prompts import build_prompt_messages
from lokal.messages import make_tool_message
from lokal.schema import normalize_tools_schema

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "configs" / "model.yaml"
TOOLS = json.loads((ROOT / "data/messages/tools_schema_basic.json").read_text(encoding="utf-8"))
QUESTIONS = [
    "Read docs/agent_intro.txt and summarise it.",
    "What is 3.14 * 5 - 2.5?",
    "Find files that mention Agent.",
    "Summarise data/sales.csv.",
    "Say hello in one sentence.",
]


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def overhead(profile, repeats: int) -> dict:
    backend = get_backend(profile)
    tools = normalize_tools_schema(TOOLS)
    messages = [{"role": "user", "content": QUESTIONS[0]}]
    prompt = build_prompt_messages(messages, tools)
    request = GenerationRequest(messages=prompt, settings=profile.generation)
    fixed = profile.with_tool_calling(max_retries=0)
    bare = median_time(lambda: backend.generate(request), repeats)
    full = median_time(lambda: generate_ai_message(fixed, messages, TOOLS), repeats)
    return {"bare_s": bare, "decide_s": full, "ratio": full / bare}


def constrained_vs_free(repeats: int) -> dict:
    """Per-token time with the prompt already evaluated (so prompt reading, the same for both,
    does not inflate the shorter constrained replies), and tokens per reply of full decisions."""
    profile = load_profile(CONFIG)
    backend = get_backend(profile)
    tools = normalize_tools_schema(TOOLS)
    schema = reply_schema(tools, settings=profile.tool_calling)
    rows: dict = {}
    for mode, response_schema in (("prompt_json", None), ("constrained", schema)):
        seconds, tokens = 0.0, 0
        for question in QUESTIONS:
            prompt = build_prompt_messages(
                [{"role": "user", "content": question}], tools, mode=mode
            )
            request = GenerationRequest(
                messages=prompt, settings=profile.generation, response_schema=response_schema
            )
            backend.generate(request)  # evaluates the prompt; the timed call reuses it
            for _ in range(max(1, repeats // 2)):
                start = time.perf_counter()
                completion = backend.generate(request)
                seconds += time.perf_counter() - start
                tokens += completion.completion_tokens or 0
        decided = load_profile(CONFIG, tool_calling=mode).with_tool_calling(max_retries=0)
        reply_tokens = [
            generate_ai_message(decided, [{"role": "user", "content": q}], TOOLS)["usage"][
                "completion_tokens"
            ]
            for q in QUESTIONS
        ]
        rows[mode] = {
            "s_per_token": seconds / tokens,
            "tokens_per_reply": sum(reply_tokens) / len(reply_tokens),
        }
    rows["ratio_s_per_token"] = (
        rows["constrained"]["s_per_token"] / rows["prompt_json"]["s_per_token"]
    )
    return rows


def prefix_reuse(profile, repeats: int) -> dict:
    backend = get_backend(profile)
    tools = normalize_tools_schema(TOOLS)
    call = {"id": "call_001", "name": "file_reader", "args": {"path": "docs/agent_intro.txt"}}
    first = [{"role": "user", "content": QUESTIONS[0]}]
    second = [
        *first,
        {"role": "assistant", "content": "", "tool_calls": [call]},
        make_tool_message(
            call, output={"content": "Agents combine a model, tools, memory and a loop. " * 20}
        ),
    ]
    settings = profile.generation.model_copy(update={"max_new_tokens": 1})
    req1 = GenerationRequest(messages=build_prompt_messages(first, tools), settings=settings)
    req2 = GenerationRequest(messages=build_prompt_messages(second, tools), settings=settings)

    def warm():
        backend.generate(req1)
        start = time.perf_counter()
        backend.generate(req2)
        return time.perf_counter() - start

    def cold():
        backend.llm.reset()
        start = time.perf_counter()
        backend.generate(req2)
        return time.perf_counter() - start

    warm_s = statistics.median(warm() for _ in range(repeats))
    cold_s = statistics.median(cold() for _ in range(repeats))
    return {"cold_s": cold_s, "reuse_s": warm_s, "ratio": warm_s / cold_s}


def llamacpp_vs_transformers(repeats: int) -> dict:
    rows = {}
    for name in ("smollm2-135m", "smollm2-135m-hf"):
        clear_backend_cache()
        profile = load_profile(CONFIG, name)
        start = time.perf_counter()
        backend = get_backend(profile)
        load_s = time.perf_counter() - start
        settings = profile.generation.model_copy(update={"max_new_tokens": 64})
        request = GenerationRequest(
            messages=[{"role": "user", "content": "Write a short paragraph about agents."}],
            settings=settings,
        )
        backend.generate(request)  # warm-up
        seconds, tokens = 0.0, 0
        for _ in range(repeats):
            start = time.perf_counter()
            completion = backend.generate(request)
            seconds += time.perf_counter() - start
            tokens += completion.completion_tokens or 0
        rows[profile.backend] = {"load_s": load_s, "tokens_per_s": tokens / seconds}
    rows["ratio_tokens_per_s"] = (
        rows["llamacpp"]["tokens_per_s"] / rows["transformers"]["tokens_per_s"]
    )
    rows["ratio_load"] = rows["transformers"]["load_s"] / rows["llamacpp"]["load_s"]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    profile = load_profile(CONFIG)
    results = {
        "overhead": overhead(profile, args.repeats),
        "constrained": constrained_vs_free(args.repeats),
        "prefix": prefix_reuse(profile, args.repeats),
        "backends": llamacpp_vs_transformers(args.repeats),
    }
    print(json.dumps(results, indent=2))
    o, c, p, b = (results[k] for k in ("overhead", "constrained", "prefix", "backends"))
    markdown = f"""
## Decisions on the bundled model

Command: `.venv/bin/python benchmarks/decision_perf.py --repeats {args.repeats}` on {machine()},
SmolLM2-135M-Instruct Q4_1, greedy. Each row is a ratio of two timings taken in the same run.

| measure | value | ratio |
| --- | --- | --- |
| decision overhead: `generate_ai_message` vs bare backend call, same prompt | {o["decide_s"] * 1000:.0f} ms vs {o["bare_s"] * 1000:.0f} ms | {o["ratio"]:.3f} |
| constrained vs free decoding: time per generated token (prompt already evaluated) | {c["constrained"]["s_per_token"] * 1000:.1f} ms vs {c["prompt_json"]["s_per_token"] * 1000:.1f} ms | {c["ratio_s_per_token"]:.2f} |
| tokens per reply, constrained vs free | {c["constrained"]["tokens_per_reply"]:.0f} vs {c["prompt_json"]["tokens_per_reply"]:.0f} | {c["constrained"]["tokens_per_reply"] / c["prompt_json"]["tokens_per_reply"]:.2f} |
| second turn of a growing conversation: prefix reuse vs cold | {p["reuse_s"] * 1000:.0f} ms vs {p["cold_s"] * 1000:.0f} ms | {p["ratio"]:.3f} |
| load time, transformers vs llama.cpp (same GGUF) | {b["transformers"]["load_s"]:.2f} s vs {b["llamacpp"]["load_s"]:.2f} s | {b["ratio_load"]:.1f} |
| generation speed, llama.cpp vs transformers | {b["llamacpp"]["tokens_per_s"]:.0f} vs {b["transformers"]["tokens_per_s"]:.0f} tokens/s | {b["ratio_tokens_per_s"]:.2f} |
"""
    write_section("decision_perf", markdown)


if __name__ == "__main__":
    main()
