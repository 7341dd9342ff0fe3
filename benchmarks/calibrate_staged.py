"""Calibrate a profile's staged-decision weights on lokal's development cases.

    .venv/bin/python benchmarks/calibrate_staged.py [--profile smollm2-135m] \
        [--cases data/dev/cases] [--tools data/dev/tools_lokal_run.json] [--out outputs/calibration] \
        [--limit N] [--stage1 | --names | --continue-bfcl CATEGORIES | --stage1-bfcl CATEGORIES]

Development cases only (``data/dev/cases``, BFCL's development split): never the evaluation
sets (``data/bench_cases``, BFCL's evaluation split), which the reported numbers come
from. For every case the script runs the profile's prompt and preselection as
``generate_ai_message`` does and records the raw evidence of each stage, then fits:

- answer or call: a logistic regression of "the case expects a call" on the model's opening
  margin, the preselection similarity and "this turn has tool results" (weights and bias);
- which tool: a grid over the weights of the name log-probability, the similarity and BM25;
- argument values: a grid over the length weight of candidate values, with the right tool
  given, on the cases whose expected arguments are listed;
- another call: a logistic regression of "more than one call expected" on the continue
  margin and the similarity of the parts of the request no call has used yet.

``--continue-bfcl parallel,parallel_multiple,simple_python,...`` fits the another-call
stage alone on BFCL's development split (the questions at positions that are multiples of
5; the evaluation split is never read): lokal's own cases hold few requests for several
calls of one tool, BFCL's ``parallel`` categories are made of them. It prints in-sample and
5-fold out-of-fold accuracy with and without the values stated later (``later``,
``cued``) and the weights kept.

``--stage1-bfcl irrelevance,live_irrelevance,simple_python,...`` asks whether the
answer-or-call weights (fitted on lokal's cases) transfer: it scores both openings on
lokal's cases, on BFCL's development split (every question of each category) and
on lokal's development end-to-end tasks and paraphrases (with the tools and system prompt
``lokal run`` has for them: ``run_tools``), each row with whether a filter after stage 1
turns a call into an answer (``blocked``), and prints the accuracy of the decision as the
engine makes it by group (lokal, its tasks and pairs, BFCL questions that expect a call,
those that expect none), a refit on the rows no filter blocks, in-sample and out-of-fold with
a sign test against the configured weights (the refit is kept only when it is better beyond
chance), the bias moved as chosen on the other folds (out-of-fold), and the accuracy with
the bias moved. ``--features data/dev/calibration/stage1_bfcl_dev.jsonl``
refits from stored rows without the model.

It prints the ``staged:`` settings to put in configs/model.yaml and writes the evidence and
the fit to ``--out`` (features.jsonl, fit.json). Accuracies printed are on the development
cases themselves (in-sample): they say the fit worked, not how well it generalises; the
evaluation sets say that.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from lokal.bench.batch import load_cases
from lokal.config import StagedSettings, load_profile
from lokal.llm.backends import GenerationRequest, get_backend
from lokal.llm.evidence import evidence
from lokal.llm.prompts import build_prompt_messages
from lokal.llm.request import done_calls, turn_results
from lokal.llm.select import default_selector
from lokal.llm.staged import CALL_OPENING, StagedEngine, args_schema
from lokal.messages import current_turn, last_user_text
from lokal.tools.schema import tool_specs


def _engine(backend, profile, case, tools, neutral: StagedSettings):
    messages = case["messages"]
    settings = profile.tool_calling.model_copy(update={"staged": neutral})
    selection = default_selector().select(
        messages,
        tools,
        k=settings.preselect_k,
        always=settings.always,
        on_request=settings.on_request,
    )
    offered = [t for t in tools if t.name in selection.offered]
    prompt = build_prompt_messages(
        messages, offered, mode="staged", purpose="decide", evidence=evidence(messages, k=3)
    )
    turn = current_turn(messages)
    request = GenerationRequest(messages=prompt, settings=profile.generation)
    engine = StagedEngine(
        backend,
        request,
        offered,
        selection,
        settings,
        purpose="decide",
        has_results=any(m.get("role") == "tool" for m in turn),
        question=last_user_text(messages),
        results=turn_results(turn),
        done=done_calls(turn),
    )
    return engine, offered, selection


def collect(profile, cases, default_tools, stage1_only: bool = False, names_only: bool = False):
    backend = get_backend(profile)
    # neutral weights: stage 1 reports the raw LM margin and similarity
    neutral = StagedSettings(lm_weight=1.0, name_lm_weight=1.0)
    rows = []
    for case in cases:
        tools = tool_specs(case.get("tools") or default_tools)
        engine, offered, selection = _engine(backend, profile, case, tools, neutral)
        expect = case["expect"]
        wanted = [c["name"] for c in expect.get("tool_calls", [])]
        stage1 = engine.call_margin()
        row = {
            "id": case["id"],
            "call": bool(wanted),
            "calls": len(wanted),
            "results": engine.has_results,
            "lm": stage1["lm"],
            "similarity": stage1["similarity"],
            "bm25": stage1["bm25"],
            "signal": stage1["signal"],
            "blocked": engine.answer_instead() is not None,
            "offered": [t.name for t in offered],
            "recall": bool(wanted) and wanted[0] in selection.offered,
        }
        if wanted and wanted[0] in engine.tools and not stage1_only:
            row["tools"] = engine.tool_scores(CALL_OPENING)
            row["want"] = wanted[0]
        if wanted and wanted[0] in engine.tools and not (stage1_only or names_only):
            first = expect["tool_calls"][0]
            tool = engine.tools[wanted[0]]
            schema = args_schema(tool, engine.question, engine.settings, optional="mentioned")
            row["args"] = _arg_evidence(engine, tool, schema, first.get("args") or {})
            row["continue"], _ = _continue_after_first_call(engine, tool, schema)
        rows.append(row)
        print(f"  {case['id']:28s} lm={row['lm']:+.2f} sim={row['similarity']:.2f}", flush=True)
    return rows


def _continue_after_first_call(engine: StagedEngine, tool, schema) -> tuple[dict, list]:
    """The engine fills ``tool``'s call as it would, then scores another call: the continue
    evidence (``CONTINUE``) and the arguments it filled."""
    head = CALL_OPENING + tool.name + '", "args": '
    text = engine.fill_args(head, schema)
    engine.cover(text)
    try:
        made = [json.loads(text)]
    except json.JSONDecodeError:
        made = []
    evidence = engine.continue_evidence(head + text + "}", {tool.name}, made)
    return {k: evidence[k] for k in CONTINUE}, made


def _arg_evidence(engine: StagedEngine, tool, schema, expected: dict) -> list[dict]:
    """For each expected argument: every candidate's log-probability, length, and rightness."""
    out = []
    properties = schema.get("properties") or {}
    head = CALL_OPENING + tool.name + '", "args": {'
    for name, want in expected.items():
        if name not in properties:
            continue
        candidates = engine.value_candidates(properties[name], [])
        if not candidates:
            continue
        texts = [json.dumps(v, ensure_ascii=False) for v in candidates]
        prefix = head + json.dumps(name) + ": "
        scores = engine._score(prefix, [t + "}" for t in texts])
        right = [_same(v, want) for v in candidates]
        out.append(
            {
                "name": name,
                "scores": scores,
                "lengths": [len(t) for t in texts],
                "right": right,
            }
        )
    return out


def _same(a, b) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().casefold() == b.strip().casefold()
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b)
    return a == b


STAGE1 = ("lm", "similarity", "bm25", "results", "signal")
STAGE1_WEIGHTS = ("lm_weight", "similarity_weight", "bm25_weight", "results_bias", "signal_weight")


def _stage1_xy(rows, features=STAGE1):
    x = np.array([[float(r.get(f, 0.0)) for f in features] for r in rows])
    y = np.array([1.0 if r["call"] else 0.0 for r in rows])
    return x, y


def cross_validated_stage1(rows, folds: int = 5, features=STAGE1) -> float:
    """Accuracy of stage 1 on held-out development cases (k-fold, cases in file order)."""
    right = 0
    for fold in range(folds):
        train = [r for i, r in enumerate(rows) if i % folds != fold]
        test = [r for i, r in enumerate(rows) if i % folds == fold]
        fit = fit_stage1(train, features)
        x, y = _stage1_xy(test, features)
        w = np.array([fit[STAGE1_WEIGHTS[STAGE1.index(f)]] for f in features])
        right += int((((x @ w + fit["call_bias"]) > 0) == (y > 0.5)).sum())
    return right / len(rows)


def _logistic(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """L2-regularised logistic regression by gradient descent on standardised features;
    the weights and bias returned apply to the raw features."""
    mean, std = x.mean(0), x.std(0) + 1e-9
    z = (x - mean) / std
    w = np.zeros(x.shape[1])
    b = 0.0
    for _ in range(20000):
        p = 1 / (1 + np.exp(-(z @ w + b)))
        w -= 0.05 * (z.T @ (p - y) / len(y) + 0.01 * w)
        b -= 0.05 * float((p - y).mean())
    w_raw = w / std
    return w_raw, b - float(w_raw @ mean)


def fit_stage1(rows, features=STAGE1):
    """Logistic regression of "a call is expected" on ``features`` (a feature left out gets
    weight 0)."""
    x, y = _stage1_xy(rows, features)
    w_raw, bias = _logistic(x, y)
    accuracy = float((((x @ w_raw + bias) > 0) == (y > 0.5)).mean())
    weights = dict.fromkeys(STAGE1_WEIGHTS, 0.0)
    weights.update(
        {STAGE1_WEIGHTS[STAGE1.index(f)]: float(w) for f, w in zip(features, w_raw, strict=True)}
    )
    return {**weights, "similarity_center": 0.0, "call_bias": bias, "accuracy": accuracy}


def _with_and_without(rows, every, without, fit, cross_validate, labels, folds) -> dict:
    """In-sample and out-of-fold accuracy with ``every`` feature and with ``without``: the
    features left out are kept only when they raise out-of-fold accuracy."""
    out = {}
    for label, features in zip(labels, (every, without), strict=True):
        fitted = fit(rows, features)
        out[label] = {
            "in_sample": fitted["accuracy"],
            "out_of_fold": cross_validate(rows, folds, features),
            "fit": fitted,
        }
    keep = out[labels[0]]["out_of_fold"] > out[labels[1]]["out_of_fold"]
    out["kept"] = labels[0] if keep else labels[1]
    return out


def stage1_with_and_without(rows, folds: int = 5) -> dict:
    """In-sample and out-of-fold accuracy with every feature and without the checkable
    signal: the signal is kept only when it raises out-of-fold accuracy."""
    without = tuple(f for f in STAGE1 if f != "signal")
    labels = ("with_signal", "without_signal")
    return _with_and_without(
        rows, STAGE1, without, fit_stage1, cross_validated_stage1, labels, folds
    )


NAME_FILE_GRID = (0.0, 0.5, 1.0, 2.0, 3.0, 4.0)


def _name_right(row, lm, sim, bm, file, unfillable) -> bool:
    fused = {
        n: lm * v["lm"]
        + sim * v["similarity"]
        + bm * v["bm25"]
        + file * v.get("file", 0.0)
        - (0.0 if v.get("fillable", True) else unfillable)
        for n, v in row["tools"].items()
    }
    return max(fused, key=fused.get) == row["want"]


def fit_names(rows, file_grid=NAME_FILE_GRID, unfillable: float = 3.0):
    """A grid over the name stage's weights (the unfillable penalty held at the profile's);
    ties go to the weights nearest the middle of the grid, and to the smaller file weight."""
    cases = [r for r in rows if r.get("tools")]
    best = None
    for lm in (0.0, 0.1, 0.2, 0.3, 0.5, 1.0):
        for sim in (0.0, 2.0, 5.0, 10.0, 20.0):
            for bm in (0.0, 0.5, 1.0, 2.0, 4.0):
                for file in file_grid:
                    right = sum(_name_right(r, lm, sim, bm, file, unfillable) for r in cases)
                    key = (
                        right,
                        -abs(lm - 0.3) - abs(sim - 5) / 10 - abs(bm - 1) / 4 - file / 100,
                    )
                    if best is None or key > best[0]:
                        best = (
                            key,
                            {
                                "name_lm_weight": lm,
                                "name_similarity_weight": sim,
                                "name_bm25_weight": bm,
                                "name_file_weight": file,
                                "accuracy": right / max(1, len(cases)),
                            },
                        )
    return best[1]


def cross_validated_names(rows, folds: int = 5, file_grid=NAME_FILE_GRID, unfillable=3.0):
    """Accuracy of the name stage on held-out development cases (k-fold, file order)."""
    cases = [r for r in rows if r.get("tools")]
    right = 0
    for fold in range(folds):
        train = [r for i, r in enumerate(cases) if i % folds != fold]
        test = [r for i, r in enumerate(cases) if i % folds == fold]
        fit = fit_names(train, file_grid, unfillable)
        weights = (
            fit["name_lm_weight"],
            fit["name_similarity_weight"],
            fit["name_bm25_weight"],
            fit["name_file_weight"],
        )
        right += sum(_name_right(r, *weights, unfillable) for r in test)
    return right / max(1, len(cases))


def names_with_and_without(rows, folds: int = 5, unfillable: float = 3.0) -> dict:
    """In-sample and out-of-fold accuracy of the name stage with and without the named-file
    feature: it is kept only when it raises out-of-fold accuracy."""
    out = {}
    for label, grid in (("with_file", NAME_FILE_GRID), ("without_file", (0.0,))):
        fit = fit_names(rows, grid, unfillable)
        out[label] = {
            "in_sample": fit["accuracy"],
            "out_of_fold": cross_validated_names(rows, folds, grid, unfillable),
            "fit": fit,
        }
    keep = out["with_file"]["out_of_fold"] > out["without_file"]["out_of_fold"]
    out["kept"] = "with_file" if keep else "without_file"
    return out


def fit_values(rows):
    params = [a for r in rows for a in r.get("args", []) if any(a["right"])]
    best = None
    for weight in (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0):
        right = sum(
            a["right"][
                max(
                    range(len(a["scores"])),
                    key=lambda i: a["scores"][i] + weight * math.log(max(1, a["lengths"][i])),
                )
            ]
            for a in params
        )
        if best is None or right > best[0]:
            best = (right, weight)
    return {
        "value_length_weight": best[1],
        "accuracy": best[0] / max(1, len(params)),
        "parameters": len(params),
    }


CONTINUE = ("lm", "pending", "listed", "later", "cued", "again")
CONTINUE_WEIGHTS = (
    "continue_lm_weight",
    "continue_clause_weight",
    "continue_list_weight",
    "continue_later_weight",
    "continue_cue_weight",
    "continue_again_weight",
)


def _continue_xy(cases, features=CONTINUE):
    x = np.array([[float(r["continue"].get(f, 0.0)) for f in features] for r in cases])
    y = np.array([1.0 if r["calls"] > 1 else 0.0 for r in cases])
    return x, y


def fit_continue(rows, features=CONTINUE):
    """Logistic regression of "the case expects more than one call" on the continue
    evidence (weights and bias, as for stage 1; a feature left out gets weight 0)."""
    cases = [r for r in rows if "continue" in r]
    x, y = _continue_xy(cases, features)
    w_raw, bias = _logistic(x, y)
    accuracy = float((((x @ w_raw + bias) > 0) == (y > 0.5)).mean())
    weights = dict.fromkeys(CONTINUE_WEIGHTS, 0.0)
    weights.update(
        {
            CONTINUE_WEIGHTS[CONTINUE.index(f)]: float(w)
            for f, w in zip(features, w_raw, strict=True)
        }
    )
    return {
        **weights,
        "continue_bias": bias,
        "accuracy": accuracy,
        "cases": len(cases),
        "multi_call_cases": int(y.sum()),
    }


def cross_validated_continue(rows, folds: int = 5, features=CONTINUE) -> float:
    """Accuracy of the another-call decision on held-out cases (k-fold, in order)."""
    cases = [r for r in rows if "continue" in r]
    right = 0
    for fold in range(folds):
        train = [r for i, r in enumerate(cases) if i % folds != fold]
        test = [r for i, r in enumerate(cases) if i % folds == fold]
        if not test or not train:
            continue
        fit = fit_continue(train, features)
        x, y = _continue_xy(test, features)
        w = np.array([fit[CONTINUE_WEIGHTS[CONTINUE.index(f)]] for f in features])
        right += int((((x @ w + fit["continue_bias"]) > 0) == (y > 0.5)).sum())
    return right / max(1, len(cases))


def continue_with_and_without(rows, folds: int = 5, left_out=("again",)) -> dict:
    """In-sample and out-of-fold accuracy of the another-call decision with every feature
    and without ``left_out`` (the newest: ``again``, a word that asks again; before it
    ``later`` and ``cued``, the values stated later): they are kept only when they raise
    out-of-fold accuracy."""
    without = tuple(f for f in CONTINUE if f not in left_out)
    labels = (f"with_{left_out[0]}", f"without_{left_out[0]}")
    return _with_and_without(
        rows, CONTINUE, without, fit_continue, cross_validated_continue, labels, folds
    )


def refit_rows(path: Path, categories: list[str]) -> list[dict]:
    """The rows of an earlier ``--continue-bfcl`` run with ``later`` and ``cued`` computed
    again from each row's stored arguments (the model's evidence is kept as it was), as the
    engine computes them (``later_values`` and ``sibling_values``)."""
    from lokal.bench.bfcl_data import load_split
    from lokal.llm.staged.candidates import asks_again, cued_again, later_values, sibling_values

    entries = {e["id"]: e for category in categories for e in load_split(category, "dev")}
    questions = {k: last_user_text(e["question"][0]) for k, e in entries.items()}
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["id"] not in questions:
            continue
        question, made = questions[row["id"]], row.get("args") or []
        values = later_values(question, made, [f["name"] for f in entries[row["id"]]["function"]])
        values += [v for v in sibling_values(question, made) if v not in values]
        row["continue"]["later"] = 1.0 if values else 0.0
        row["continue"]["cued"] = 1.0 if values and cued_again(question, made, values) else 0.0
        row["continue"]["again"] = 1.0 if values and asks_again(question) else 0.0
        rows.append(row)
    return rows


def collect_bfcl_continue(profile, categories: list[str], limit: int | None = None):
    """The another-call evidence on BFCL's development split (positions that are multiples
    of 5, never the evaluation split): the engine fills the first expected call as it would,
    then scores another call; the label is whether BFCL expects more than one."""
    from lokal.bench.bfcl_data import load_split

    backend = get_backend(profile)
    neutral = StagedSettings(lm_weight=1.0, name_lm_weight=1.0)
    rows = []
    for category in categories:
        for entry in load_split(category, "dev", limit=limit):
            truth = entry.get("ground_truth") or []
            if not truth:
                continue
            tools = tool_specs(entry["function"])
            case = {"messages": entry["question"][0]}
            engine, _, _ = _engine(backend, profile, case, tools, neutral)
            wanted = next(iter(truth[0]))
            tool = engine.tools.get(wanted) or engine.tools.get(wanted.replace(".", "_"))
            if tool is None:
                continue
            schema = args_schema(tool, engine.question, engine.settings, optional="mentioned")
            evidence, args = _continue_after_first_call(engine, tool, schema)
            row = {"id": entry["id"], "calls": len(truth), "continue": evidence, "args": args}
            rows.append(row)
            print(f"  {entry['id']:28s} calls={len(truth)} {row['continue']}", flush=True)
    return rows


STAGE1_BFCL_CAP = None  # every question of the development split (live_multiple has 211)


def collect_bfcl_stage1(profile, categories: list[str], limit: int | None = STAGE1_BFCL_CAP):
    """The answer-or-call evidence on BFCL's development split (positions that are multiples
    of 5, never the evaluation split): one scoring of the two openings per question, the
    first ``limit`` of each category; the label is whether BFCL expects a call (every
    category but the irrelevance ones)."""
    from lokal.bench.bfcl_checker import is_irrelevance
    from lokal.bench.bfcl_data import load_split

    backend = get_backend(profile)
    neutral = StagedSettings(lm_weight=1.0, name_lm_weight=1.0)
    rows = []
    for category in categories:
        for entry in load_split(category, "dev", limit=limit):
            tools = tool_specs(entry["function"])
            case = {"messages": entry["question"][0]}
            engine, _, _ = _engine(backend, profile, case, tools, neutral)
            stage1 = engine.call_margin()
            row = {
                "id": entry["id"],
                "source": category,
                "call": not is_irrelevance(category),
                "results": False,
                **{f: stage1[f] for f in ("lm", "similarity", "bm25", "signal")},
                "blocked": engine.answer_instead() is not None,
            }
            rows.append(row)
            print(
                f"  {entry['id']:28s} call={row['call']} lm={row['lm']:+.2f} "
                f"sim={row['similarity']:.2f} bm25={row['bm25']:.2f}",
                flush=True,
            )
    return rows


E2E_QUESTIONS = {"tasks": "data/dev/e2e_tasks.json", "pairs": "data/dev/e2e_pairs.json"}


def run_tools(model_config: str, workspace: str, skills: str):
    """The tools and system prompt ``lokal run`` decides with (the same for every question;
    preselection then picks among them per question; the options of
    ``benchmarks/run_tasks.py``: the workspace, the skills and their tools, memory's
    ``remember``), built by ``lokal run``'s own code, with an empty memory and no document
    index (as run_tasks has in its fresh ``$LOKAL_HOME``)."""
    import tempfile

    from lokal.cli import build_parser
    from lokal.cli.run import build_agent

    with tempfile.TemporaryDirectory() as empty:
        argv = ["run", "-", "--workspace", workspace, "--skills", skills, "--quiet"]
        argv += ["--no-trace", "--model_config", model_config, "--memory_dir", empty]
        argv += ["--store_path", str(Path(empty) / "no-index.db")]
        agent = build_agent(build_parser().parse_args(argv))
        return tool_specs(list(agent.registry)), agent.system_prompt


def collect_e2e_stage1(
    profile,
    model_config: str = "configs/model.yaml",
    limit: int | None = None,
    sources=E2E_QUESTIONS,
    workspace: str = "data/workspace",
    skills: str = "data/skills",
):
    """The answer-or-call evidence of lokal's development end-to-end questions (the tasks
    and the paraphrase pairs; the first ``limit`` of each), decided with the tools and the
    system prompt ``lokal run`` has for them (``run_tools``: the skills' tools included,
    preselected as the run does): a call is expected when the task expects a tool."""
    backend = get_backend(profile)
    neutral = StagedSettings(lm_weight=1.0, name_lm_weight=1.0)
    tools, system = run_tools(model_config, workspace, skills)
    rows = []
    for source, path in sources.items():
        data = json.loads(Path(path).read_text("utf-8"))
        for task in (data if isinstance(data, list) else data["tasks"])[:limit]:
            messages = [{"role": "user", "content": task["question"]}]
            if system:
                messages.insert(0, {"role": "system", "content": system})
            engine, _, _ = _engine(backend, profile, {"messages": messages}, tools, neutral)
            stage1 = engine.call_margin()
            rows.append(
                {
                    "id": task["id"],
                    "source": source,
                    "call": bool(task.get("expect_tools")),
                    "results": False,
                    **{f: stage1[f] for f in ("lm", "similarity", "bm25", "signal")},
                    "blocked": engine.answer_instead() is not None,
                }
            )
    return rows


def _stage1_group(row) -> str:
    source = row.get("source", "lokal")
    if source in ("lokal", *E2E_QUESTIONS):
        return "lokal" if source == "lokal" else f"lokal {source}"
    return "BFCL call" if row["call"] else "BFCL no call"


def _stage1_right(row, weights: dict) -> bool:
    """Whether the decision as the engine makes it is right: a call when the margin is
    positive and no filter after stage 1 turns it into an answer (``blocked``:
    ``StagedEngine.answer_instead``)."""
    margin = weights["call_bias"] + sum(
        weights[STAGE1_WEIGHTS[i]] * float(row.get(f, 0.0)) for i, f in enumerate(STAGE1)
    )
    return (margin > 0 and not row.get("blocked")) == bool(row["call"])


def _by_group(rows, right: list[bool]) -> dict:
    out: dict[str, list[int]] = {}
    for row, ok in zip(rows, right, strict=True):
        for group in ("all", _stage1_group(row)):
            got = out.setdefault(group, [0, 0])
            got[0] += int(ok)
            got[1] += 1
    return out


def sign_test(better: int, worse: int) -> float:
    """The two-sided exact sign test of ``better`` against ``worse`` (the cases on which two
    decisions disagree): how likely so uneven a split is when neither is better."""
    n = better + worse
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(max(better, worse), n + 1)) / 2**n
    return min(1.0, 2 * tail)


BIAS_SHIFTS = (-1.0, -0.5, 0.0, 0.5, 1.0, 1.5)
BIAS_GRID = (-0.5, -0.4, -0.3, -0.2, -0.1, 0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0)


def bias_out_of_fold(rows, configured: dict, folds: int = 5) -> dict:
    """The configured weights with only the bias moved, the move chosen on the other folds
    (the best of ``BIAS_GRID``; the smallest on a tie) and scored on the held-out one: how
    much a re-centred threshold gains on cases it was not chosen on."""
    right = 0
    picks = []

    def correct(subset, shift):
        moved = {**configured, "call_bias": configured["call_bias"] + shift}
        return sum(_stage1_right(r, moved) for r in subset)

    for fold in range(folds):
        train = [r for i, r in enumerate(rows) if i % folds != fold]
        test = [r for i, r in enumerate(rows) if i % folds == fold]
        best = max(BIAS_GRID, key=lambda shift: (correct(train, shift), -abs(shift)))
        picks.append(best)
        right += correct(test, best)
    return {
        "out_of_fold": right,
        "of": len(rows),
        "shifts": picks,
        "configured": correct(rows, 0.0),
    }


def stage1_transfer(rows, staged: StagedSettings, folds: int = 5) -> dict:
    """Whether the answer-or-call weights (fitted on lokal's cases) transfer to BFCL's
    development split: their accuracy per group; a refit on every row, in-sample and
    out-of-fold (folds in row order), compared case by case with the configured weights (a
    sign test on the cases where the two disagree: the refit replaces every weight, so it is
    kept only when out-of-fold accuracy rises beyond chance, p < 0.05); and the configured
    weights with the bias moved (what calling more often costs in the no-call questions). The
    refit learns from the rows no filter after stage 1 blocks (``blocked``)."""
    configured = {w: float(getattr(staged, w)) for w in (*STAGE1_WEIGHTS, "call_bias")}
    now = [_stage1_right(r, configured) for r in rows]
    # the refit learns from the rows its margin decides: a blocked row is an answer whatever
    # the weights say
    fitted = fit_stage1([r for r in rows if not r.get("blocked")])
    held_out = [False] * len(rows)
    for fold in range(folds):
        train = [r for i, r in enumerate(rows) if i % folds != fold and not r.get("blocked")]
        weights = fit_stage1(train)
        for i, row in enumerate(rows):
            if i % folds == fold:
                held_out[i] = _stage1_right(row, weights)
    better = sum(h and not c for h, c in zip(held_out, now, strict=True))
    worse = sum(c and not h for h, c in zip(held_out, now, strict=True))
    p = sign_test(better, worse)
    curve = {}
    for shift in BIAS_SHIFTS:
        moved = {**configured, "call_bias": configured["call_bias"] + shift}
        curve[shift] = _by_group(rows, [_stage1_right(r, moved) for r in rows])
    return {
        "configured": _by_group(rows, now),
        "bias_out_of_fold": bias_out_of_fold(rows, configured, folds),
        "refit_in_sample": _by_group(rows, [_stage1_right(r, fitted) for r in rows]),
        "refit_out_of_fold": _by_group(rows, held_out),
        "refit": {k: round(v, 3) for k, v in fitted.items() if k != "accuracy"},
        "refit_better": better,
        "refit_worse": worse,
        "sign_test_p": p,
        "kept": "refit" if better > worse and p < 0.05 else "configured",
        "bias_curve": curve,
    }


def _groups_line(groups: dict) -> str:
    return ", ".join(
        f"{g} {groups[g][0]}/{groups[g][1]} ({100 * groups[g][0] / groups[g][1]:.1f} %)"
        for g in ("all", "lokal", "lokal tasks", "lokal pairs", "BFCL call", "BFCL no call")
        if g in groups
    )


ADDED_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0)


def _added_accuracy(rows, staged: StagedSettings, feature: str, weight: float) -> float:
    if not rows:  # a fold of a handful of cases may hold none
        return 0.0
    weights = np.array([getattr(staged, w) for w in CONTINUE_WEIGHTS])
    weights[CONTINUE.index(feature)] = weight
    x, y = _continue_xy(rows)
    return float((((x @ weights + staged.continue_bias) > 0) == (y > 0.5)).mean())


def added_weight(rows, staged: StagedSettings, feature: str = "again", folds: int = 5) -> dict:
    """One new feature's weight on top of the configured another-call weights (the others
    kept as they are): in-sample accuracy for each weight of ``ADDED_GRID``, and the
    out-of-fold accuracy of choosing it (the smallest best weight of the training folds,
    scored on the held-out fold)."""
    cases = [r for r in rows if "continue" in r]
    in_sample = {w: _added_accuracy(cases, staged, feature, w) for w in ADDED_GRID}
    right, chosen = 0.0, []
    for fold in range(folds):
        train = [r for i, r in enumerate(cases) if i % folds != fold]
        test = [r for i, r in enumerate(cases) if i % folds == fold]
        best = max(ADDED_GRID, key=lambda w: (_added_accuracy(train, staged, feature, w), -w))
        chosen.append(best)
        right += _added_accuracy(test, staged, feature, best) * len(test)
    best = max(ADDED_GRID, key=lambda w: (in_sample[w], -w))
    return {
        "feature": feature,
        "without": in_sample[0.0],
        "in_sample": in_sample,
        "out_of_fold": right / max(1, len(cases)),
        "chosen_per_fold": chosen,
        "weight": best,
    }


CONTINUE_SHIFTS = (-1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0)


def continue_bias_curve(rows, staged: StagedSettings) -> dict[float, dict[str, list[int]]]:
    """The configured another-call decision with its bias moved by each of
    ``CONTINUE_SHIFTS``: per shift, [right, cases] for the questions that expect several
    calls ("several") and for those that expect one ("one"). What making a second call
    more often buys in the first, and costs in the second."""
    cases = [r for r in rows if "continue" in r]
    if not cases:
        return {}
    weights = np.array([getattr(staged, w) for w in CONTINUE_WEIGHTS])
    x, y = _continue_xy(cases)
    margin = x @ weights + staged.continue_bias
    several = y > 0.5
    curve = {}
    for shift in CONTINUE_SHIFTS:
        more = margin + shift > 0
        curve[shift] = {
            "several": [int((more & several).sum()), int(several.sum())],
            "one": [int((~more & ~several).sum()), int((~several).sum())],
        }
    return curve


def _report_compared(rows, compared: dict, out: Path, stage: str, labels) -> None:
    """Write one stage's evidence (``features_<stage>.jsonl``) and comparison
    (``<stage>.json``), and print in-sample and out-of-fold accuracy with and without the
    feature, and the weights kept."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / f"features_{stage}.jsonl").open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    (out / f"{stage}.json").write_text(json.dumps(compared, indent=2) + "\n", "utf-8")
    for label in labels:
        got = compared[label]
        print(
            f"{label}: in-sample {100 * got['in_sample']:.1f} %, out-of-fold "
            f"{100 * got['out_of_fold']:.1f} %"
        )
    kept = compared[compared["kept"]]["fit"]
    print(f"kept: {compared['kept']}")
    print("staged:", json.dumps({k: round(v, 3) for k, v in kept.items() if k != "accuracy"}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model_config", default="configs/model.yaml")
    parser.add_argument("--profile", default=None)
    parser.add_argument("--cases", default="data/dev/cases")
    parser.add_argument("--tools", default="data/dev/tools_lokal_run.json")
    parser.add_argument("--out", default="outputs/calibration")
    parser.add_argument("--limit", type=int, default=None, help="the first N cases only")
    parser.add_argument(
        "--stage1",
        action="store_true",
        help="answer or call only: in-sample and out-of-fold accuracy with and without the "
        "checkable signals (one scoring per case, minutes instead of an hour)",
    )
    parser.add_argument(
        "--names",
        action="store_true",
        help="answer or call and which tool only: the name stage's in-sample and out-of-fold "
        "accuracy with and without the named-file feature (name_file_weight)",
    )
    parser.add_argument(
        "--continue-bfcl",
        default=None,
        metavar="CATEGORIES",
        help="another call only, on BFCL's development split of these categories "
        "(comma-separated): in-sample and out-of-fold accuracy with and without 'later'",
    )
    parser.add_argument(
        "--stage1-bfcl",
        default=None,
        metavar="CATEGORIES",
        help="answer or call on lokal's cases and BFCL's development split of these "
        "categories (all of each, or the first --limit): whether the "
        "configured weights transfer, a refit on every row, the bias curve",
    )
    parser.add_argument(
        "--features",
        default=None,
        help="with --continue-bfcl or --stage1-bfcl: refit on the rows of an earlier run "
        "(its features_continue.jsonl or features_stage1_bfcl.jsonl; for another call "
        "'later' and 'cued' are recomputed from the stored arguments); no model run",
    )
    args = parser.parse_args(argv)
    profile = load_profile(args.model_config, args.profile, tool_calling="staged")
    if args.continue_bfcl:
        categories = [c.strip() for c in args.continue_bfcl.split(",") if c.strip()]
        if args.features:
            rows = refit_rows(Path(args.features), categories)
        else:
            rows = collect_bfcl_continue(profile, categories, args.limit)
        compared = continue_with_and_without(rows)
        _report_compared(
            rows, compared, Path(args.out), "continue", ("with_again", "without_again")
        )
        # what configs/model.yaml keeps: ``again`` added to the weights fitted before it
        added = added_weight(rows, profile.tool_calling.staged)
        (Path(args.out) / "continue_added.json").write_text(
            json.dumps(added, indent=2) + "\n", "utf-8"
        )
        grid = ", ".join(f"{w:g}: {100 * a:.1f} %" for w, a in added["in_sample"].items())
        print(f"configured weights + again, in-sample by weight: {grid}")
        print(
            f"configured weights + again: out-of-fold {100 * added['out_of_fold']:.1f} % "
            f"(without: {100 * added['without']:.1f} %), weight {added['weight']:g}"
        )
        curve = continue_bias_curve(rows, profile.tool_calling.staged)
        (Path(args.out) / "continue_curve.json").write_text(
            json.dumps({str(k): v for k, v in curve.items()}, indent=2) + "\n", "utf-8"
        )
        print(
            "another call, configured weights, bias moved by: "
            + "; ".join(
                f"{k:+g}: several {v['several'][0]}/{v['several'][1]}, "
                f"one {v['one'][0]}/{v['one'][1]}"
                for k, v in curve.items()
            )
        )
        return 0
    cases = load_cases(args.cases)[: args.limit]
    tools = json.loads(Path(args.tools).read_text(encoding="utf-8"))
    if args.stage1_bfcl:
        return _stage1_bfcl(args, profile, cases, tools)
    print(f"collecting evidence on {len(cases)} development cases ({profile.name})", flush=True)
    rows = collect(profile, cases, tools, stage1_only=args.stage1, names_only=args.names)
    if args.names:
        unfillable = profile.tool_calling.staged.name_unfillable_weight
        compared = names_with_and_without(rows, unfillable=unfillable)
        _report_compared(rows, compared, Path(args.out), "names", ("with_file", "without_file"))
        return 0
    if args.stage1:
        compared = stage1_with_and_without(rows)
        _report_compared(
            rows, compared, Path(args.out), "stage1", ("with_signal", "without_signal")
        )
        return 0
    compared = stage1_with_and_without(rows)
    kept = compared[compared["kept"]]
    fit = {
        "stage1": {**kept["fit"], "accuracy_5fold": kept["out_of_fold"]},
        "stage1_compared": {
            k: {"in_sample": v["in_sample"], "out_of_fold": v["out_of_fold"]}
            for k, v in compared.items()
            if k != "kept"
        },
        "stage1_kept": compared["kept"],
        "names": fit_names(rows),
        "values": fit_values(rows),
        "continue": fit_continue(rows),
        "recall_at_k": sum(r["recall"] for r in rows if r["call"])
        / max(1, sum(r["call"] for r in rows)),
        "k": profile.tool_calling.preselect_k,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "features.jsonl").open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    (out / "fit.json").write_text(json.dumps(fit, indent=2) + "\n", encoding="utf-8")
    staged = {
        **{k: round(v, 3) for k, v in fit["stage1"].items() if not k.startswith("accuracy")},
        **{k: v for k, v in fit["names"].items() if k != "accuracy"},
        "value_length_weight": fit["values"]["value_length_weight"],
        **{k: round(v, 3) for k, v in fit["continue"].items() if k.startswith("continue_")},
    }
    print(json.dumps(fit, indent=2))
    print("staged:", json.dumps(staged))
    return 0


def _stage1_bfcl(args, profile, cases, tools) -> int:
    """``--stage1-bfcl``: collect (or read) the answer-or-call rows, report the transfer."""
    if args.features:
        rows = [json.loads(line) for line in Path(args.features).read_text("utf-8").splitlines()]
    else:
        categories = [c.strip() for c in args.stage1_bfcl.split(",") if c.strip()]
        rows = collect(profile, cases, tools, stage1_only=True)
        for row in rows:
            row["source"] = "lokal"
            for key in ("offered", "recall", "calls"):
                row.pop(key, None)
        rows += collect_bfcl_stage1(profile, categories, args.limit or STAGE1_BFCL_CAP)
        rows += collect_e2e_stage1(profile, args.model_config, args.limit)
    report = stage1_transfer(rows, profile.tool_calling.staged)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "features_stage1_bfcl.jsonl").open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    (out / "stage1_bfcl.json").write_text(json.dumps(report, indent=2) + "\n", "utf-8")
    print(f"configured weights: {_groups_line(report['configured'])}")
    print(f"refit, in-sample: {_groups_line(report['refit_in_sample'])}")
    print(f"refit, out-of-fold: {_groups_line(report['refit_out_of_fold'])}")
    print(
        f"refit against configured: {report['refit_better']} better, "
        f"{report['refit_worse']} worse (sign test p = {report['sign_test_p']:.2f}); "
        f"kept: {report['kept']}"
    )
    print("refit staged:", json.dumps(report["refit"]))
    moved = report["bias_out_of_fold"]
    print(
        f"bias moved, chosen on the other folds: out-of-fold {moved['out_of_fold']}/{moved['of']} "
        f"(configured {moved['configured']}/{moved['of']}); moves chosen {moved['shifts']}"
    )
    for shift, groups in report["bias_curve"].items():
        print(f"bias {shift:+.1f}: {_groups_line(groups)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
