"""Decision performance on the bundled model, as ratios measured in one run.

    .venv/bin/python benchmarks/decision_perf.py [--repeats 5] [--questions 5] [--no-write]

1. decision overhead: generate_ai_message vs the bare llama.cpp call on the same prompt;
2. constrained vs free decoding, with the 9 tools `lokal run` offers: time per generated
   token with llguidance token masks and with llama.cpp's GBNF grammar, and tokens per reply;
3. whole decisions with those 9 tools: staged (preselection, scoring) vs one grammar;
4. second turn of a growing conversation: prefix reuse vs cold (KV cache reset);
5. llama.cpp vs transformers on the same GGUF: load time and tokens per second.

Results go to the `decision_perf` section of docs/performance.md (unless ``--no-write``).
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
from lokal.tools.schema import tool_specs

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "configs" / "model.yaml"
TOOLS = json.loads((ROOT / "data/messages/tools_schema_basic.json").read_text(encoding="utf-8"))
# the tools `lokal run` offers with the example skill: 6 built-in, 2 skill tools, remember
RUN_TOOLS = json.loads((ROOT / "data/dev/tools_lokal_run.json").read_text(encoding="utf-8"))
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
    tools = tool_specs(TOOLS)
    messages = [{"role": "user", "content": QUESTIONS[0]}]
    prompt = build_prompt_messages(messages, tools)
    request = GenerationRequest(messages=prompt, settings=profile.generation)
    fixed = profile.with_tool_calling(mode="prompt_json", max_retries=0, preselect_k=None)
    bare = median_time(lambda: backend.generate(request), repeats)
    full = median_time(lambda: generate_ai_message(fixed, messages, TOOLS), repeats)
    return {"bare_s": bare, "decide_s": full, "ratio": full / bare}


def _with_engine(profile, engine: str):
    model = profile.model.model_copy(update={"grammar_engine": engine})
    return type(profile)(profile.name, model, profile.generation, profile.tool_calling)


def constrained_vs_free(repeats: int, questions: list[str]) -> dict:
    """Per-token time with the prompt already evaluated (so prompt reading, the same for all,
    does not count), over the reply schema of the 9 tools of `lokal run`: free decoding,
    llguidance masks through the logits processor, llama.cpp's GBNF grammar sampler."""
    base = load_profile(CONFIG)
    tools = tool_specs(RUN_TOOLS)
    schema = reply_schema(tools, settings=base.tool_calling)
    rows: dict = {}
    for label, engine, response_schema in (
        ("free", "llguidance", None),
        ("llguidance", "llguidance", schema),
        ("gbnf", "gbnf", schema),
    ):
        profile = _with_engine(base, engine)
        clear_backend_cache()
        backend = get_backend(profile)
        seconds, tokens = 0.0, 0
        for question in questions:
            prompt = build_prompt_messages(
                [{"role": "user", "content": question}],
                tools,
                mode="constrained" if response_schema else "prompt_json",
            )
            request = GenerationRequest(
                messages=prompt, settings=profile.generation, response_schema=response_schema
            )
            backend.generate(request)  # evaluates the prompt, compiles the grammar
            for _ in range(max(1, repeats // 2)):
                start = time.perf_counter()
                completion = backend.generate(request)
                seconds += time.perf_counter() - start
                tokens += completion.completion_tokens or 0
        rows[label] = {
            "s_per_token": seconds / tokens,
            "tokens_per_call": tokens / (len(questions) * max(1, repeats // 2)),
        }
    clear_backend_cache()
    for label in ("llguidance", "gbnf"):
        rows[f"ratio_{label}"] = rows[label]["s_per_token"] / rows["free"]["s_per_token"]
    return rows


def staged_vs_single_grammar(profile, repeats: int, questions: list[str]) -> dict:
    """Whole decisions with the 9 tools of `lokal run`: staged (preselection of 4 tools,
    scored choices, candidates for arguments) vs one grammar over every reply."""
    rows = {}
    for mode in ("staged", "constrained"):
        decided = profile.with_tool_calling(mode=mode, max_retries=0)
        messages = [[{"role": "user", "content": q}] for q in questions]
        for m in messages:
            generate_ai_message(decided, m, RUN_TOOLS)  # warm caches and compile grammars
        seconds = [
            median_time(
                lambda m=m, d=decided: generate_ai_message(d, m, RUN_TOOLS), max(1, repeats // 2)
            )
            for m in messages
        ]
        rows[mode] = {"s_per_decision": sum(seconds) / len(seconds)}
    rows["ratio"] = rows["staged"]["s_per_decision"] / rows["constrained"]["s_per_decision"]
    return rows


def prefix_reuse(profile, repeats: int) -> dict:
    backend = get_backend(profile)
    tools = tool_specs(TOOLS)
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
    parser.add_argument(
        "--questions", type=int, default=len(QUESTIONS), help="the first N questions (1-5)"
    )
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    questions = QUESTIONS[: max(1, args.questions)]
    profile = load_profile(CONFIG)
    results = {
        "overhead": overhead(profile, args.repeats),
        "constrained": constrained_vs_free(args.repeats, questions),
        "staged": staged_vs_single_grammar(profile, args.repeats, questions),
        "prefix": prefix_reuse(profile, args.repeats),
        "backends": llamacpp_vs_transformers(args.repeats),
    }
    print(json.dumps(results, indent=2))
    o, c, st, p, b = (
        results[k] for k in ("overhead", "constrained", "staged", "prefix", "backends")
    )
    shown = f" --questions {len(questions)}" if len(questions) < len(QUESTIONS) else ""
    markdown = f"""
## Decisions on the bundled model

Command: `.venv/bin/python benchmarks/decision_perf.py --repeats {args.repeats}{shown}` on {machine()},
SmolLM2-135M-Instruct Q4_1, greedy. Each row is a ratio of two timings taken in the same run.
"9 tools" are the tools `lokal run` offers with the example skill (`data/dev/tools_lokal_run.json`).

| measure | value | ratio |
| --- | --- | --- |
| decision overhead: `generate_ai_message` (prompt_json) vs bare backend call, same prompt | {o["decide_s"] * 1000:.0f} ms vs {o["bare_s"] * 1000:.0f} ms | {o["ratio"]:.3f} |
| constrained (llguidance masks) vs free decoding, 9 tools: time per generated token, prompt already evaluated | {c["llguidance"]["s_per_token"] * 1000:.1f} ms vs {c["free"]["s_per_token"] * 1000:.1f} ms | {c["ratio_llguidance"]:.2f} |
| constrained (llama.cpp GBNF, the fallback) vs free decoding, same measure | {c["gbnf"]["s_per_token"] * 1000:.1f} ms vs {c["free"]["s_per_token"] * 1000:.1f} ms | {c["ratio_gbnf"]:.2f} |
| tokens per reply, constrained vs free | {c["llguidance"]["tokens_per_call"]:.0f} vs {c["free"]["tokens_per_call"]:.0f} | {c["llguidance"]["tokens_per_call"] / c["free"]["tokens_per_call"]:.2f} |
| whole decision, 9 tools: staged vs one grammar over the reply | {st["staged"]["s_per_decision"] * 1000:.0f} ms vs {st["constrained"]["s_per_decision"] * 1000:.0f} ms | {st["ratio"]:.2f} |
| second turn of a growing conversation: prefix reuse vs cold | {p["reuse_s"] * 1000:.0f} ms vs {p["cold_s"] * 1000:.0f} ms | {p["ratio"]:.3f} |
| load time, transformers vs llama.cpp (same GGUF) | {b["transformers"]["load_s"]:.2f} s vs {b["llamacpp"]["load_s"]:.2f} s | {b["ratio_load"]:.1f} |
| generation speed, llama.cpp vs transformers | {b["llamacpp"]["tokens_per_s"]:.0f} vs {b["transformers"]["tokens_per_s"]:.0f} tokens/s | {b["ratio_tokens_per_s"]:.2f} |
"""
    if not args.no_write:
        write_section("decision_perf", markdown)


if __name__ == "__main__":
    main()
