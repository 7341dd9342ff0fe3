"""``lokal bfcl``: BFCL v4 single-turn AST categories through several pipelines, scored.

Pipelines, all on the same model and questions:

- ``bfcl-prompt``: BFCL's own default system prompt for prompt-mode models (read from the
  installed bfcl-eval package as text) + the question; the reply is decoded as BFCL does, a
  Python list of calls ``[f(a=1)]`` read with ``ast`` (literals only). The baseline.
- ``prompt_json``: lokal's prompt, universal parser and retries.
- ``builtin``: tools passed to the chat template / server (native format), read by the parser.
- ``constrained``: the reply envelope is grammar-constrained.
- ``staged``: staged decisions (``lokal.llm.staged``): answer or call and the tool chosen from
  the model's likelihood and the preselection's scores, arguments from scored candidates.

Cases run through a thread pool of ``concurrency`` workers; with a server backend the
requests go out at once, with in-process backends (llama.cpp, transformers) they queue on the
model's lock. Each result line is appended to ``results.jsonl`` as soon as it is scored (a
crash loses at most the questions in flight) and ``resume=True`` skips the questions already
there. The final files are sorted by case index, so they do not depend on ``concurrency``.

Scoring follows BFCL's runner: an irrelevance question passes when the reply decodes to no
call (prose, or text that does not decode at all), a relevance question when it decodes to at
least one call; the others by BFCL's AST rules (``lokal.bench.bfcl_checker``).
"""

from __future__ import annotations

import ast
import json
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from lokal.bench.bfcl_checker import check, is_irrelevance
from lokal.bench.bfcl_data import AST_CATEGORIES, EVAL_SAMPLE, bfcl_data_dir, load_split
from lokal.bench.stats import wilson_interval
from lokal.config import Profile
from lokal.errors import BackendError, ConfigError, LokalError
from lokal.llm.backends import GenerationRequest, get_backend

__all__ = [
    "PIPELINES",
    "bfcl_system_prompt",
    "decode_pythonic",
    "run_bfcl",
    "score",
    "write_scores",
]

PIPELINES: dict[str, str] = {
    "bfcl-prompt": "BFCL's default prompt-mode system prompt + pythonic decoding (baseline)",
    "prompt_json": "lokal prompt + universal parser + retries",
    "builtin": "tools= through the chat template (native format) + universal parser",
    "constrained": "lokal prompt + grammar-constrained JSON envelope",
    "staged": "staged decisions: likelihood + preselection, arguments from scored candidates",
}
_PROMPT_CONSTANT = "_DEFAULT_SYSTEM_PROMPT"


def bfcl_system_prompt() -> str:
    """BFCL's default system prompt template (with ``{functions}``), read from the package."""
    path = bfcl_data_dir().parent / "constants" / "default_prompts.py"
    if not path.is_file():
        raise ConfigError(f"BFCL's prompt constants are not at {path}")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == _PROMPT_CONSTANT for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    raise ConfigError(f"{_PROMPT_CONSTANT} not found in {path}")


def _bfcl_messages(template: str, entry: dict[str, Any]) -> list[dict[str, Any]]:
    """BFCL prompt mode: the system prompt with the functions as JSON, before the question."""
    system = template.replace("{functions}", json.dumps(entry["function"], indent=4))
    messages = [dict(m) for m in entry["question"][0]]
    if messages and messages[0].get("role") == "system":
        merged = {"role": "system", "content": system + "\n\n" + messages[0]["content"]}
        return [merged, *messages[1:]]
    return [{"role": "system", "content": system}, *messages]


def _call_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_call_name(node.value)}.{node.attr}"
    raise ValueError("a call's function must be a (dotted) name")


def decode_pythonic(text: str) -> list[dict[str, Any]]:
    """BFCL's prompt-mode decoding: ``[f(a=1), g(b="x")]`` → ``[{"f": {"a": 1}}, ...]``.

    Raises ValueError when the text is not such a list. Values are read with
    ``ast.literal_eval`` only; nothing is evaluated.
    """
    body = text.strip()
    fence = re.fullmatch(r"```(?:\w+)?\s*(.*?)\s*```", body, re.DOTALL)
    if fence:
        body = fence.group(1).strip()
    if not body.startswith("["):
        body = f"[{body}]"
    try:
        tree = ast.parse(body, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not a Python call list: {exc.msg}") from None
    if not isinstance(tree.body, ast.List):
        raise ValueError("not a list of calls")
    decoded = []
    for element in tree.body.elts:
        if not isinstance(element, ast.Call) or element.args:
            raise ValueError("every element must be a call with keyword arguments")
        args = {}
        for keyword in element.keywords:
            if keyword.arg is None:
                raise ValueError("**kwargs is not allowed")
            args[keyword.arg] = ast.literal_eval(keyword.value)
        decoded.append({_call_name(element.func): args})
    return decoded


def _real_name(name: str, functions: list[dict[str, Any]]) -> str:
    """Map a name the model saw sanitised (dots → underscores) back to BFCL's name."""
    names = [f["name"] for f in functions]
    if name in names:
        return name
    return next((n for n in names if n.replace(".", "_") == name), name)


def _run_bfcl_prompt(profile: Profile, template: str, entry: dict[str, Any]) -> dict[str, Any]:
    backend = get_backend(profile)
    started = time.perf_counter()
    row: dict[str, Any] = {"prompt_tokens": 0, "completion_tokens": 0, "error": None}
    try:
        completion = backend.generate(
            GenerationRequest(messages=_bfcl_messages(template, entry), settings=profile.generation)
        )
    except BackendError as exc:
        return {**row, "raw_text": "", "decoded": [], "valid": False, "error": str(exc)}
    row["latency_ms"] = round((time.perf_counter() - started) * 1000, 1)
    row["raw_text"] = completion.text
    row["prompt_tokens"] = completion.prompt_tokens or 0
    row["completion_tokens"] = completion.completion_tokens or 0
    try:
        row["decoded"] = decode_pythonic(completion.text)
        row["valid"] = True
    except (ValueError, SyntaxError) as exc:
        # BFCL counts an undecodable reply as "no call": a plain-text answer is usable.
        row["decoded"] = []
        row["valid"] = "(" not in completion.text
        row["error"] = None if row["valid"] else f"decode: {exc}"
    return row


def _run_lokal(profile: Profile, pipeline: str, entry: dict[str, Any]) -> dict[str, Any]:
    from lokal.llm.decide import generate_ai_message

    functions = entry["function"]
    result = generate_ai_message(
        profile.with_tool_calling(mode=pipeline), entry["question"][0], functions
    )
    decoded = [{_real_name(call["name"], functions): call["args"]} for call in result.tool_calls]
    error = result.error
    return {
        "decoded": decoded,
        "raw_text": result.raw_text,
        "valid": result.ok,
        "latency_ms": result.latency_ms,
        "prompt_tokens": result.usage.prompt_tokens or 0,
        "completion_tokens": result.usage.completion_tokens or 0,
        "error": f"{error.type}: {error.message}" if error else None,
    }


def _job_key(row: dict[str, Any]) -> tuple[str, str, str]:
    return (row["pipeline"], row["category"], row["id"])


def read_results(path: Path) -> list[dict[str, Any]]:
    """The result lines already in ``path`` (a truncated last line is ignored)."""
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # the line in flight when an earlier run was stopped
    return rows


def run_bfcl(
    profile: Profile,
    categories: list[str],
    pipelines: list[str],
    *,
    limit: int | None = None,
    concurrency: int = 1,
    progress: Callable[[], None] | None = None,
    runner: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None,
    results_path: Path | None = None,
    resume: bool = False,
    split: str = "all",
    sample: int | None = EVAL_SAMPLE,
    ids: set[str] | None = None,
) -> list[dict[str, Any]]:
    """One row per (pipeline, category, case), in that order whatever ``concurrency`` is.

    ``runner(pipeline, entry)`` replaces the model call (tests). With ``results_path`` each
    row is appended there as it is scored; ``resume`` keeps the rows already in that file
    and runs only the missing questions (rows of other categories or pipelines stay in the
    file: resuming with fewer categories loses nothing).
    """
    jobs = plan_jobs(categories, pipelines, limit, split=split, sample=sample, ids=ids)
    template = bfcl_system_prompt() if "bfcl-prompt" in pipelines else ""
    done: dict[tuple[str, str, str], dict[str, Any]] = {}
    if results_path is not None:
        wanted = {(p, c, e["id"]) for p, c, e in jobs}
        kept = {_job_key(r): r for r in read_results(results_path)} if resume else {}
        done = {key: row for key, row in kept.items() if key in wanted}
        results_path.parent.mkdir(parents=True, exist_ok=True)
        # start the file again from the rows kept (drops a half-written line)
        with results_path.open("w", encoding="utf-8") as handle:
            for row in kept.values():
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    lock = threading.Lock()

    def one(job: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
        pipeline, category, entry = job
        started = time.perf_counter()
        try:
            if runner is not None:
                out = runner(pipeline, entry)
            elif pipeline == "bfcl-prompt":
                out = _run_bfcl_prompt(profile, template, entry)
            else:
                out = _run_lokal(profile, pipeline, entry)
        except LokalError as exc:
            out = {"decoded": [], "raw_text": "", "valid": False, "error": str(exc)}
        out.setdefault("latency_ms", round((time.perf_counter() - started) * 1000, 1))
        correct, reason = check(
            category, entry["function"], out["decoded"], entry.get("ground_truth")
        )
        if not is_irrelevance(category):
            correct = correct and bool(out["valid"])
        row = {
            "id": entry["id"],
            "position": entry.get("position"),
            "category": category,
            "pipeline": pipeline,
            "decoded": out["decoded"],
            "raw_text": out.get("raw_text", ""),
            "valid": bool(out["valid"]),
            "correct": bool(correct),
            "latency_ms": out["latency_ms"],
            "prompt_tokens": out.get("prompt_tokens", 0),
            "completion_tokens": out.get("completion_tokens", 0),
            "error": out.get("error"),
            "check": reason,
        }
        if results_path is not None:
            with lock, results_path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        if progress:
            progress()
        return row

    todo = [job for job in jobs if (job[0], job[1], job[2]["id"]) not in done]
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        fresh = {_job_key(row): row for row in pool.map(one, todo)}
    return [done.get(k) or fresh[k] for k in ((p, c, e["id"]) for p, c, e in jobs)]


def plan_jobs(
    categories: list[str],
    pipelines: list[str],
    limit: int | None,
    *,
    split: str = "all",
    sample: int | None = EVAL_SAMPLE,
    ids: set[str] | None = None,
) -> list[tuple[str, str, dict[str, Any]]]:
    """(pipeline, category, entry) for every question to run, checking the names; the
    questions of ``split`` (bfcl_data.load_split: ``eval``, ``dev`` or ``all``), only those
    named in ``ids`` when it is given (the questions a change can move, run before and
    after it)."""
    for category in categories:
        if category not in AST_CATEGORIES:
            raise ConfigError(f"unknown category {category!r}; available: {AST_CATEGORIES}")
    for pipeline in pipelines:
        if pipeline not in PIPELINES:
            raise ConfigError(f"unknown pipeline {pipeline!r}; available: {list(PIPELINES)}")
    entries = {
        category: [
            entry
            for entry in load_split(category, split, sample=sample, limit=limit)
            if ids is None or entry["id"] in ids
        ]
        for category in categories
    }
    return [
        (pipeline, category, entry)
        for pipeline in pipelines
        for category in categories
        for entry in entries[category]
    ]


def score(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy per pipeline and category, an unweighted overall and a per-case overall."""
    pipelines: dict[str, Any] = {}
    for row in rows:
        entry = pipelines.setdefault(row["pipeline"], {"categories": {}})
        cat = entry["categories"].setdefault(
            row["category"],
            {"total": 0, "correct": 0, "valid": 0, "latency_ms": 0.0, "latency_ms_max": 0.0},
        )
        cat["total"] += 1
        cat["correct"] += row["correct"]
        cat["valid"] += row["valid"]
        cat["latency_ms"] += row["latency_ms"] or 0
        if (row["latency_ms"] or 0) >= cat["latency_ms_max"]:  # the longest decision, and which
            cat["latency_ms_max"] = row["latency_ms"] or 0
            cat["longest_id"] = row.get("id")
    for pipeline, entry in pipelines.items():
        cats = entry["categories"]
        for cat in cats.values():
            cat["accuracy"] = round(100 * cat["correct"] / cat["total"], 1)
            low, high = wilson_interval(cat["correct"], cat["total"])
            cat["ci95"] = [round(100 * low, 1), round(100 * high, 1)]
            cat["valid_rate"] = round(100 * cat["valid"] / cat["total"], 1)
            cat["latency_ms_mean"] = round(cat.pop("latency_ms") / cat["total"], 1)
        total = sum(c["total"] for c in cats.values())
        entry["description"] = PIPELINES.get(pipeline, pipeline)
        entry["overall"] = {
            "accuracy_mean_of_categories": round(
                sum(c["accuracy"] for c in cats.values()) / len(cats), 1
            ),
            "accuracy_all_cases": round(100 * sum(c["correct"] for c in cats.values()) / total, 1),
            "valid_rate": round(100 * sum(c["valid"] for c in cats.values()) / total, 1),
            "total": total,
        }
    return {"pipelines": pipelines}


def scores_markdown(scores: dict[str, Any], categories: list[str]) -> str:
    header = ["pipeline", *categories, "overall", "valid %", "what it is"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for pipeline, entry in scores["pipelines"].items():
        cells = [pipeline]
        for category in categories:
            cat = entry["categories"].get(category)
            cells.append(
                f"{cat['accuracy']:.1f} ({cat['correct']}/{cat['total']}; "
                f"{cat['ci95'][0]:.0f}–{cat['ci95'][1]:.0f})"
                if cat
                else "-"
            )
        cells += [
            f"{entry['overall']['accuracy_mean_of_categories']:.1f}",
            f"{entry['overall']['valid_rate']:.1f}",
            entry["description"],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_scores(
    outdir: Path, rows: list[dict[str, Any]], categories: list[str], meta: dict[str, Any]
) -> dict[str, Any]:
    """results.jsonl (rewritten in case order, the rows of other categories or pipelines
    already there kept after them: a resumed run with fewer categories loses nothing),
    scores.json and scores.md (of ``rows``) into ``outdir``; returns the scores."""
    outdir.mkdir(parents=True, exist_ok=True)
    path = outdir / "results.jsonl"
    mine = {_job_key(row) for row in rows}
    others = [row for row in read_results(path) if _job_key(row) not in mine]
    with path.open("w", encoding="utf-8") as handle:
        for row in [*rows, *others]:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    scores = {**meta, "categories": categories, **score(rows)}
    (outdir / "scores.json").write_text(json.dumps(scores, indent=2) + "\n", encoding="utf-8")
    split = meta.get("split", "all")
    where = {
        "eval": "evaluation split (positions not a multiple of 5)",
        "dev": "development split (positions 0, 5, 10, ...)",
        "all": "all positions",
    }.get(split, split)
    if split == "eval" and meta.get("sample"):
        seed = meta.get("sample_seed")
        where += f"; a split of more than 400 sampled to {meta['sample']} (seed {seed})"
    title = (
        f"# BFCL v4 AST, {meta.get('model', '')}\n\n"
        f"Questions: {where}. Accuracy % (correct/total; 95% Wilson interval); the longest "
        "decision of each category is in scores.json (latency_ms_max, longest_id).\n\n"
    )
    (outdir / "scores.md").write_text(title + scores_markdown(scores, categories), "utf-8")
    return scores
