"""The BFCL AST scorer against hand-checked verdicts and BFCL's own data."""

from __future__ import annotations

import json

import pytest

from helpers import REPO
from lokal.bench.bfcl import _real_name, bfcl_system_prompt, decode_pythonic, run_bfcl, score
from lokal.bench.bfcl_checker import check, standardize_string
from lokal.bench.bfcl_data import AST_CATEGORIES, load_category
from lokal.config import load_profile

VERDICTS = json.loads((REPO / "tests" / "data" / "bfcl_verdicts.json").read_text("utf-8"))


def test_verdicts_cover_the_categories():
    assert len(VERDICTS) >= 40
    categories = {v["category"] for v in VERDICTS}
    assert {
        "simple_python",
        "multiple",
        "parallel",
        "parallel_multiple",
        "irrelevance",
    } <= categories
    assert all(v["reason"] for v in VERDICTS)


@pytest.mark.parametrize("verdict", VERDICTS, ids=[v["reason"][:60] for v in VERDICTS])
def test_hand_checked_verdict(verdict):
    correct, reason = check(
        verdict["category"], verdict["functions"], verdict["decoded"], verdict["ground_truth"]
    )
    assert correct is verdict["expected"], reason
    assert (reason is None) is correct


def test_standardize_string_follows_bfcl():
    assert standardize_string("April 1, 2024") == standardize_string("april 1,2024")
    assert standardize_string("New-York_City.*^/") == "newyorkcity"
    assert standardize_string("it's") == 'it"s'


def _pick(value):
    """A possible answer made concrete: dict answers hold lists of allowed values per key."""
    if isinstance(value, dict):
        picked = {k: next((x for x in v if x != ""), None) for k, v in value.items()}
        return {k: _pick(v) for k, v in picked.items() if v is not None}
    if isinstance(value, list):
        return [_pick(item) if isinstance(item, dict) else item for item in value]
    return value


def _first_answer(ground_truth, functions=()):
    """A decoded output: the first possible value of each param, optional ones left out."""
    decoded = []
    for answer in ground_truth:
        name, params = next(iter(answer.items()))
        function = next((f for f in functions if f["name"] == name), {})
        required = set((function.get("parameters") or {}).get("required") or [])
        args = {}
        for param, values in params.items():
            chosen = next((v for v in values if v != ""), None)
            if chosen is not None and ("" not in values or param in required):
                args[param] = _pick(chosen)
        decoded.append({name: args})
    return decoded


def test_relevance_and_irrelevance_follow_bfcl_runner():
    """BFCL's relevance runner: irrelevance passes with no call (prose or an undecodable
    reply both decode to none), relevance passes with any call at all."""
    functions = [{"name": "f", "parameters": {"type": "dict", "properties": {}}}]
    assert check("irrelevance", functions, [], None) == (True, None)
    assert not check("live_irrelevance", functions, [{"f": {}}], None)[0]
    assert check("live_relevance", functions, [{"g": {"x": 1}}], None) == (True, None)
    assert not check("live_relevance", functions, [], None)[0]
    assert not check("live_relevance", functions, [{}], None)[0]


@pytest.mark.parametrize("category", [c for c in AST_CATEGORIES if "relevance" not in c])
def test_ground_truth_itself_is_correct(category):
    for entry in load_category(category, 25):
        decoded = _first_answer(entry["ground_truth"], entry["function"])
        correct, reason = check(category, entry["function"], decoded, entry["ground_truth"])
        assert correct, (entry["id"], reason)
        if "parallel" in category and len(decoded) > 1:
            assert check(category, entry["function"], decoded[::-1], entry["ground_truth"])[0]


def test_decode_pythonic_bfcl_format():
    assert decode_pythonic('[f(a=1, b="x"), math.sqrt(x=[1.5, 2])]') == [
        {"f": {"a": 1, "b": "x"}},
        {"math.sqrt": {"x": [1.5, 2]}},
    ]
    assert decode_pythonic("f(a={'k': True})") == [{"f": {"a": {"k": True}}}]
    assert decode_pythonic("```python\n[g(x=None)]\n```") == [{"g": {"x": None}}]
    assert decode_pythonic("[]") == []
    for bad in ("The answer is 4.", "[f(1)]", "[f(a=__import__('os'))]", "[1, 2]"):
        with pytest.raises(ValueError):
            decode_pythonic(bad)


def test_sanitised_names_map_back():
    functions = [{"name": "math.factorial"}, {"name": "plain"}]
    assert _real_name("math_factorial", functions) == "math.factorial"
    assert _real_name("plain", functions) == "plain"
    assert _real_name("other", functions) == "other"


def test_bfcl_prompt_is_read_from_the_package():
    template = bfcl_system_prompt()
    assert "You are an expert in composing functions." in template
    assert "{functions}" in template
    assert "[func_name1(params_name1=params_value1" in template


def test_run_and_score_do_not_depend_on_concurrency():
    def runner(pipeline, entry):
        decoded = (
            [] if pipeline == "bfcl-prompt" else _first_answer(entry.get("ground_truth") or [])
        )
        return {"decoded": decoded, "raw_text": "", "valid": True, "latency_ms": 1.0}

    profile = load_profile(REPO / "configs" / "model.yaml", "mock")
    runs = [
        run_bfcl(
            profile,
            ["simple_python", "parallel", "irrelevance"],
            ["bfcl-prompt", "constrained"],
            limit=4,
            concurrency=n,
            runner=runner,
        )
        for n in (1, 4)
    ]
    assert runs[0] == runs[1]
    assert [r["pipeline"] for r in runs[0]] == ["bfcl-prompt"] * 12 + ["constrained"] * 12
    scores = score(runs[0])["pipelines"]
    assert scores["constrained"]["categories"]["simple_python"]["accuracy"] == 100.0
    assert scores["constrained"]["categories"]["irrelevance"]["accuracy"] == 100.0
    assert scores["bfcl-prompt"]["categories"]["simple_python"]["accuracy"] == 0.0
    assert scores["bfcl-prompt"]["categories"]["irrelevance"]["accuracy"] == 100.0


def test_results_are_written_as_they_finish_and_a_run_resumes(tmp_path):
    """A run that stops midway keeps every scored line; --resume runs only the rest."""
    from helpers import MODEL_CONFIG
    from lokal.bench.bfcl import read_results, run_bfcl
    from lokal.config import load_profile

    profile = load_profile(MODEL_CONFIG)
    results = tmp_path / "results.jsonl"
    seen = []

    def flaky(pipeline, entry):
        seen.append(entry["id"])
        if len(seen) == 3:
            raise KeyboardInterrupt  # the run is stopped by hand
        return {"decoded": [], "raw_text": "no", "valid": True}

    with pytest.raises(KeyboardInterrupt):
        run_bfcl(profile, ["irrelevance"], ["staged"], limit=5, runner=flaky, results_path=results)
    kept = read_results(results)
    stopped = seen[2]
    assert sorted(r["id"] for r in kept) == sorted(i for i in seen if i != stopped)
    with results.open("a", encoding="utf-8") as handle:
        handle.write('{"id": "half a line')  # the line in flight when the process died

    again = []

    def steady(pipeline, entry):
        again.append(entry["id"])
        return {"decoded": [], "raw_text": "no", "valid": True}

    rows = run_bfcl(
        profile,
        ["irrelevance"],
        ["staged"],
        limit=5,
        runner=steady,
        results_path=results,
        resume=True,
    )
    assert len(rows) == 5 and all(r["correct"] for r in rows)
    done = {r["id"] for r in kept}
    assert stopped in again and not done & set(again)  # only the missing questions ran
    assert len(read_results(results)) == 5

    # resuming with other categories keeps the rows of the first ones in the file
    rows = run_bfcl(
        profile,
        ["live_irrelevance"],
        ["staged"],
        limit=2,
        runner=steady,
        results_path=results,
        resume=True,
    )
    assert [r["category"] for r in rows] == ["live_irrelevance"] * 2
    categories = [r["category"] for r in read_results(results)]
    assert categories.count("irrelevance") == 5 and categories.count("live_irrelevance") == 2
    # and so does writing the scores of the resumed categories, as `lokal bfcl` does after
    # the run (it rewrote results.jsonl with the resumed categories' rows alone)
    from lokal.bench.bfcl import write_scores

    write_scores(tmp_path, rows, ["live_irrelevance"], {"split": "all"})
    categories = [r["category"] for r in read_results(results)]
    assert categories.count("irrelevance") == 5 and categories.count("live_irrelevance") == 2
    assert [r["id"] for r in read_results(results)][:2] == [r["id"] for r in rows]


def test_an_undecodable_irrelevance_reply_passes_as_bfcl_scores_it(tmp_path):
    from helpers import MODEL_CONFIG
    from lokal.bench.bfcl import run_bfcl
    from lokal.config import load_profile

    rows = run_bfcl(
        load_profile(MODEL_CONFIG),
        ["irrelevance", "live_relevance"],
        ["bfcl-prompt"],
        limit=2,
        runner=lambda p, e: {"decoded": [], "raw_text": "[broken(", "valid": False},
    )
    irrelevance = [r for r in rows if r["category"] == "irrelevance"]
    relevance = [r for r in rows if r["category"] == "live_relevance"]
    assert all(r["correct"] for r in irrelevance)
    assert not any(r["correct"] for r in relevance)


def test_the_score_names_the_longest_decision_of_each_category():
    rows = [
        {
            "pipeline": "staged",
            "category": "parallel",
            "id": f"parallel_{i}",
            "correct": True,
            "valid": True,
            "latency_ms": latency,
        }
        for i, latency in enumerate([120.0, 4500.5, 300.0])
    ]
    cat = score(rows)["pipelines"]["staged"]["categories"]["parallel"]
    assert cat["latency_ms_max"] == 4500.5
    assert cat["longest_id"] == "parallel_1"
    assert cat["latency_ms_mean"] == round((120.0 + 4500.5 + 300.0) / 3, 1)
