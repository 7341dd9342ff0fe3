"""Budgets (issue 18, parts 4 and 5): a constrained reply fits its token budget, a cut-off
reply is reported as cut off, and every decision ends within its time budget."""

import itertools
import json
import time

import pytest
from jsonschema import Draft202012Validator

from helpers import MODEL_CONFIG, basic_tools
from lokal.config import GenerationSettings, load_profile
from lokal.errors import BackendDeadline
from lokal.llm import grammar
from lokal.llm.backends import Completion, GenerationRequest
from lokal.llm.backends.scripted import ScriptedBackend
from lokal.llm.decide import generate_ai_message
from lokal.llm.staged import ANSWER_OPENING, CALL_OPENING, StagedEngine, capped
from lokal.records import ERROR_KINDS
from lokal.tools.schema import tool_specs

# a BFCL-like tool: an array of strings, a nested object, a float, an enum
LIST_TOOL = {
    "name": "classify_queries",
    "description": "Classify a list of queries.",
    "parameters": {
        "type": "object",
        "properties": {
            "queries": {"type": "array", "items": {"type": "string"}},
            "options": {
                "type": "object",
                "properties": {"label": {"type": "string"}, "weight": {"type": "number"}},
            },
            "mode": {"type": "string", "enum": ["fast", "thorough"]},
        },
        "required": ["queries"],
    },
}
TOOLS = tool_specs([*basic_tools(), LIST_TOOL])
BUDGETS = (192, 256, 384, 512, 1024, 2048)


def longest(schema):
    text = grammar.longest_text(schema)
    # it is an instance of the schema: the grammar allows this reply
    Draft202012Validator(schema).validate(json.loads(text))
    return text


@pytest.mark.parametrize("plan", [False, True])
@pytest.mark.parametrize("budget", BUDGETS)
def test_the_longest_reply_the_grammar_allows_fits_the_token_budget(budget, plan):
    schema = grammar.reply_schema(TOOLS, plan=plan, max_new_tokens=budget)
    text = longest(schema)
    assert grammar.estimate_tokens(text) + grammar.RESERVE_TOKENS <= budget
    max_string, _, max_calls = grammar.fit_bounds(TOOLS, budget, plan=plan)
    assert max_string >= grammar.MIN_STRING and max_calls >= 1


def test_bounds_grow_with_the_budget_up_to_the_profile_limits():
    bounds = [grammar.fit_bounds(TOOLS, b) for b in BUDGETS]
    for smaller, larger in itertools.pairwise(bounds):
        assert larger[2] >= smaller[2]  # calls
        assert larger[1] >= smaller[1]  # answer length
    assert bounds[-1] == (128, 512, 4)  # 2048 tokens: the profile's own bounds


def test_the_fixed_bounds_of_before_did_not_fit_256_tokens():
    # the failure of issue 18: four plan steps with 128-character descriptions
    old = grammar.reply_schema(TOOLS, plan=True, max_string=128, max_calls=4)
    assert grammar.estimate_tokens(longest(old)) > 4 * 256
    new = grammar.reply_schema(TOOLS, plan=True, max_new_tokens=256)
    assert grammar.estimate_tokens(longest(new)) <= 256


def test_an_answer_and_a_staged_value_fit_their_budgets():
    for budget in (48, 256):
        answer = grammar.reply_schema([], max_new_tokens=budget)
        assert grammar.estimate_tokens(longest(answer)) <= budget
    value = grammar.fit_schema(
        LIST_TOOL["parameters"]["properties"]["queries"], 48, max_string=128, max_items=4
    )
    assert grammar.estimate_tokens(longest(value)) <= 48


def test_the_estimate_counts_digits_as_tokens():
    assert grammar.estimate_tokens("1234") == 4
    assert grammar.estimate_tokens("abcd") == 2


# -- a reply cut off at the limit -------------------------------------------------------

# cut off inside the first call: repaired, it would be a table_analyzer call without `path`
CUT_CALL = '{"tool_calls": [{"name": "table_analyzer", "args": {"operation": "summary", "column'
CUT_PLAN = (
    '{"reasoning": "read the table", "plan": [{"step": 1, "description": "summarise the '
    'table", "tool_call": {"name": "table_analyzer", "args": {"operation": "summary", "col'
)


def constrained(**changes):
    return load_profile(MODEL_CONFIG).with_tool_calling(
        **{"mode": "constrained", "preselect_k": None, "max_retries": 0, **changes}
    )


def cut(text):
    return Completion(text=text, completion_tokens=256, finish_reason="length")


def test_a_cut_off_call_is_reported_as_cut_off_not_as_invalid_arguments():
    messages = [{"role": "user", "content": "Summarise data/sales.csv"}]
    # the same text, ended by the model: repaired into a call that lacks `path`
    stopped = generate_ai_message(
        constrained(),
        messages,
        basic_tools(),
        backend=ScriptedBackend([Completion(CUT_CALL, 10, 20, "stop")]),
    )
    assert stopped.error.type == "invalid_arguments"
    result = generate_ai_message(
        constrained(), messages, basic_tools(), backend=ScriptedBackend([cut(CUT_CALL)])
    )
    assert result.status == "error" and result.error.type == "bad_reply"
    assert "cut off" in result.error.message and "256" in result.error.message
    assert result.tool_calls == []


def test_a_cut_off_plan_is_reported_as_cut_off():
    result = generate_ai_message(
        constrained(),
        [{"role": "user", "content": "Summarise data/sales.csv"}],
        basic_tools(),
        strategy="plan_execute",
        backend=ScriptedBackend([cut(CUT_PLAN)]),
    )
    assert result.purpose == "plan"
    assert result.error.type == "bad_reply" and "cut off" in result.error.message


def test_a_cut_off_reply_is_retried_with_the_reason():
    whole = '{"tool_calls": [{"name": "table_analyzer", "args": {"path": "data/sales.csv"}}]}'
    backend = ScriptedBackend([cut(CUT_CALL), whole])
    result = generate_ai_message(
        constrained(max_retries=1),
        [{"role": "user", "content": "Summarise data/sales.csv"}],
        basic_tools(),
        backend=backend,
    )
    assert result.ok and result.tool_calls[0]["args"] == {"path": "data/sales.csv"}
    assert result.attempts[0].error.type == "bad_reply"
    assert "cut off" in backend.requests[1].messages[-1]["content"]


def test_the_constrained_request_carries_the_fitted_bounds():
    backend = ScriptedBackend(['{"content": "hi"}'])
    generate_ai_message(
        constrained(),
        [{"role": "user", "content": "hello"}],
        basic_tools(),
        backend=backend,
    )
    schema = backend.requests[0].response_schema
    assert grammar.estimate_tokens(longest(schema)) <= 256


# -- every decision ends within a budget ------------------------------------------------

NEUTRAL = {
    "lm_weight": 1.0,
    "similarity_weight": 0.0,
    "call_bias": 0.0,
    "name_lm_weight": 1.0,
    "name_similarity_weight": 0.0,
    "name_bm25_weight": 0.0,
    "value_length_weight": 0.0,
    "continue_lm_weight": 1.0,
    "continue_clause_weight": 0.0,
    "continue_list_weight": 0.0,
    "continue_bias": 0.0,
    "generated_values": False,
}
READ_TOOL = {
    "name": "read",
    "description": "Read a file.",
    "parameters": {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    },
}


def staged(**changes):
    staged_settings = {**NEUTRAL, **changes.pop("staged", {})}
    return load_profile(MODEL_CONFIG).with_tool_calling(
        mode="staged", preselect_k=None, max_retries=1, staged=staged_settings, **changes
    )


def test_errors_have_a_timeout_kind():
    assert "timeout" in ERROR_KINDS


def test_a_slow_decision_ends_with_timeout_and_the_calls_found_so_far():
    def score(prefix, continuation):
        if prefix.count('{"name": "') >= 2:
            time.sleep(0.4)  # the second call is slow
        if continuation.startswith(CALL_OPENING):
            return 0.0
        if continuation.startswith(ANSWER_OPENING):
            return -5.0
        if continuation.startswith(", {"):
            return 0.0  # open another call
        if continuation.startswith("]}"):
            return -5.0
        return -1.0 if "a.txt" in continuation else -3.0

    backend = ScriptedBackend([], scorer=score)
    result = generate_ai_message(
        staged(decision_budget_s=0.3),
        [{"role": "user", "content": "Read a.txt, then read b.txt"}],
        [READ_TOOL],
        backend=backend,
    )
    assert result.status == "error" and result.error.type == "timeout"
    assert "decision_budget_s" in result.error.message
    assert len(result.attempts) == 1  # no retry after the budget is spent
    record = result.to_dict()
    assert record["partial"]["tool_calls"] == [{"name": "read", "args": {"path": "a.txt"}}]
    assert "call 2" in record["partial"]["stage"]
    assert record["attempts"][0]["staged"]["choice"] == "call"
    assert result.latency_ms < 3000


def test_no_retry_is_started_after_the_budget():
    def slow(request):
        time.sleep(0.3)
        return '{"content": "<your answer>"}'  # a placeholder: retried while time remains

    result = generate_ai_message(
        constrained(max_retries=3, decision_budget_s=0.2),
        [{"role": "user", "content": "hello"}],
        basic_tools(),
        backend=ScriptedBackend([slow, slow, slow, slow]),
    )
    assert result.error.type == "timeout" and "placeholder" in result.error.message
    assert len(result.attempts) == 1
    assert result.to_dict()["partial"]["last_error"]["type"] == "bad_reply"


def test_no_budget_means_no_limit():
    assert load_profile(MODEL_CONFIG).tool_calling.decision_budget_s == 60
    profile = staged(decision_budget_s=None)
    result = generate_ai_message(
        profile,
        [{"role": "user", "content": "Read a.txt"}],
        [READ_TOOL],
        backend=ScriptedBackend(
            [], scorer=lambda p, c: 0.0 if c.startswith((CALL_OPENING, "]}")) else -2.0
        ),
    )
    assert result.ok


def long_question(words=400):
    filler = " ".join(f"word{i}" for i in range(words))
    return f"Please read 'notes/final report.txt' and then look at {filler} and end.txt"


def test_candidates_per_value_are_bounded_for_a_very_long_question():
    question = long_question()
    assert len(question) > 3000
    settings = staged().tool_calling
    engine = StagedEngine(
        ScriptedBackend([], scorer=lambda p, c: 0.0),
        GenerationRequest(messages=[], settings=GenerationSettings()),
        tool_specs([READ_TOOL]),
        None,
        settings,
        purpose="decide",
        has_results=False,
        question=question,
    )
    values = engine.value_candidates({"type": "string"}, [])
    assert len(values) == settings.staged.max_candidates == 48
    assert "notes/final report.txt" in values  # quoted passages are kept
    assert "word0" in values and "word40" in values  # single words over a long stretch
    engine._param_name = "path"
    paths = engine.value_candidates({"type": "string"}, [])
    assert "end.txt" in paths  # a path parameter takes the path shapes, wherever they are


def test_a_long_question_scores_a_bounded_number_of_continuations():
    backend = ScriptedBackend(
        [], scorer=lambda p, c: 0.0 if c.startswith((CALL_OPENING, "]}")) else -2.0
    )
    result = generate_ai_message(
        staged(parallel_calls=False),
        [{"role": "user", "content": long_question()}],
        [
            {
                **READ_TOOL,
                "parameters": {
                    **READ_TOOL["parameters"],
                    "properties": {"q": {"type": "string"}},
                    "required": ["q"],
                },
            }
        ],
        backend=backend,
    )
    assert result.ok
    per_prefix = {}
    for prefix, continuations in backend.scored:
        per_prefix[prefix] = per_prefix.get(prefix, 0) + len(continuations)
    assert max(per_prefix.values()) <= 48
    assert result.attempts[0].staged["candidates_capped"] > 400


def test_capped_keeps_quoted_then_short_in_order():
    values = ["a b c", "x", "quoted one here", "y z", "w"]
    assert capped(values, 3, {"quoted one here"}) == ["x", "quoted one here", "w"]
    assert capped(values, 10) == values
    # a name counts as one word (BFCL parallel_multiple_150, development split)
    names = ["the movies", "actor", "Leonardo DiCaprio", "starred", "in the year"]
    assert capped(names, 3) == ["actor", "Leonardo DiCaprio", "starred"]


def test_a_generation_gets_only_the_tokens_the_time_left_allows():
    def score(prefix, continuation):
        time.sleep(0.05)
        if continuation.startswith((CALL_OPENING, "]}")):
            return 0.0
        return -1.0 if "a.txt" in continuation else -5.0

    def reply(request):
        if request.settings.max_new_tokens < 256:  # shortened: the limit cuts it
            return Completion('{"content": "a long', 5, request.settings.max_new_tokens, "length")
        return Completion('{"content": "hi"}', 5, 3, "stop")

    backend = ScriptedBackend([reply], scorer=score)
    # a call to read a.txt, which already succeeded: the reply becomes a generated answer,
    # after scoring that measured the time per step (the question asks for a next step,
    # so the engine scores another call before it answers)
    call = {"id": "call_001", "name": "read", "args": {"path": "a.txt"}}
    done = json.dumps({"status": "success", "output": "text", "error": None})
    result = generate_ai_message(
        staged(decision_budget_s=0.6, parallel_calls=False),
        [
            {"role": "user", "content": "Read a.txt, then tell me what it says."},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_001", "name": "read", "content": done},
        ],
        [READ_TOOL],
        backend=backend,
    )
    assert backend.requests[0].settings.max_new_tokens < 256
    assert result.error.type == "timeout" and "shortened" in result.error.message
    assert result.to_dict()["partial"]["stage"].startswith("answer")


class StoppedInsideAStep(ScriptedBackend):
    """A fake of a backend that stops inside a step at the request's deadline (what
    llama.cpp's abort callback does; tests/llm/test_llamacpp_backend.py checks the real
    one): scoring for the second call would take 5 s, and is stopped at the deadline."""

    def score(self, request, continuations):
        if request.prefix.count('{"name": "') >= 2:
            assert request.deadline is not None
            time.sleep(min(5.0, max(0.0, request.deadline - time.perf_counter())))
            raise BackendDeadline("stopped at the request's deadline")
        return super().score(request, continuations)


def opens_two_reads(prefix, continuation):
    if continuation.startswith((CALL_OPENING, ", {")):
        return 0.0
    if continuation.startswith((ANSWER_OPENING, "]}")):
        return -5.0
    return -1.0 if "a.txt" in continuation else -3.0


def test_a_step_under_way_at_the_budget_is_stopped_and_ends_the_decision():
    backend = StoppedInsideAStep([], scorer=opens_two_reads)
    before = time.perf_counter()
    result = generate_ai_message(
        staged(decision_budget_s=1.0),
        [{"role": "user", "content": "Read a.txt, then read b.txt"}],
        [READ_TOOL],
        backend=backend,
    )
    elapsed = time.perf_counter() - before
    assert result.error.type == "timeout" and "inside a model step" in result.error.message
    record = result.to_dict()
    assert record["partial"]["tool_calls"] == [{"name": "read", "args": {"path": "a.txt"}}]
    # the hard deadline is just inside the budget (the engine's own checks stop earlier)
    assert elapsed < 5.0 and result.latency_ms < 1000 + 500
    assert backend.scored  # the first call's steps ran before the stopped one


def test_one_reply_stopped_by_the_backend_is_a_timeout():
    def stopped(request):
        assert request.deadline is not None and request.deadline > time.perf_counter()
        raise BackendDeadline("stopped at the request's deadline")

    result = generate_ai_message(
        constrained(max_retries=2, decision_budget_s=5.0),
        [{"role": "user", "content": "hello"}],
        basic_tools(),
        backend=ScriptedBackend([stopped, stopped, stopped]),
    )
    assert result.error.type == "timeout" and "decision_budget_s" in result.error.message
    assert len(result.attempts) == 1  # not retried: the budget is spent
    assert result.to_dict()["partial"]["stage"] == "reply"


def test_without_a_budget_requests_carry_no_deadline():
    backend = ScriptedBackend(['{"content": "hi"}'])
    generate_ai_message(
        constrained(decision_budget_s=None),
        [{"role": "user", "content": "hello"}],
        basic_tools(),
        backend=backend,
    )
    assert backend.requests and all(r.deadline is None for r in backend.requests)
