"""Would another feature of the question against the tools lift answer-or-call?

    .venv/bin/python benchmarks/stage1_extra_features.py \
        [--rows data/dev/calibration/stage1_bfcl_dev.jsonl] [--out outputs/stage1_extra.json] \
        [--model]

Development split only: the stored stage-1 rows of BFCL's development questions (the
questions at positions that are multiples of 5; ``calibrate_staged.py --stage1-bfcl``
collects them) and the questions and functions those rows came from. No model runs: each
feature is a function of the question's text and the offered functions (the embedding
features use the bundled MiniLM, on this machine).

For each candidate feature ``f`` the decision becomes "call when the configured margin plus
``a * f + b`` is positive" (the rows' ``blocked`` flags still answer). A grid over ``a`` and
``b`` is chosen on four folds and scored on the fifth (folds in row order), against the
configured decision on the same rows: a feature is worth building into the engine only when
the out-of-fold count rises. The features:

- ``name_words``: the share of the words of a function's name (less generic verbs such as
  get, calculate, find) that the question writes (the first five letters alike), best over
  the functions;
- ``param_words``: the share of a function's required parameters whose name words the
  question writes, best over the functions;
- ``name_similarity``: the MiniLM cosine of the question and a function's name as words;
- ``first_sentence_similarity``: ... and the first sentence of its description;
- with ``--model`` (the bundled model, about 1 s a row: 12 minutes on 2 cores), the model's
  own judgement: ``model_fits`` is log P("Yes") − log P("No") after "Can this function answer
  the question?" (the function's name and first sentence, the question), and
  ``model_relevant`` the same after "Is this tool relevant to the request?" under a system
  line, each the best over the functions (the first six).

lokal's own rows (its cases, tasks and pairs) are left out: the stored rows do not hold
their questions' tools. The result, written to docs/decisions.md, is what limits the
irrelevance categories with these features.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibrate_staged import STAGE1, STAGE1_WEIGHTS

from lokal.bench.bfcl_data import load_split
from lokal.config import load_profile
from lokal.llm.staged.candidates import name_words

CATEGORIES = re.findall(
    r"\w+",
    "irrelevance live_irrelevance simple_python multiple live_simple parallel "
    "parallel_multiple live_multiple live_relevance",
)
GENERIC_NAME = frozenset(
    re.findall(
        r"\w+",
        "get set find calculate calc compute search fetch retrieve determine info information "
        "data details detail api list create update check tool function by of the for and to "
        "in on with from is are do make new all lookup query",
    )
)
GENERIC_PARAM = frozenset(
    re.findall(r"\w+", "name id value type info data the of for and to in number str list")
)
WEIGHTS = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 10.0)
SHIFTS = tuple(x / 2 for x in range(-12, 3))


def question_text(entry: dict) -> str:
    turn = entry["question"][0]
    messages = turn if isinstance(turn, list) else entry["question"]
    return " ".join(m["content"] for m in messages if m["role"] == "user")


def _written(word: str, question_words: set[str]) -> bool:
    k = min(len(word), 5)
    return any(len(q) >= 3 and q[:k] == word[:k] for q in question_words)


def name_share(question: str, functions: list[dict]) -> float:
    said = set(re.findall(r"[a-z]+", question.lower()))
    best = 0.0
    for function in functions:
        words = [
            w
            for w in name_words(function["name"].split(".")[-1]).casefold().split()
            if len(w) >= 3 and w not in GENERIC_NAME
        ]
        if words:
            best = max(best, sum(_written(w, said) for w in words) / len(words))
    return best


def param_share(question: str, functions: list[dict]) -> float:
    said = set(re.findall(r"[a-z]+", question.lower()))
    best = 0.0
    for function in functions:
        required = (function.get("parameters") or {}).get("required") or []
        if not required:
            return 1.0
        stated = 0
        for param in required:
            words = [
                w
                for w in name_words(param).casefold().split()
                if len(w) >= 3 and w not in GENERIC_PARAM
            ]
            stated += not words or any(_written(w, said) for w in words)
        best = max(best, stated / len(required))
    return best


JUDGEMENTS = {
    "model_fits": (
        None,
        "Function: {name} - {about}\nQuestion: {question}\n"
        "Can this function answer the question? Answer Yes or No.",
    ),
    "model_relevant": (
        "You check whether a tool fits a request.",
        "Request: {question}\nTool: {name} ({about})\nIs this tool relevant to the request?",
    ),
}


def model_judgements(backend, settings, question: str, functions: list[dict]) -> dict:
    """The model's Yes-over-No margin for each prompt of ``JUDGEMENTS``, best over the
    functions (the first six)."""
    from lokal.llm.backends import GenerationRequest

    out = {}
    for feature, (system, template) in JUDGEMENTS.items():
        best = None
        for function in functions[:6]:
            about = (function.get("description") or "").split(". ")[0][:200]
            user = template.format(name=function["name"], about=about, question=question[:600])
            messages = [{"role": "system", "content": system}] if system else []
            messages.append({"role": "user", "content": user})
            yes, no = backend.score(GenerationRequest(messages, settings), ["Yes", "No"])
            best = yes - no if best is None else max(best, yes - no)
        out[feature] = best if best is not None else 0.0
    return out


def margin(row: dict, weights: dict) -> float:
    return weights["call_bias"] + sum(
        weights[STAGE1_WEIGHTS[i]] * float(row.get(f, 0.0)) for i, f in enumerate(STAGE1)
    )


def right(row: dict, weights: dict, feature: str, a: float, b: float) -> bool:
    called = margin(row, weights) + a * row[feature] + b > 0 and not row.get("blocked")
    return called == bool(row["call"])


def out_of_fold(rows: list[dict], weights: dict, feature: str, folds: int = 5) -> dict:
    got, picks = 0, []
    for fold in range(folds):
        train = [r for i, r in enumerate(rows) if i % folds != fold]
        test = [r for i, r in enumerate(rows) if i % folds == fold]
        a, b = max(
            ((a, b) for a in WEIGHTS for b in SHIFTS),
            key=lambda ab: (
                sum(right(r, weights, feature, *ab) for r in train),
                -ab[0],
                -abs(ab[1]),
            ),
        )
        picks.append([a, b])
        got += sum(right(r, weights, feature, a, b) for r in test)
    best = max(
        ((a, b) for a in WEIGHTS for b in SHIFTS),
        key=lambda ab: (sum(right(r, weights, feature, *ab) for r in rows), -ab[0], -abs(ab[1])),
    )
    return {
        "configured": sum(right(r, weights, feature, 0.0, 0.0) for r in rows),
        "in_sample_best": sum(right(r, weights, feature, *best) for r in rows),
        "in_sample_pick": list(best),
        "out_of_fold": got,
        "fold_picks": picks,
        "of": len(rows),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="data/dev/calibration/stage1_bfcl_dev.jsonl")
    parser.add_argument("--profile", default="configs/model.yaml")
    parser.add_argument("--out", default="outputs/stage1_extra.json")
    parser.add_argument(
        "--model", action="store_true", help="also the bundled model's own judgement (slow)"
    )
    args = parser.parse_args(argv)

    profile = load_profile(args.profile)
    staged = profile.tool_calling.staged
    weights = {w: float(getattr(staged, w)) for w in (*STAGE1_WEIGHTS, "call_bias")}
    entries = {e["id"]: e for c in CATEGORIES for e in load_split(c, "dev", sample=None)}
    rows = [json.loads(line) for line in Path(args.rows).read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r["id"] in entries]

    from lokal.rag.embeddings import LocalEmbedder

    embedder = LocalEmbedder()
    questions = embedder.embed([question_text(entries[r["id"]]) for r in rows])
    for row, vector in zip(rows, questions, strict=True):
        entry = entries[row["id"]]
        question, functions = question_text(entry), entry["function"]
        row["name_words"] = name_share(question, functions)
        row["param_words"] = param_share(question, functions)
        for feature, texts in (
            ("name_similarity", [name_words(f["name"].split(".")[-1]) for f in functions]),
            (
                "first_sentence_similarity",
                [(f.get("description") or "").split(". ")[0] for f in functions],
            ),
        ):
            row[feature] = float(max(embedder.embed(texts) @ vector)) if texts else 0.0
    features = ["name_words", "param_words", "name_similarity", "first_sentence_similarity"]
    if args.model:
        from lokal.llm.backends import get_backend

        backend = get_backend(profile)
        for n, row in enumerate(rows, start=1):
            entry = entries[row["id"]]
            row.update(
                model_judgements(
                    backend, profile.generation, question_text(entry), entry["function"]
                )
            )
            if n % 100 == 0:
                print(f"  model judgements: {n}/{len(rows)} rows", flush=True)
        features += list(JUDGEMENTS)

    report = {feature: out_of_fold(rows, weights, feature) for feature in features}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    for feature, got in report.items():
        print(
            f"{feature:26s} configured {got['configured']}/{got['of']}  best in-sample "
            f"{got['in_sample_best']} at {got['in_sample_pick']}  out-of-fold {got['out_of_fold']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
