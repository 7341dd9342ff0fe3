"""Staged decisions with a scripted backend that reports log-probabilities: each stage picks
the branch the scores favour; a backend that cannot score gets one grammar per reply."""

import json

import pytest

from helpers import DATA, MODEL_CONFIG, basic_tools
from lokal.config import load_profile
from lokal.llm.backends import Completion
from lokal.llm.backends.scripted import ScriptedBackend
from lokal.llm.decide import generate_ai_message
from lokal.llm.staged import ANSWER_OPENING, CALL_OPENING
from lokal.llm.staged.candidates import (
    asks_again,
    bare_ordinals,
    clauses,
    column_cue,
    compound_heads,
    counted_items,
    cued_again,
    date_form,
    in_date_form,
    later_values,
    mentioned_topic,
    named_switch,
    names_a_person,
    names_parameter,
    opening_part,
    sibling_values,
    singular_names,
    stated_conditions,
    states_a_period,
    states_a_secret,
    states_any,
    takes_a_condition,
    text_numbers,
    text_spans,
    waiting_values,
    wants_a_period,
    wants_a_person_name,
    wants_a_secret,
    wants_numbers,
    whole_names,
)

NEUTRAL = {
    "lm_weight": 1.0,
    "similarity_weight": 0.0,
    "call_bias": 0.0,
    "results_bias": 0.0,
    "name_lm_weight": 1.0,
    "name_similarity_weight": 0.0,
    "name_bm25_weight": 0.0,
    "value_length_weight": 0.0,
    "continue_bias": 0.0,
    "generated_values": False,
}


COUNT_TOOL = {
    "name": "count_letter_in_string",
    "description": "Count a letter in a text.",
    "parameters": {
        "type": "object",
        "properties": {"text": {"type": "string"}, "letter": {"type": "string"}},
        "required": ["text", "letter"],
    },
}


def staged_profile(**staged):
    return load_profile(MODEL_CONFIG).with_tool_calling(
        mode="staged", preselect_k=None, max_retries=1, staged={**NEUTRAL, **staged}
    )


def scorer(table):
    """A scorer from {continuation prefix: log-probability}; the longest matching key wins,
    anything else scores -20."""

    def score(prefix, continuation):
        matches = [k for k in table if continuation.startswith(k)]
        return table[max(matches, key=len)] if matches else -20.0

    return score


def tool_of(name: str, description: str, **types: str) -> dict:
    """A tool whose parameters (``name="type"``) are all required."""
    return {
        "name": name,
        "description": description,
        "parameters": {
            "type": "object",
            "properties": {param: {"type": kind} for param, kind in types.items()},
            "required": list(types),
        },
    }


def ask(question, backend, profile=None, tools=None):
    return generate_ai_message(
        profile or staged_profile(),
        [{"role": "user", "content": question}],
        basic_tools() if tools is None else tools,
        backend=backend,
    ).to_dict()


def test_answer_or_call_follows_the_likelier_opening():
    wants_call = ScriptedBackend(
        scorer=scorer({CALL_OPENING: -1.0, ANSWER_OPENING: -3.0, "calculator": -0.1, '"2 + 2"': -1})
    )
    result = ask("What is 2 + 2?", wants_call)
    assert result["status"] == "success" and result["tool_calling"] == "staged"
    assert result["ai_message"]["tool_calls"][0]["name"] == "calculator"
    assert result["ai_message"]["tool_calls"][0]["args"] == {"expression": "2 + 2"}
    stage = result["attempts"][0]["staged"]
    assert stage["choice"] == "call" and stage["answer_or_call"]["lm"] == pytest.approx(2.0)

    wants_answer = ScriptedBackend(
        ['{"content": "4"}'], scorer=scorer({CALL_OPENING: -3.0, ANSWER_OPENING: -1.0})
    )
    result = ask("What is 2 + 2?", wants_answer)
    assert result["ai_message"] == {"role": "assistant", "content": "4", "tool_calls": []}
    assert wants_answer.requests[0].response_schema["required"] == ["content"]
    assert wants_answer.scored == [("", [CALL_OPENING, ANSWER_OPENING])]


def test_the_bias_moves_the_decision():
    backend = ScriptedBackend(
        ['{"content": "hello"}'],
        scorer=scorer({CALL_OPENING: -1.0, ANSWER_OPENING: -1.5}),
    )
    result = ask("Hi!", backend, profile=staged_profile(call_bias=-1.0))
    assert result["ai_message"]["content"] == "hello"
    assert result["attempts"][0]["staged"]["answer_or_call"]["margin"] == pytest.approx(-0.5)


def test_the_tool_name_is_the_likeliest_one():
    backend = ScriptedBackend(
        scorer=scorer(
            {
                CALL_OPENING: 0.0,
                ANSWER_OPENING: -5.0,
                "file_reader": -4.0,
                "local_file_search": -0.5,
                "calculator": -3.0,
                "table_analyzer": -6.0,
                '"budget"': -0.2,
            }
        )
    )
    result = ask("Find the files about budget.", backend)
    call = result["ai_message"]["tool_calls"][0]
    assert call["name"] == "local_file_search" and call["args"] == {"query": "budget"}
    names = result["attempts"][0]["staged"]["calls"][0]["scores"]
    assert max(names, key=lambda n: names[n]["fused"]) == "local_file_search"


def test_a_chinese_search_looks_for_the_topic_not_the_whole_request():
    # development task z01_search: the query was the whole clause
    # "在工作区里找出提到团队出游的文件", which no English file holds; its topic is 团队出游
    # (lokal.glosses.chinese_topic), and 文件 ("file") is what the tool searches, no topic
    question = "在工作区里找出提到团队出游的文件。"
    table = {
        CALL_OPENING: 0.0,
        ANSWER_OPENING: -9.0,
        "local_file_search": -0.5,
        '"在工作区里找出提到团队出游的文件"': 0.0,
        '"文件"': 0.0,
        '"团队出游"': -3.0,
    }
    result = ask(question, ScriptedBackend(scorer=scorer(table)))
    call = result["ai_message"]["tool_calls"][0]
    assert call["name"] == "local_file_search" and call["args"] == {"query": "团队出游"}


@pytest.mark.parametrize(
    ("question", "topic"),
    [
        (
            "Find the file that mentions the quarterly review and tell me when it is.",
            "quarterly review",
        ),
        ("Which files in the workspace mention widget?", "widget"),
        ("Is there a file in the workspace that talks about the weather in London?", "weather"),
        ('Find files containing the word "budget".', "budget"),
        ("Search for documents that refer to Project X in the docs folder", "Project X"),
        ("What is 2 + 2?", None),
    ],
)
def test_what_a_file_is_asked_to_mention(question, topic):
    assert mentioned_topic(question) == topic


@pytest.mark.parametrize(
    ("question", "conditions"),
    [
        ("Show the rows of data/sales.csv where the region is West.", ['region == "West"']),
        ("List rows with units above 10.", ["units > 10"]),
        ("rows whose price is at least 7.25", ["price >= 7.25"]),
        ("the rows where product is not Widget", ['product != "Widget"']),
        ("houses having a rating of at least 4", ["rating >= 4"]),
        ("rows where region is North America", ['region == "North America"']),
        # no comparison of a word, no "of" as a condition
        ("Give me a list of synthetic locations.", []),
        ("rows where units are above West", []),
    ],
)
def test_conditions_stated_in_words(question, conditions):
    assert stated_conditions(question) == conditions


def test_a_filter_takes_the_condition_the_question_states():
    # development task m06: "Show the rows of data/sales.csv where the region is West."
    # passed filter="region", which the tool refused
    assert takes_a_condition("filter", {}) and not takes_a_condition("where_to", {})
    question = "Show the rows of data/sales.csv where the region is West."
    table = {
        CALL_OPENING: 0.0,
        ANSWER_OPENING: -9.0,
        "table_analyzer": 0.0,
        '"data/sales.csv"': 0.0,
        '"filter"': 0.0,
        '"region"': -0.5,
        '"region == \\"West\\""': -6.0,
    }
    tools = [t for t in basic_tools() if t["function"]["name"] == "table_analyzer"]
    result = ask(question, ScriptedBackend(scorer=scorer(table)), tools=tools)
    args = result["ai_message"]["tool_calls"][0]["args"]
    assert args["filter"] == 'region == "West"'


def test_a_search_looks_for_what_the_file_is_asked_to_mention():
    # development task m13: "Find the file that mentions the quarterly review and tell me
    # what time it starts." searched for "time" (the likelier word) and found the intro
    question = "Find the file that mentions the quarterly review and tell me what time it starts."
    table = {
        CALL_OPENING: 0.0,
        ANSWER_OPENING: -9.0,
        "local_file_search": -0.5,
        '"time"': -1.0,
        '"review"': -1.2,
        '"quarterly review"': -4.0,
    }
    result = ask(question, ScriptedBackend(scorer=scorer(table)))
    call = result["ai_message"]["tool_calls"][0]
    assert call["name"] == "local_file_search" and call["args"] == {"query": "quarterly review"}


def test_argument_values_are_spans_of_the_question_chosen_by_likelihood():
    tools = [COUNT_TOOL]

    def score(prefix, continuation):
        if prefix.endswith('"text": '):
            return scorer({'"mississippi"': -1.0, '"s"': -1.5})(prefix, continuation)
        if prefix.endswith('"letter": '):
            return scorer({'"mississippi"': -1.0, '"s"': -0.5})(prefix, continuation)
        return scorer({CALL_OPENING: 0.0, ANSWER_OPENING: -9.0})(prefix, continuation)

    backend = ScriptedBackend(scorer=score)
    result = ask("How many s are in mississippi?", backend, tools=tools)
    assert result["ai_message"]["tool_calls"][0]["args"] == {"text": "mississippi", "letter": "s"}
    # the value already given to `text` is offered last for `letter`
    letter_round = next(c for p, c in backend.scored if p.endswith('"letter": '))
    assert letter_round[-1].startswith('"mississippi"')
    assert not backend.requests, "no value was generated: every one was scored"


def test_enum_and_boolean_values_are_the_only_candidates():
    tools = [
        {
            "name": "set_mode",
            "description": "Set the mode.",
            "parameters": {
                "type": "object",
                "properties": {
                    "mode": {"type": "string", "enum": ["fast", "safe"]},
                    "verbose": {"type": "boolean"},
                },
                "required": ["mode", "verbose"],
            },
        }
    ]
    backend = ScriptedBackend(
        scorer=scorer({CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, '"safe"': -0.1, "false": -0.1})
    )
    result = ask("switch to the careful mode", backend, tools=tools)
    assert result["ai_message"]["tool_calls"][0]["args"] == {"mode": "safe", "verbose": False}
    rounds = {p.rsplit('"', 2)[-2]: c for p, c in backend.scored if p.endswith(": ")}
    assert [c.split(",")[0].rstrip("}]") for c in rounds["mode"]] == ['"fast"', '"safe"']
    assert [c.split(",")[0].rstrip("}]") for c in rounds["verbose"]] == ["true", "false"]


def test_optional_parameters_the_question_does_not_mention_are_left_out():
    backend = ScriptedBackend(
        scorer=scorer({CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "file_reader": 0.0, '"a.txt"': 0})
    )
    result = ask("read a.txt", backend)
    assert result["ai_message"]["tool_calls"][0]["args"] == {"path": "a.txt"}

    backend = ScriptedBackend(
        scorer=scorer({CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "file_reader": 0.0, "50": 0.0})
    )
    result = ask("read a.txt, at most 50 max chars", backend)
    assert result["ai_message"]["tool_calls"][0]["args"]["max_chars"] == 50


TABLE_QUESTIONS = {
    # what users asked (issue 20): the words that ask for an operation without naming it
    "Using data/sales.csv, what is the total units sold per region?": "groupby",
    "Use table_analyzer to group data/sales.csv by region and sum the units": "groupby",
    "Which row of data/sales.csv has the highest units?": "topk",
}


@pytest.mark.parametrize("question, operation", TABLE_QUESTIONS.items())
def test_an_operation_the_question_asks_for_in_its_own_words_is_chosen(question, operation):
    from lokal.llm.staged import args_schema
    from lokal.skills.builtin import builtin_tools

    (table,) = [t for t in builtin_tools(DATA / "workspace") if t.name == "table_analyzer"]
    kept = set(args_schema(table, question, staged_profile().tool_calling)["properties"])
    # the operation, and the parameters whose description names it, are offered
    assert {"path", "operation", "column"} <= kept
    assert ("group_by" in kept) == (operation == "groupby")
    assert "filter" not in kept
    # the model prefers "summary" by far; the cue still puts the asked operation first
    backend = ScriptedBackend(
        ["3"] * 4,  # a value with no candidate in the question (k) is generated
        scorer=scorer(
            {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "table_analyzer": 0.0, '"summary"': 0.0}
        ),
    )
    result = ask(question, backend, tools=[table.to_openai()])
    assert result["ai_message"]["tool_calls"][0]["args"]["operation"] == operation


def test_a_file_question_that_names_no_file_is_a_search_not_a_read():
    # "Which file in the workspace mentions the quarterly review?" called file_reader("file")
    def score(prefix, continuation):
        table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "file_reader": -0.5}
        table["local_file_search"] = -1.0
        return scorer(table)(prefix, continuation)

    profile = staged_profile(name_lm_weight=1.0, name_unfillable_weight=3.0)
    question = "Which file in the workspace mentions the quarterly review?"
    result = ask(question, ScriptedBackend(scorer=score), profile)
    assert result["ai_message"]["tool_calls"][0]["name"] == "local_file_search"
    scores = result["attempts"][0]["staged"]["calls"][0]["scores"]
    assert scores["file_reader"]["fillable"] is False
    # a question that names a file reads it
    result = ask("Read notes.txt and tell me the date", ScriptedBackend(scorer=score), profile)
    assert result["ai_message"]["tool_calls"][0]["name"] == "file_reader"


def test_a_named_file_lifts_the_tools_that_take_a_path():
    # "According to docs/agent_guide.md, what is the calculator for?" called the calculator:
    # the model (here the scripted name scores) prefers the tool the question talks about
    def score(prefix, continuation):
        table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "calculator": -0.2}
        table["file_reader"] = -1.5
        return scorer(table)(prefix, continuation)

    question = "According to docs/agent_guide.md, what is the calculator for?"
    # (the calculator is unfillable here, nothing to compute: that weight is another test's)
    alone = {"name_unfillable_weight": 0.0}
    without = ask(
        question, ScriptedBackend(scorer=score), staged_profile(name_file_weight=0.0, **alone)
    )
    assert without["ai_message"]["tool_calls"][0]["name"] == "calculator"
    profile = staged_profile(name_file_weight=2.0, **alone)
    result = ask(question, ScriptedBackend(scorer=score), profile)
    assert result["ai_message"]["tool_calls"][0]["name"] == "file_reader"
    scores = result["attempts"][0]["staged"]["calls"][0]["scores"]
    assert scores["file_reader"]["file"] == 1.0 and scores["calculator"]["file"] == 0.0
    # no file named: the weight does nothing
    result = ask("What is the calculator for?", ScriptedBackend(scorer=score), profile)
    assert result["ai_message"]["tool_calls"][0]["name"] == "calculator"


def test_summary_questions_keep_the_default_operation():
    from lokal.llm.staged import args_schema
    from lokal.skills.builtin import builtin_tools

    (table,) = [t for t in builtin_tools(DATA / "workspace") if t.name == "table_analyzer"]
    kept = args_schema(table, "Summarize data/sales.csv", staged_profile().tool_calling)
    assert list(kept["properties"]) == ["path"]


def test_another_call_only_while_continuing_is_likelier():
    state = {"continues": 0}

    def score(prefix, continuation):
        if continuation == ', {"name": "':
            state["continues"] += 1
            return 0.0 if state["continues"] == 1 else -9.0
        if continuation == "]}":
            return -1.0
        table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "calculator": 0.0}
        if '"expression": ' in prefix and "2 + 2" not in prefix:
            table['"2 + 2"'] = 0.0
        else:
            table['"3 * 3"'] = 0.0
        return scorer(table)(prefix, continuation)

    backend = ScriptedBackend(scorer=score)
    result = ask("Compute 2 + 2 and 3 * 3", backend)
    calls = result["ai_message"]["tool_calls"]
    assert [c["args"]["expression"] for c in calls] == ["2 + 2", "3 * 3"]
    assert [c["id"] for c in calls] == ["call_001", "call_002"]


def test_identical_calls_are_merged():
    def score(prefix, continuation):
        if continuation == ', {"name": "':
            return 0.0 if prefix.count("calculator") < 2 else -9.0
        if continuation == "]}":
            return -1.0
        return scorer({CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "calculator": 0, '"2 + 2"': 0})(
            prefix, continuation
        )

    result = ask("Compute 2 + 2", ScriptedBackend(scorer=score))
    assert len(result["ai_message"]["tool_calls"]) == 1
    assert result["parse"]["merged_duplicates"] == 1


def test_parallel_calls_off_means_one_call():
    profile = staged_profile().with_tool_calling(parallel_calls=False)
    backend = ScriptedBackend(
        scorer=scorer({CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "calculator": 0, ', {"name": "': 5})
    )
    result = ask("Compute 2 + 2", backend, profile=profile)
    assert len(result["ai_message"]["tool_calls"]) == 1
    assert all(c != [', {"name": "', "]}"] for _, c in backend.scored)


def test_a_backend_that_cannot_score_gets_one_grammar_per_reply():
    backend = ScriptedBackend(
        [json.dumps({"tool_calls": [{"name": "calculator", "args": {"expression": "1+1"}}]})]
    )
    result = ask("1+1?", backend)
    assert result["status"] == "success"
    assert result["tool_calling"] == "constrained" and "cannot score" in result["fallback"]
    schema = backend.requests[0].response_schema
    assert "anyOf" in schema  # the whole reply envelope: answer or calls


def test_a_placeholder_answer_is_retried_with_the_reason():
    backend = ScriptedBackend(
        ['{"content": "<your answer>"}', '{"content": "It is 4."}'],
        scorer=scorer({CALL_OPENING: -5.0, ANSWER_OPENING: 0.0}),
    )
    result = ask("2+2?", backend)
    assert result["status"] == "success" and result["ai_message"]["content"] == "It is 4."
    first = result["attempts"][0]
    assert first["error"]["type"] == "bad_reply" and "placeholder" in first["error"]["message"]
    corrective = backend.requests[1].messages[-1]["content"]
    assert "placeholder" in corrective
    # a copied text is retried with a repeat penalty as well
    assert backend.requests[1].settings.repeat_penalty >= 1.15


def test_an_answer_cut_off_twice_is_an_error_not_a_success():
    cut = Completion(text='{"content": "la la la la', finish_reason="length", completion_tokens=256)
    backend = ScriptedBackend([cut, cut], scorer=scorer({CALL_OPENING: -5.0, ANSWER_OPENING: 0.0}))
    result = ask("Sing", backend)
    assert result["status"] == "error"
    assert result["error"]["type"] in ("bad_reply", "parse_error")
    assert len(result["attempts"]) == 2


def test_a_plan_with_no_steps_is_a_parse_error():
    empty = json.dumps({"reasoning": "nothing to do", "plan": []})
    profile = load_profile(MODEL_CONFIG).with_tool_calling(mode="prompt_json", max_retries=0)
    result = generate_ai_message(
        profile,
        [{"role": "user", "content": "Read a.txt"}],
        basic_tools(),
        strategy="plan_execute",
        backend=ScriptedBackend([empty]),
    ).to_dict()
    assert result["status"] == "error" and result["error"]["type"] == "parse_error"
    assert "no step" in result["error"]["message"]


def test_spans_and_numbers_of_a_question():
    spans = text_spans("How many r's are in strawberry?")
    assert "strawberry" in spans and "r" in spans and "in" not in spans
    assert "17 * 23 + 4" in text_spans("What is 17 * 23 + 4?")
    assert "bob@example.com" in text_spans("Email bob@example.com now.")
    assert text_numbers("Convert 1,250.5 euros, then 3 more") == [1250.5, 3]
    # a name in the possessive is offered without it (BFCL simple_python_290, dev split)
    assert "The Weeknd" in text_spans("When is The Weeknd's concert happening?")


def test_a_call_that_already_succeeded_in_this_turn_becomes_an_answer():
    # "then check it": a next step is asked for, so the engine tries a call (without it, it
    # answers at once: test_once_the_calls_succeeded_a_question_without_a_next_step_is_answered);
    # no other tool is on offer to pass over to
    call = {"id": "call_001", "name": "calculator", "args": {"expression": "2 + 2"}}
    messages = [
        {"role": "user", "content": "Work out 2 + 2, then check it."},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {
            "role": "tool",
            "tool_call_id": "call_001",
            "name": "calculator",
            "status": "success",
            "content": json.dumps({"status": "success", "output": {"result": 4}, "error": None}),
        },
    ]
    backend = ScriptedBackend(
        ['{"content": "It is 4."}'],
        scorer=scorer({CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "calculator": 0, '"2 + 2"': 0}),
    )
    calculator = [t for t in basic_tools() if t["function"]["name"] == "calculator"]
    result = generate_ai_message(staged_profile(), messages, calculator, backend=backend)
    result = result.to_dict()
    assert result["ai_message"]["content"] == "It is 4."
    staged = result["attempts"][0]["staged"]
    assert staged["choice"] == "answer" and staged["calls"][0]["repeat_of_a_done_call"]


def test_an_answer_that_ignores_the_results_is_retried_then_extracted_from_them():
    call = {
        "id": "call_001",
        "name": "count_letter_in_string",
        "args": {"text": "abba", "letter": "b"},
    }
    messages = [
        {"role": "user", "content": "How many b are in abba?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {
            "role": "tool",
            "tool_call_id": "call_001",
            "name": "count_letter_in_string",
            "status": "success",
            "content": json.dumps(
                {"status": "success", "output": {"text": "abba", "letter": "b", "count": 2}}
            ),
        },
    ]
    tools = [COUNT_TOOL]
    backend = ScriptedBackend(
        ['{"content": "It is a palindrome."}', '{"content": "A nice word."}'],
        scorer=scorer({CALL_OPENING: -9.0, ANSWER_OPENING: 0.0}),
    )
    result = generate_ai_message(staged_profile(), messages, tools, backend=backend).to_dict()
    first = result["attempts"][0]["error"]["message"]
    assert "does not use the tool results" in first and "2" in first
    assert "count: 2" in backend.requests[0].messages[-1]["content"]  # the evidence shown
    # the model's answer is not kept with the results appended: the passage that answers
    # is the answer, said once, with where it came from, and marked as extracted
    assert result["status"] == "success" and result["parse"]["answer_source"] == "extracted"
    assert result["ai_message"]["content"] == "count: 2\n\n(quoted from count_letter_in_string)"
    assert result["parse"]["model_failed"]["type"] == "bad_reply"
    assert "From the tool results" not in result["ai_message"]["content"]


def test_array_bounds_come_from_the_question():
    from lokal.llm.staged import args_schema
    from lokal.llm.staged.candidates import list_bound
    from lokal.tools.schema import ToolSpec

    question = "What is the average of [12, 15, 18, 20, 21, 26, 30]?"
    assert list_bound(question, 4) == 7  # a constant 4 cut this list (issue 21)
    assert list_bound("hi", 4) == 4  # never below the profile's floor
    assert list_bound("sum " + " ".join(map(str, range(500))), 4) == 64  # nor above the cap
    average = ToolSpec(
        "average",
        "mean of numbers",
        {
            "type": "object",
            "properties": {"numbers": {"type": "array", "items": {"type": "number"}}},
            "required": ["numbers"],
        },
    )
    schema = args_schema(average, question, staged_profile().tool_calling)
    assert schema["properties"]["numbers"]["maxItems"] == 7
    capped = ToolSpec(
        "average",
        "mean",
        {"type": "object", "properties": {"n": {"type": "array", "maxItems": 3}}},
    )
    schema = args_schema(capped, question + " n", staged_profile().tool_calling)
    assert schema["properties"]["n"]["maxItems"] == 3  # the schema's own bound still holds


REMEMBER_TOOL = {
    "name": "remember",
    "description": "Save a short note to long-term memory, to be recalled in later conversations.",
    "parameters": {
        "type": "object",
        "properties": {"note": {"type": "string", "description": "the fact, in one sentence."}},
        "required": ["note"],
    },
}


@pytest.mark.slow
def test_the_memory_tool_is_held_back_when_the_request_does_not_ask_to_keep_anything():
    # the paraphrase pairs' "Write a one-line thank-you note to Tom" saved a note; here the
    # scripted model would call `remember` whenever it is on offer
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "remember": 0.0, '"': -1.0}
    question = "Write a one-line thank-you note to Tom."
    backend = ScriptedBackend(["Thank you, Tom!"], scorer=scorer(table))
    result = ask(question, backend, tools=[REMEMBER_TOOL])
    assert result["ai_message"]["tool_calls"] == []
    assert result["selection"]["held"] == ["remember"]
    # asked to keep something, the tool is on offer and the same scores call it
    backend = ScriptedBackend(scorer=scorer(table))
    result = ask("Remember that Tom likes tea.", backend, tools=[REMEMBER_TOOL])
    assert [c["name"] for c in result["ai_message"]["tool_calls"]] == ["remember"]
    assert "held" not in result["selection"]


GUIDE = """# Agent guide

This guide shows how to work with the local agent runtime.

## Tools the agent can use

| tool | what it does |
| --- | --- |
| file_reader | reads a text file |
| calculator | evaluates arithmetic such as `3.14 * 5` |
"""


def test_an_answer_that_copies_an_unrelated_line_of_the_result_is_retried_then_extracted():
    # "Read docs/agent_guide.md and tell me which tools the agent can use." was answered
    # with the guide's first line, labelled quoted
    reader = basic_tools()[0]  # file_reader
    call = {"id": "call_001", "name": "file_reader", "args": {"path": "docs/agent_guide.md"}}
    output = {"path": "docs/agent_guide.md", "content": GUIDE}
    messages = [
        {"role": "user", "content": "Read docs/agent_guide.md. Which tools can the agent use?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_001", "name": "file_reader",
         "content": json.dumps({"status": "success", "output": output})},
    ]  # fmt: skip
    first_line = '{"content": "This guide shows how to work with the local agent runtime."}'
    backend = ScriptedBackend(
        [first_line, first_line], scorer=scorer({CALL_OPENING: -9.0, ANSWER_OPENING: 0.0})
    )
    result = generate_ai_message(staged_profile(), messages, [reader], backend=backend).to_dict()
    assert result["attempts"][0]["error"]["type"] == "bad_reply"
    assert result["status"] == "success" and result["parse"]["answer_source"] == "extracted"
    assert "This guide shows" not in result["ai_message"]["content"]
    assert "(quoted from file_reader (docs/agent_guide.md))" in result["ai_message"]["content"]


GUIDE_SKILLS = (
    GUIDE
    + """
## Skills

Skills are folders with a `SKILL.md`. The agent first reads the skill with `read_skill`,
then runs its scripts with `code_execution`, and answers from the real output.
"""
)


def guide_turn(question):
    output = {"path": "docs/agent_guide.md", "content": GUIDE_SKILLS}
    return after_call(question, "file_reader", {"path": "docs/agent_guide.md"}, output)


def answer_after_guide(question, replies):
    """The staged decision after docs/agent_guide.md was read, the model scripted to answer
    with ``replies`` (one per attempt)."""
    backend = ScriptedBackend(replies, scorer=scorer({CALL_OPENING: -9.0, ANSWER_OPENING: 0.0}))
    reader = basic_tools()[0]
    messages = guide_turn(question)
    return generate_ai_message(staged_profile(), messages, [reader], backend=backend).to_dict()


def test_a_quote_of_a_line_that_is_close_but_not_closest_is_retried_then_extracted():
    # the guide's first line is among the three passages shown for "how does the agent use
    # a skill?" (second closest), and it was the answer, labelled quoted
    first_line = '{"content": "This guide shows how to work with the local agent runtime."}'
    result = answer_after_guide(
        "Read docs/agent_guide.md: how does the agent use a skill?", [first_line, first_line]
    )
    assert result["attempts"][0]["error"]["type"] == "bad_reply"
    assert result["parse"]["answer_source"] == "extracted"
    assert "read_skill" in result["ai_message"]["content"]


def test_a_quote_of_the_closest_passage_stays_the_models_answer():
    quote = json.dumps({"content": "The agent first reads the skill with `read_skill`."})
    result = answer_after_guide(
        "Read docs/agent_guide.md: how does the agent use a skill?", [quote]
    )
    assert result["status"] == "success" and len(result["attempts"]) == 1
    assert result["parse"]["answer_source"] == "quoted"


PANTONE = {
    "name": "rgb_to_pantone",
    "description": "Convert a color from RGB to Pantone.",
    "parameters": {
        "type": "object",
        "properties": {
            "red": {"type": "integer"},
            "green": {"type": "integer"},
            "blue": {"type": "integer"},
        },
        "required": ["red", "green", "blue"],
    },
}


def test_a_call_whose_numbers_nobody_gave_is_an_answer():
    # BFCL irrelevance: "Which colors should I mix to get a specific color shade?" called
    # rgb_to_pantone(red=255, green=255, blue=255), numbers the model made up
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "rgb_to_pantone": 0.0}
    backend = ScriptedBackend(['{"content": "Mix blue and yellow."}'], scorer=scorer(table))
    question = "Which colors should I mix to get a specific color shade?"
    result = ask(question, backend, tools=[PANTONE])
    assert result["ai_message"]["tool_calls"] == []
    stage = result["attempts"][0]["staged"]
    assert stage["choice"] == "answer" and stage["no_fillable_tool"] is True
    assert stage["answer_or_call"]["margin"] > 0  # stage 1 wanted the call
    # a question about the calculator has nothing for it to compute (it called
    # calculator("calculator") after reading the guide)
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "calculator": 0.0}
    backend = ScriptedBackend(['{"content": "It computes."}'], scorer=scorer(table))
    calculator = [t for t in basic_tools() if t["function"]["name"] == "calculator"]
    result = ask("What is the calculator for?", backend, tools=calculator)
    assert result["attempts"][0]["staged"]["no_fillable_tool"] is True
    result = ask("What is twelve times 7?", ScriptedBackend(scorer=scorer(table)), tools=calculator)
    assert result["ai_message"]["tool_calls"][0]["name"] == "calculator"
    # the numbers stated (in digits or words): the call is made with them
    backend = ScriptedBackend(scorer=scorer({**table, "10": -0.1, "20": -0.2, "30": -0.3}))
    result = ask("Convert red 10, green twenty and blue 30 to Pantone", backend, tools=[PANTONE])
    assert result["ai_message"]["tool_calls"][0]["name"] == "rgb_to_pantone"
    assert "no_fillable_tool" not in result["attempts"][0]["staged"]


FINAL_PRICE = {
    "name": "calculateFinalPrice",
    "description": "Calculate the final price of a product after a discount and sales tax.",
    "parameters": {
        "type": "object",
        "properties": {
            "price": {"type": "number", "description": "The original price."},
            "discount_rate": {"type": "number"},
            "sales_tax": {"type": "number"},
        },
        "required": ["price", "discount_rate", "sales_tax"],
    },
}
FIND_HOMES = {
    "name": "find_homes",
    "description": "Find homes to rent.",
    "parameters": {
        "type": "object",
        "properties": {
            "area": {"type": "string", "description": "The city, e.g. Denver, CO."},
            "bedrooms": {"type": "integer"},
            "bathrooms": {"type": "integer"},
        },
        "required": ["bedrooms", "bathrooms"],
    },
}


def test_a_call_needs_a_stated_number_for_each_number_it_takes():
    # BFCL irrelevance (development split): "the final price ... after a 25% discount and
    # 10% sales tax" states no price; the call would carry an invented one
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "calculateFinalPrice": 0.0}
    backend = ScriptedBackend(['{"content": "It depends on the price."}'], scorer=scorer(table))
    question = "What is the final price of a product after a 25% discount and 10% sales tax?"
    result = ask(question, backend, tools=[FINAL_PRICE])
    assert result["ai_message"]["tool_calls"] == []
    assert result["attempts"][0]["staged"]["no_fillable_tool"] is True
    # with the price stated, three numbers for three parameters: the call is made
    question = "What is the final price of a $80 product after a 25% discount and 10% sales tax?"
    result = ask(question, ScriptedBackend(scorer=scorer(table)), tools=[FINAL_PRICE])
    assert result["ai_message"]["tool_calls"][0]["name"] == "calculateFinalPrice"
    # one number may fill two parameters when the question states it twice
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "find_homes": 0.0, "2": -0.5}
    question = "Find homes in Denver with 2 bedrooms and 2 bathrooms."
    result = ask(question, ScriptedBackend(scorer=scorer(table)), tools=[FIND_HOMES])
    assert "no_fillable_tool" not in result["attempts"][0]["staged"]
    call = result["ai_message"]["tool_calls"][0]
    assert call["name"] == "find_homes"
    assert call["args"]["bedrooms"] == 2 and call["args"]["bathrooms"] == 2


def test_a_tool_that_does_the_opposite_of_the_request_is_not_called():
    # BFCL live_irrelevance (development split): "multiply 8.5 and 3.2" called
    # calculate_sum, which has the two numbers and does not multiply
    question = "Could you tell me what the result is if I multiply 8.5 and 3.2 together?"
    for name, called in (("calculate_sum", False), ("multiply_numbers", True)):
        table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, name: 0.0, "8.5": -0.1, "3.2": -0.2}
        backend = ScriptedBackend(['{"content": "27.2"}'], scorer=scorer(table))
        tool = tool_of(
            name, "Calculates the result of two numbers.", number1="number", number2="number"
        )
        result = ask(question, backend, tools=[tool])
        stage = result["attempts"][0]["staged"]
        assert stage["answer_or_call"]["margin"] > 0  # stage 1 wanted the call
        if called:
            assert result["ai_message"]["tool_calls"][0]["name"] == name
            assert "no_fillable_tool" not in stage
        else:
            assert result["ai_message"]["tool_calls"] == []
            assert stage["no_fillable_tool"] is True
    # a request of two parts: the first may be the sum's, whatever the second asks (BFCL's
    # "the area under the curve ..., and find the derivative at x=3" beside an integral)
    question = "Total up 8.5 and 3.2, then multiply 2 by 4."
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "calculate_sum": 0.0}
    tool = tool_of(
        "calculate_sum", "Calculates the sum of two numbers.", number1="number", number2="number"
    )
    result = ask(question, ScriptedBackend(scorer=scorer(table)), tools=[tool])
    assert "no_fillable_tool" not in result["attempts"][0]["staged"]
    assert result["ai_message"]["tool_calls"][0]["name"] == "calculate_sum"


LOGIN = tool_of(
    "user_authentication.login",
    "Authenticates a user by username and password.",
    username="string",
    password="string",
)


@pytest.mark.parametrize(
    ("text", "stated"),
    [
        ("My username is 'john_doe' and the password is 'jDoe#456'.", True),
        ("The host is data.example.com and the API key is 12344.", True),
        ("Here's the API key to use: '1234123'.", True),  # BFCL live_multiple (development)
        ("using my authentication token '1231289312'", True),
        ("connect with api_key=abc-123", True),
        ("密码是 x1y2", True),
        ("with 'admin' as username and 'secure*pass123' as the password", True),
        ("for the password, just use 'secure_password123'", True),
        ("I've forgotten my password. Could you log me in with my username 'john_doe'?", False),
        ("I need to log in with my credentials.", False),
        ("the token expired yesterday", False),
    ],
)
def test_a_secret_is_stated_with_its_name(text, stated):
    assert states_a_secret(text) is stated


def test_a_secret_nobody_gave_is_not_invented():
    # BFCL live_irrelevance (development split): "I've forgotten my password. Could you
    # help me log in with my username 'john_doe'?" called login with an invented password
    assert [wants_a_secret(p) for p in ("password", "api_key", "auth_token", "pin_code")] == [
        True
    ] * 4
    assert not any(wants_a_secret(p) for p in ("username", "token_count", "max_tokens", "spin"))
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "user_authentication.login": 0.0}
    backend = ScriptedBackend(['{"content": "Reset it first."}'], scorer=scorer(table))
    question = "I've forgotten my password. Could you help me log in with my username 'john_doe'?"
    result = ask(question, backend, tools=[LOGIN])
    assert result["ai_message"]["tool_calls"] == []
    assert result["attempts"][0]["staged"]["no_fillable_tool"] is True
    question = "Log me in: my username is 'john_doe' and the password is 'jDoe#456'."
    result = ask(question, ScriptedBackend(scorer=scorer(table)), tools=[LOGIN])
    assert "no_fillable_tool" not in result["attempts"][0]["staged"]
    assert result["ai_message"]["tool_calls"][0]["name"] == "user_authentication.login"


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("What is the assist average of basketball player LeBron James?", True),
        ("LeBron James scored how many points?", True),  # a name that opens the sentence
        ("Messi's goals in 2020", True),
        ('What\'s project is "Adriel" working on?', True),
        ("Find songs by kesha", True),
        ("Édith Piaf songs", True),  # a capital with an accent
        ("梅西进了几个球", True),
        ("Who won the chess tournament in 2015?", False),
        ("Show stats for the player.", False),
        ("Can I get the stats?", False),  # "I" is no name
        ("What's the player's score?", False),  # contractions and possessives quote nothing
        ("how many goals did the best striker score", False),
    ],
)
def test_a_person_is_named(text, named):
    assert names_a_person(text) is named


@pytest.mark.parametrize(
    ("text", "stated"),
    [
        ("in the 2020-2021 season", True),
        ("How did he do this season?", True),
        ("the best collectables in spring", True),
        ("去年的比赛", True),
        ("What is the assist average of LeBron James?", False),
        ("What happened this morning?", False),  # "this" before no season or year
    ],
)
def test_a_period_is_stated(text, stated):
    assert states_a_period(text) is stated


def test_a_person_or_a_season_nobody_named_is_not_invented():
    # BFCL irrelevance (development split): "Who won the chess tournament in 2015?" called
    # a board analyser with player '2015'; "What is the assist average of basketball player
    # LeBron James?" called the scoring average with season 'basketball'
    assert [wants_a_person_name(p) for p in ("player", "author", "artist_name")] == [True] * 3
    assert not any(wants_a_person_name(p) for p in ("user_id", "username", "player_count"))
    assert wants_a_period("season", {"type": "string"})
    assert not wants_a_period("season", {"type": "integer"})  # a number: the number rules
    board = tool_of("game.board_analyser", "Suggest the next move.", game="string", player="string")
    stats = tool_of(
        "player_stats", "A player's scoring average.", player_name="string", season="string"
    )
    for question, tool in [
        ("Who won the chess tournament in 2015?", board),
        ("What is the assist average of basketball player LeBron James?", stats),
    ]:
        table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, tool["name"]: 0.0}
        backend = ScriptedBackend(['{"content": "I do not know."}'], scorer=scorer(table))
        result = ask(question, backend, tools=[tool])
        assert result["attempts"][0]["staged"]["answer_or_call"]["margin"] > 0
        assert result["ai_message"]["tool_calls"] == []
        assert result["attempts"][0]["staged"]["no_fillable_tool"] is True
    for question, tool in [
        ("Suggest Magnus Carlsen's next move in this chess game.", board),
        ("What is the scoring average of LeBron James in the 2020-2021 season?", stats),
    ]:
        table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, tool["name"]: 0.0}
        result = ask(question, ScriptedBackend(scorer=scorer(table)), tools=[tool])
        assert "no_fillable_tool" not in result["attempts"][0]["staged"]
        assert result["ai_message"]["tool_calls"][0]["name"] == tool["name"]


WEATHER = {
    "name": "get_current_weather",
    "description": "Get the current weather in a given location.",
    "parameters": {
        "type": "object",
        "properties": {
            "location": {"type": "string", "description": "The city, e.g. San Francisco, CA."},
        },
        "required": ["location"],
    },
}


def test_an_address_or_a_region_is_no_place_a_question_must_name():
    # an IP, e-mail or wallet address, a cloud region "us-east-1": the place rule would
    # have made these tools unfillable for questions that state their values
    lookup = {
        "name": "ip_lookup",
        "description": "Look up who owns an IP address.",
        "parameters": {
            "type": "object",
            "properties": {"ip_address": {"type": "string"}, "region": {"type": "string"}},
            "required": ["ip_address", "region"],
        },
    }
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "ip_lookup": 0.0}
    question = "who owns 8.8.8.8 in us-east-1?"
    result = ask(question, ScriptedBackend(scorer=scorer(table)), tools=[lookup])
    assert "no_fillable_tool" not in result["attempts"][0]["staged"]
    assert result["ai_message"]["tool_calls"][0]["name"] == "ip_lookup"


@pytest.mark.parametrize(
    ("question", "fillable"),
    [
        ("How many days are in a week?", False),  # lokal's d22_fact called the weather skill
        ("I need help looking for a bus.", False),  # BFCL live_irrelevance (development)
        ("What's 1+1?", False),
        ("What's the weather in London right now?", True),
        ("weather in berkeley please", True),  # a known place after "in", in lower case
        ("get the weather of nyc", True),  # one of the city's other names
        ("北京今天天气怎么样？", True),
    ],
)
def test_a_place_parameter_needs_a_place_the_question_names(question, fillable):
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "get_current_weather": 0.0}
    backend = ScriptedBackend(['{"content": "Seven."}'], scorer=scorer(table))
    result = ask(question, backend, tools=[WEATHER])
    stage = result["attempts"][0]["staged"]
    assert stage["answer_or_call"]["margin"] > 0  # stage 1 wanted the call
    if fillable:
        assert "no_fillable_tool" not in stage
        assert result["ai_message"]["tool_calls"][0]["name"] == "get_current_weather"
    else:
        assert stage["no_fillable_tool"] is True
        assert result["ai_message"]["tool_calls"] == []


def test_stage_one_measures_the_tools_that_can_be_filled():
    # lokal's development task "How many days are in a week?" called the weather skill:
    # its forecast's description is close to "days", but it needs a place nobody named.
    # Before any result, stage 1's similarity and BM25 are those of fillable tools only.
    table = {CALL_OPENING: -5.0, ANSWER_OPENING: 0.0}
    calculator = [t for t in basic_tools() if t["function"]["name"] == "calculator"]
    profile = staged_profile(similarity_weight=1.0, bm25_weight=1.0)

    def stage_one(question):
        backend = ScriptedBackend(['{"content": "Sunny."}'], scorer=scorer(table))
        result = ask(question, backend, profile=profile, tools=[WEATHER, *calculator])
        return result["attempts"][0]["staged"]["answer_or_call"]

    unnamed = stage_one("What will the weather be like tomorrow?")
    named = stage_one("What will the weather be like in London tomorrow?")
    assert unnamed["similarity"] == 0.0 and unnamed["bm25"] == 0.0  # neither tool fillable
    assert named["similarity"] > 0.3 and named["bm25"] > 0.0  # the weather tool, filled
    # with a number stated the calculator can be filled: its similarity, not the weather's
    counted = stage_one("What will the weather be like in 3 days?")
    assert 0.0 < counted["similarity"] < named["similarity"]


def test_fillability_is_worked_out_once_per_tool_in_a_decision(monkeypatch):
    # stage 1, the answer filter and stage 3 each ask whether a tool can be filled; the
    # question and results do not change within a decision, so each tool is read once
    from lokal.llm.staged.engine import StagedEngine

    asked = []
    can_fill = StagedEngine._can_fill

    def counting(self, name):
        asked.append(name)
        return can_fill(self, name)

    monkeypatch.setattr(StagedEngine, "_can_fill", counting)
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "get_current_weather": 0.0}
    calculator = [t for t in basic_tools() if t["function"]["name"] == "calculator"]
    question = "What's the weather in London right now?"
    result = ask(question, ScriptedBackend(scorer=scorer(table)), tools=[WEATHER, *calculator])
    assert result["ai_message"]["tool_calls"][0]["name"] == "get_current_weather"
    assert sorted(asked) == sorted(set(asked))  # no tool twice in one engine
    assert "get_current_weather" in asked


HOTEL = {
    "name": "hotel_booking",
    "description": "Book a hotel room.",
    "parameters": {
        "type": "object",
        "properties": {
            "location": {"type": "string"},
            "start_date": {"type": "string", "description": "The start date (YYYY-MM-DD)."},
        },
        "required": ["location", "start_date"],
    },
}


def test_a_date_written_in_words_fills_a_date_parameter():
    # BFCL simple_python_380 (development split): "starting from March 10th, 2023" has no
    # value of a date's shape as written, so the tool counted as unfillable and the
    # question was answered; its ISO form "2023-03-10" is a value
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "hotel": 0.0, '"2023-03-10"': -1.0}
    question = "Book a room near Manhattan for 3 nights starting from March 10th, 2023."
    result = ask(question, ScriptedBackend(scorer=scorer(table)), tools=[HOTEL])
    assert "no_fillable_tool" not in result["attempts"][0]["staged"]
    assert result["ai_message"]["tool_calls"][0]["args"]["start_date"] == "2023-03-10"


def test_a_date_takes_the_form_its_description_states():
    # "in the format DD/MM/YYYY": the ISO form is offered as 16/03/2024, and nothing else
    # of a date's shape is left (live_simple_245-127-0 gave "2024-03-16")
    tool = {
        **HOTEL,
        "parameters": {
            **HOTEL["parameters"],
            "properties": {
                "location": {"type": "string"},
                "start_date": {"type": "string", "description": "In the format DD/MM/YYYY."},
            },
        },
    }
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "hotel": 0.0, '"2024-03-16"': 0.0}
    table['"16/03/2024"'] = -2.0
    question = "Book a room in Oslo from the 16th of March 2024."
    result = ask(question, ScriptedBackend(scorer=scorer(table)), tools=[tool])
    assert result["ai_message"]["tool_calls"][0]["args"]["start_date"] == "16/03/2024"


@pytest.mark.parametrize(
    ("description", "form", "written"),
    [
        ("Departure date in the format DD/MM/YYYY", "DD/MM/YYYY", "16/03/2024"),
        ("The date (MM-DD-YYYY)", "MM-DD-YYYY", "03-16-2024"),
        ("as mm/dd/yy", "MM/DD/YY", "03/16/24"),
        # ISO's own form, or none: the ISO date as it is
        ("The date, YYYY-MM-DD", None, None),
        ("The day of the trip", None, None),
    ],
)
def test_the_date_form_a_description_states(description, form, written):
    assert date_form(description) == form
    if form is not None:
        assert in_date_form("2024-03-16", form) == written
    assert in_date_form("next Friday", "DD/MM/YYYY") == "next Friday"


def test_the_passage_after_a_closing_colon_is_one_value():
    question = "Order a burger with this change, verbatim: no onions, extra cheese."
    assert "no onions, extra cheese" in text_spans(question)
    # the colon of a time opens no passage
    assert "00 from 5 Elm St" not in text_spans("Leave at 14:00 from 5 Elm St")


WEATHER_ON = {
    "name": "Weather_1_GetWeather",
    "description": "The weather of a city on a date.",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "date": {"type": "string", "description": "The date, YYYY-MM-DD; default today."},
        },
        "required": ["city"],
    },
}


def test_an_optional_date_the_question_states_is_given():
    # BFCL live_simple_200 (development split): "on March 1st 2023" left the optional date
    # out; a date parameter counts as mentioned when the question states a date
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "Weather": 0.0, '"Fremont"': -0.5}
    table |= {'"2023-03-01"': -1.0}
    question = "I want to check the weather condition in Fremont on March 1st 2023."
    result = ask(question, ScriptedBackend(scorer=scorer(table)), tools=[WEATHER_ON])
    assert result["ai_message"]["tool_calls"][0]["args"] == {
        "city": "Fremont",
        "date": "2023-03-01",
    }
    result = ask("What's the weather in Fremont?", ScriptedBackend(scorer=scorer(table)),
                 tools=[WEATHER_ON])  # fmt: skip
    assert result["ai_message"]["tool_calls"][0]["args"] == {"city": "Fremont"}


def test_numbers_a_parameter_wants():
    assert wants_numbers({"type": "integer"}) and wants_numbers({"type": ["number", "null"]})
    assert wants_numbers({"type": "array", "items": {"type": "integer"}})
    assert not wants_numbers({"type": "array", "items": {"type": "string"}})
    assert not wants_numbers({"type": "integer", "enum": [1, 2, 3]})  # the enum offers values
    assert not wants_numbers({"type": "string"}) and not wants_numbers({})


COLUMN_QUESTIONS = {
    # held-out kinds: "add up the units for each product" swapped column and group_by, "sold
    # the most units in a single row" ranked by the column "row"
    "In data/sales.csv, add up the units for each product.": ("units", "product"),
    "Which region sold the most units in a single row of data/sales.csv?": ("units", None),
    "Using data/sales.csv, total units sold per region?": ("units", "region"),
}


@pytest.mark.parametrize("question, expected", COLUMN_QUESTIONS.items())
def test_the_columns_a_question_names_fill_the_table_parameters(question, expected):
    from lokal.skills.builtin import builtin_tools

    assert (column_cue("column", question), column_cue("group_by", question)) == expected
    assert column_cue("path", question) is None and column_cue("api_key", question) is None
    assert column_cue("column", "What is the average price in data/sales.csv?") == "price"
    (table,) = [t for t in builtin_tools(DATA / "workspace") if t.name == "table_analyzer"]
    # the model prefers the other words of the question; the cue puts the named column first
    table_scores = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "table_analyzer": 0.0}
    table_scores.update({'"row"': 0.0, '"region"': -0.1, '"product"': -0.2, '"units"': -5.0})
    backend = ScriptedBackend(["3"] * 4, scorer=scorer(table_scores))
    args = ask(question, backend, tools=[table.to_openai()])["ai_message"]["tool_calls"][0]["args"]
    assert args["column"] == expected[0]
    if expected[1] is not None:
        assert args["group_by"] == expected[1]


@pytest.mark.parametrize(
    ("question", "made", "later"),
    [
        # the same parameter again, further on: another call of the same tool
        ("What is the factorial of 4, of 6 and of 8?", [{"n": 4}], [6, 8]),
        ("What is the factorial of 4, of 6 and of 8?", [{"n": 4}, {"n": 6}], [8]),
        (
            "Loans of $300,000 at Acme Bank and $450,000 at Brook Credit",
            [{"amount": 300000, "bank": "Acme Bank"}],
            [450000, "Brook Credit"],
        ),
        ("Show the forecast for 'Oslo', then for 'Bergen'.", [{"city": "Oslo"}], ["Bergen"]),
        # a rate given as a fraction used the "4%" the question states
        ("Grow 1000 at 4% for 3 years", [{"p": 1000, "rate": 0.04, "years": 3}], []),
        # a capitalised word that opens a clause is no value
        (
            "Find cases of Dana Corp filed in 2019, Also show",
            [{"company": "Dana Corp", "year": 2019}],
            [],
        ),
        # a date normalised from the question's words used its day, month and year
        (
            "Book a room in Lyon from March 4th, 2024 for 2 nights",
            [{"city": "Lyon", "date": "2024-03-04", "nights": 2}],
            [],
        ),
        # a unit after a number, a state after a used city: parts of the values used
        ("Fuel for 9,000 miles at 30 MPG", [{"miles": 9000, "mpg": 30}], []),
        ("Cases from 2021 in Austin, Texas", [{"year": 2021, "city": "Austin"}], []),
        # values the call used every one of, or no value of the question at all
        ("Area of a triangle with base 6 and height 9", [{"base": 6, "height": 9}], []),
        ("Say hello", [{"text": "hi"}], []),
    ],
)
def test_values_stated_after_the_ones_a_call_used(question, made, later):
    assert later_values(question, made) == later


def test_a_name_made_of_a_tools_name_is_no_later_value():
    made = [{"actor": "Tilda Swinton", "year": 2008}]
    question = "Movies of Tilda Swinton in 2008 on IMDB, and of Bill Nighy in 2003"
    assert later_values(question, made) == [2003, "IMDB", "Bill Nighy"]
    tools = ["imdb.find_movies_by_actor", "getMostPlayed"]
    assert later_values(question, made, tools) == [2003, "Bill Nighy"]
    # camelCase names split too; a name with a word of its own stays
    said = "Most played Pop, then Rock on Most Played, then Most Played Jazz"
    assert later_values(said, [{"genre": "Pop"}]) == ["Rock", "Most Played", "Most Played Jazz"]
    assert later_values(said, [{"genre": "Pop"}], tools) == ["Rock", "Most Played Jazz"]
    # a tool's name quoted (BFCL parallel_multiple_145, development split)
    question = (
        "Lawyers in Boston. Could you use the 'lawyer.find' function? The rating of Magnus Carlsen"
    )
    assert later_values(question, [{"city": "Boston"}]) == ["lawyer.find", "Magnus Carlsen"]
    assert later_values(question, [{"city": "Boston"}], ["lawyer.find"]) == ["Magnus Carlsen"]


def test_a_value_is_stated_as_whole_words():
    # "CA" is not stated by "calculate": the part about the fitness held no value for the
    # call about Los Angeles, CA (BFCL parallel_multiple_145, development split)
    assert not states_any("calculate the evolutionary fitness", ["CA"])
    assert states_any("the nearest Walmart in Los Angeles, CA.", ["CA"])
    assert states_any("the company 'Apple Inc.' in 2015", ["apple inc."])


def would_stop(table):
    """A scorer from ``table`` (as ``scorer``) under which the model would rather close the
    list of calls than open another (-1 against 0): another call needs the evidence."""

    def score(prefix, continuation):
        if continuation == ', {"name": "':
            return -1.0
        if continuation == "]}":
            return 0.0
        return scorer(table)(prefix, continuation)

    return score


FACTORIAL = {
    "name": "factorial",
    "description": "The factorial of a number.",
    "parameters": {
        "type": "object",
        "properties": {"number": {"type": "integer"}},
        "required": ["number"],
    },
}


def test_values_stated_later_make_another_call_of_the_same_tool():
    """The model alone would stop after the first call (``lm`` -1); the later values outweigh
    it, and once every stated value is used the calls end (``later`` 0)."""

    score = would_stop({CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "factorial": 0.0})

    question = "What is the factorial of 5, and the factorial of 7?"
    later = staged_profile(continue_lm_weight=1.0, continue_later_weight=3.0)
    result = ask(question, ScriptedBackend(scorer=score), later, tools=[FACTORIAL])
    assert [c["args"] for c in result["ai_message"]["tool_calls"]] == [{"number": 5}, {"number": 7}]
    steps = result["attempts"][-1]["staged"]["calls"]
    assert [s["continue"]["later"] for s in steps] == [1.0, 0.0]
    without = staged_profile(continue_lm_weight=1.0, continue_later_weight=0.0)
    result = ask(question, ScriptedBackend(scorer=score), without, tools=[FACTORIAL])
    assert [c["args"] for c in result["ai_message"]["tool_calls"]] == [{"number": 5}]


LAWSUITS = {
    "name": "lawsuit.lookup",
    "description": "Look up the lawsuits filed against a company in a year.",
    "parameters": {
        "type": "object",
        "properties": {"company_name": {"type": "string"}, "year": {"type": "integer"}},
        "required": ["company_name", "year"],
    },
}


def test_a_word_that_asks_again_with_values_left_makes_another_call():
    """BFCL parallel_25 (development split): "filed in 2019, Also list cases filed in the
    year 2018" stopped after one call (``later`` alone was too weak); ``again`` counts only
    with values left for another call."""
    assert asks_again("Also list the cases filed in 2018") and asks_again("另一个")
    assert not asks_again("List the cases filed in 2019") and not asks_again("Salsa")
    score = would_stop({CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "lawsuit": 0.0})
    weights = {"continue_lm_weight": 1.0, "continue_later_weight": 1.0, "later_value_bonus": 3.0}
    question = "List cases against 'Dara Inc' filed in 2019. Also list cases filed in 2018."
    again = staged_profile(**weights, continue_again_weight=2.0)
    result = ask(question, ScriptedBackend(scorer=score), again, tools=[LAWSUITS])
    assert [c["args"]["year"] for c in result["ai_message"]["tool_calls"]] == [2019, 2018]
    steps = result["attempts"][-1]["staged"]["calls"]
    assert [(s["continue"]["later"], s["continue"]["again"]) for s in steps] == [
        (1.0, 1.0),
        (0.0, 0.0),  # "Also" is still there, but no value is left for a third call
    ]
    result = ask(question, ScriptedBackend(scorer=score), staged_profile(**weights),
                 tools=[LAWSUITS])  # fmt: skip
    assert [c["args"]["year"] for c in result["ai_message"]["tool_calls"]] == [2019]


def test_an_answer_that_repeats_a_tools_error_is_not_an_answer():
    # pair p19b: "In a sentence, what does calling a tool mean for an agent?" called
    # calculator-like code_execution({}) and answered with its error, labelled quoted
    calc = next(t for t in basic_tools() if t["function"]["name"] == "calculator")
    name = calc["function"]["name"]
    call = {"id": "call_001", "name": name, "args": {"expression": ""}}
    error = "ValueError: give exactly one of code or command"
    messages = [
        {"role": "user", "content": "In a sentence, what does calling a tool mean for an agent?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_001", "name": name,
         "content": json.dumps({"status": "error", "error": error})},
    ]  # fmt: skip
    copied = json.dumps({"content": f"{name} failed: {error}"})
    backend = ScriptedBackend(
        [copied, copied, copied], scorer=scorer({CALL_OPENING: -9.0, ANSWER_OPENING: 0.0})
    )
    result = generate_ai_message(staged_profile(), messages, [calc], backend=backend).to_dict()
    assert result["attempts"][0]["error"]["type"] == "bad_reply"
    assert "error message" in result["attempts"][0]["error"]["message"]
    assert result["parse"].get("answer_source") != "quoted"
    # copied again after the retry: no answer, a labelled error (the run says why)
    assert result["status"] == "error" and result["ai_message"] is None


def test_a_second_call_filled_like_the_first_takes_the_next_stated_value():
    """The model likes 5 best for every call: the second call, identical to the first,
    takes the value the question states next (7) instead of being merged away."""

    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "factorial": 0.0, "5": -0.5, "7": -2.0}
    score = would_stop(table)
    profile = staged_profile(continue_lm_weight=1.0, continue_later_weight=3.0)
    question = "What is the factorial of 5, and the factorial of 7?"
    result = ask(question, ScriptedBackend(scorer=score), profile, tools=[FACTORIAL])
    assert [c["args"] for c in result["ai_message"]["tool_calls"]] == [{"number": 5}, {"number": 7}]
    assert result["attempts"][-1]["staged"]["next_values"] == [{"number": 7}]


FORECAST = {
    "name": "forecast",
    "description": "The weather forecast of a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city", "days"],
    },
}


def test_a_later_call_takes_the_values_its_part_of_the_request_states():
    """The model likes Paris and 3 for every call. Without the bonus the second call changes
    one value (``next_values``: Rome for 3 days, then Paris for 5); with ``later_value_bonus``
    the values stated after the first call's, in the part the second call is about, win."""

    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "forecast": 0.0}
    table |= {'"Paris"': -0.5, '"Rome"': -2.0, "3": -0.5, "5": -2.5}
    score = would_stop(table)
    question = "What is the forecast for Paris for 3 days, and for Rome for 5 days?"
    weights = {"continue_lm_weight": 1.0, "continue_later_weight": 3.0}
    calls = {}
    for bonus in (0.0, 3.0):
        profile = staged_profile(**weights, later_value_bonus=bonus)
        result = ask(question, ScriptedBackend(scorer=score), profile, tools=[FORECAST])
        calls[bonus] = [c["args"] for c in result["ai_message"]["tool_calls"]]
    # each later call changes one value, and a third mixes what is left
    assert calls[0.0] == [
        {"city": "Paris", "days": 3},
        {"city": "Rome", "days": 3},
        {"city": "Paris", "days": 5},
    ]
    assert calls[3.0] == [{"city": "Paris", "days": 3}, {"city": "Rome", "days": 5}]


def test_a_later_call_leaves_the_value_an_earlier_call_took_where_its_part_names_another():
    """BFCL parallel_multiple_100 (dev split): the model likes ARIMA for both calls by more
    than the later value's bonus; the second call's part of the request states LSTM and not
    ARIMA, so the value the first call took for ``model`` loses the bonus again."""
    stock = {
        "name": "stock_forecast",
        "description": "Forecast a company's stock price with a model.",
        "parameters": {
            "type": "object",
            "properties": {"company": {"type": "string"}, "model": {"type": "string"}},
            "required": ["company", "model"],
        },
    }
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "stock_forecast": 0.0}
    company = {'"Apple"': -0.5, '"Microsoft"': -2.0}
    model = {'"ARIMA"': -0.5, '"LSTM"': -4.0}

    def score(prefix, continuation):
        if prefix.endswith('"company": '):
            return scorer(company)(prefix, continuation)
        if prefix.endswith('"model": '):
            return scorer(model)(prefix, continuation)
        return would_stop(table)(prefix, continuation)

    question = (
        "Forecast the stock of Apple using the ARIMA model, and then forecast the stock of "
        "Microsoft using the LSTM model."
    )
    profile = staged_profile(
        continue_lm_weight=1.0, continue_later_weight=3.0, later_value_bonus=3.0
    )
    result = ask(question, ScriptedBackend(scorer=score), profile, tools=[stock])
    assert [c["args"] for c in result["ai_message"]["tool_calls"]] == [
        {"company": "Apple", "model": "ARIMA"},
        {"company": "Microsoft", "model": "LSTM"},
    ]


CIRCUMFERENCE = {
    "name": "circumference",
    "description": "The circumference of a circle.",
    "parameters": {
        "type": "object",
        "properties": {"radius": {"type": "integer"}},
        "required": ["radius"],
    },
}


def test_each_later_call_is_about_the_next_part_that_states_a_value():
    """A call of radius 5 covers the part "radius of 5cm", not "radius of 15cm" too (a
    number is stated as written, not as a substring): the third call is about 15, though
    the model likes 20 better."""

    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "circumference": 0.0}
    table |= {"5": -0.5, "10": -1.5, "15": -2.0, "20": -1.0}
    score = would_stop(table)
    question = (
        "What is the total circumference of four circles, where the first circle has a radius "
        "of 5cm, the second circle has a radius of 10cm, the third circle has a radius of "
        "15cm, and the fourth circle has a radius of 20cm?"
    )
    profile = staged_profile(
        continue_lm_weight=1.0, continue_later_weight=3.0, later_value_bonus=3.0
    )
    result = ask(question, ScriptedBackend(scorer=score), profile, tools=[CIRCUMFERENCE])
    radii = [c["args"]["radius"] for c in result["ai_message"]["tool_calls"]]
    assert radii == [5, 10, 15, 20]


def test_a_name_the_tool_itself_carries_is_no_value_for_another_call():
    """ "on Spotify" after the calls for Taylor Swift and Maroon 5: the name of the tool
    (spotify.play), not a third artist (BFCL parallel_0 made a call for artist "Spotify")."""
    play = {
        "name": "spotify.play",
        "description": "Play songs of an artist for a while.",
        "parameters": {
            "type": "object",
            "properties": {"artist": {"type": "string"}, "duration": {"type": "integer"}},
            "required": ["artist", "duration"],
        },
    }

    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "spotify": 0.0}
    table |= {'"Taylor Swift"': -0.5, '"Maroon 5"': -1.0, "20": -0.5, "15": -1.0}
    score = would_stop(table)
    question = "Play Taylor Swift for 20 minutes and Maroon 5 for 15 minutes on Spotify."
    profile = staged_profile(
        continue_lm_weight=1.0, continue_later_weight=3.0, later_value_bonus=3.0
    )
    result = ask(question, ScriptedBackend(scorer=score), profile, tools=[play])
    assert [c["args"] for c in result["ai_message"]["tool_calls"]] == [
        {"artist": "Taylor Swift", "duration": 20},
        {"artist": "Maroon 5", "duration": 15},
    ]
    steps = result["attempts"][-1]["staged"]["calls"]
    assert [s["continue"]["later"] for s in steps] == [1.0, 0.0]


@pytest.mark.parametrize(
    ("question", "made", "cued"),
    [
        # the question asks the same thing again with another value
        (
            "What is the factorial of 4, the factorial of 6 and the factorial of 8?",
            [{"n": 4}],
            True,
        ),
        (
            "Save stage 2 in easy mode and stage 5 in hard mode",
            [{"stage": 2, "mode": "easy"}],
            True,
        ),
        # a later number of another kind: the land area after the population
        (
            "Density of Peru if the population is 34 million and the area is 1.3 million km2",
            [{"country": "Peru", "population": 34000000}],
            False,
        ),
        ("Area of a triangle with base 6 and height 9", [{"base": 6, "height": 9}], False),
        # the same form of number, whatever the words around it: a year, a percentage
        (
            "Lawsuits filed in 2016, then the ones filed in the year 2017 as well",
            [{"year": 2016}],
            True,
        ),
        ("Growth at 3% a year for 5 years, or at 4.5% instead", [{"rate": 0.03}], True),
        ("Revenue grew 5% in 2020 across 12 stores", [{"growth": 0.05, "year": 2020}], False),
    ],
)
def test_a_later_value_after_the_same_word_as_a_used_one(question, made, cued):
    assert cued_again(question, made, later_values(question, made)) is cued


@pytest.mark.parametrize(
    ("question", "values", "taken", "waiting"),
    [
        # the same word before: the second income waits for the first
        (
            "A loan of $500,000 from HSBC with annual income $100,000, and from Wells Fargo "
            "a loan of $700,000 with annual income of $120,000",
            [500000, 100000, 700000, 120000, "HSBC", "Wells Fargo"],
            [],
            [700000, 120000],
        ),
        # once the first is taken, the next waits for nothing
        (
            "A loan of $500,000 from HSBC with annual income $100,000, and from Wells Fargo "
            "a loan of $700,000 with annual income of $120,000",
            [500000, 100000, 700000, 120000],
            [500000, 100000],
            [],
        ),
        # the same word after: a unit or a noun the values qualify
        (
            "The heat capacity at 300 Kelvin, then again at 350 Kelvin",
            [300, 350],
            [],
            [350],
        ),
        (
            "The most played Pop song and the most played Rock song in Australia",
            ["Pop", "Rock", "Australia"],
            [],
            ["Rock"],
        ),
        # values of different kinds, a one-letter word, a number beside a name: no order
        ("Area of a triangle with base 6 and height 9", [6, 9], [], []),
        ("The integral of x^2 from 1 to 3", [2, 1, 3], [], []),
        ("A loan of $500,000 from HSBC", [500000, "HSBC"], [], []),
        # a year after a year, a percentage (as a fraction) after a percentage
        ("Lawsuits filed in 2016 and those of the year 2017", [2017, 2016], [], [2017]),
        ("At 3% for ten years or at 4.5% for ten years", [0.045, 0.03], [], [0.045]),
        # four digits before a unit are no year
        ("2000 calories on Monday and 1500 steps", [2000, 1500], [], []),
        # lists written out in brackets, after the same word as an earlier one ("range"
        # is also the content word before [5, 5])
        (
            "Integrate [2, 0, 1] over the range [1, 4], then [5, 5] over the range [0, 2]",
            [[0, 2], [1, 4], [5, 5]],
            [[2, 0, 1]],
            [[0, 2], [5, 5]],
        ),
    ],
)
def test_a_value_stated_after_an_untaken_one_of_its_kind_waits(question, values, taken, waiting):
    assert sorted(values[i] for i in waiting_values(question, values, taken)) == sorted(
        waiting, key=str
    )


def test_a_later_percentage_is_offered_as_written_and_as_a_fraction():
    # the call took 3% as 0.03: the next call's rate is 4.5 as written or 0.045
    question = "Growth at 3% a year for 5 years, or at 4.5% instead"
    assert later_values(question, [{"rate": 0.03, "years": 5}]) == [4.5, 0.045]


def test_a_name_inside_a_used_value_written_otherwise_is_no_later_value():
    # the call wrote "Washington, DC"; the question's "D.C." is part of it, not a new place
    question = "How far is it from Austin, TX to Washington, D.C. by road?"
    made = [{"start": "Austin, TX", "end": "Washington, DC"}]
    assert later_values(question, made) == []
    assert later_values(question, [{"start": "Austin, TX"}]) == ["Washington", "D.C"]


def test_an_exponent_is_no_later_value():
    # the 2 of "m/s^2" is part of a unit: no value left for another call
    question = "Speed after 4 seconds, then after 6 seconds, with gravity 9.8 m/s^2"
    assert later_values(question, [{"time": 6, "gravity": 9.8}]) == []
    assert later_values(question, [{"time": 4}]) == [6, 9.8]


def test_a_call_does_not_take_its_own_name_as_an_argument():
    # the question names the tool in quotes; its target is another span, whatever the
    # model's likelihood of the tool's name
    tool = {
        "name": "fit_model",
        "description": "Fit a model.",
        "parameters": {
            "type": "object",
            "properties": {"target": {"type": "string"}},
            "required": ["target"],
        },
    }
    backend = ScriptedBackend(
        scorer=scorer(
            {
                CALL_OPENING: 0.0,
                ANSWER_OPENING: -5.0,
                '"fit_model"': -1.0,
                '"Price"': -3.0,
                '"]}': 0.0,
                "]}": 0.0,
            }
        )
    )
    result = ask("Use the 'fit_model' function to predict Price", backend, tools=[tool])
    assert result["ai_message"]["tool_calls"][0]["args"] == {"target": "Price"}


def _city_tool(name):
    return {
        "name": name,
        "description": f"{name} between two cities.",
        "parameters": {
            "type": "object",
            "properties": {"city1": {"type": "string"}, "city2": {"type": "string"}},
            "required": ["city1", "city2"],
        },
    }


def test_the_tool_the_part_of_the_request_names_is_the_call_and_no_value():
    # the model (scripted) likes distance_find and the quoted name as a city; the part of
    # the request names time_difference, and a tool's name is no argument
    tools = [_city_tool("distance_find"), _city_tool("time_difference")]
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "distance_find": 0.0}
    table |= {"time_difference": -1.5, '"time_difference"': 0.0, '"London"': -1.0, '"Paris"': -2.0}
    question = "Using the 'time_difference' function, compare London and Paris"
    profile = staged_profile(name_file_weight=2.0)
    result = ask(question, ScriptedBackend(scorer=scorer(table)), profile=profile, tools=tools)
    call = result["ai_message"]["tool_calls"][0]
    assert call["name"] == "time_difference"
    assert "time_difference" not in call["args"].values()
    assert result["attempts"][0]["staged"]["calls"][0]["scores"]["time_difference"]["file"] == 1.0


def test_a_request_is_not_split_inside_a_number_written_with_thousands():
    # "$500,000" is one amount: the part of the request the second call is about holds it
    question = "A loan of $500,000 from HSBC, and of $700,000 from Wells Fargo; then 3,4"
    assert clauses(question) == [
        "A loan of $500,000 from HSBC",
        "of $700,000 from Wells Fargo",
        "3,4",
    ]


@pytest.mark.parametrize(
    "question, parts",
    [
        # BFCL parallel_multiple_0 and _20 (development split): the numbers of a list
        (
            "Find the sum of all the multiples of 3 and 5 between 1 and 1000. Also find the "
            "product of the first five prime numbers.",
            [
                "Find the sum of all the multiples of 3 and 5 between 1 and 1000",
                "find the product of the first five prime numbers",
            ],
        ),
        (
            "Determine the median and variance for the data points 3,4,5, and 8",
            ["Determine the median", "variance for the data points 3,4,5, and 8"],
        ),
        # brackets hold one value
        (
            "the cosine similarity of [1, 2, 3] and [4, 5, 6], then round it",
            ["the cosine similarity of [1, 2, 3]", "[4, 5, 6]", "round it"],
        ),
        # a number and a word are two parts
        ("a base of 10 and height 5", ["a base of 10", "height 5"]),
        ("read a.txt, then search for b, and also c", ["read a.txt", "search for b", "c"]),
        # an opening request for help is no part, nor a lone sequence word (BFCL
        # parallel_multiple_150: the first call's part was "Could you ... things? First")
        (
            "Could you help me with a few things? First, find the movies of Leonardo DiCaprio. "
            "Second, the lawsuits against Apple",
            ["find the movies of Leonardo DiCaprio", "the lawsuits against Apple"],
        ),
        # ...unless it names a value: then it is the request
        (
            "Can you help me find a property in San Francisco? Also a villa",
            ["Can you help me find a property in San Francisco", "a villa"],
        ),
        ("Can you help me?", ["Can you help me"]),
    ],
)
def test_the_parts_of_a_request(question, parts):
    assert clauses(question) == parts


LOAN = {
    "name": "loan_eligibility_check",
    "description": "Check loan eligibility.",
    "parameters": {
        "type": "object",
        "properties": {
            "financial_institution": {"type": "string"},
            "loan_amount": {"type": "integer"},
            "annual_income": {"type": "integer"},
        },
        "required": ["financial_institution", "loan_amount", "annual_income"],
    },
}


def test_the_first_call_takes_the_first_of_the_values_a_repeated_request_states():
    """BFCL parallel_20 (development split): the model liked the second income for the first
    call (HSBC with $120,000), after which no value was left "later" and the second call was
    never made. With ``waiting_value_penalty`` the second income waits for its own call."""
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "loan": 0.0}
    table |= {'"HSBC"': -0.5, '"Wells Fargo"': -2.0, "500000": -0.5, "700000": -2.0}
    income = {"100000": -1.5, "120000": -0.5}  # the amounts score -20 here

    def score(prefix, continuation):
        if prefix.endswith('"annual_income": '):
            return scorer(income)(prefix, continuation)
        return would_stop(table)(prefix, continuation)

    question = (
        "Check my loan eligibility for a home loan of amount $500,000 from HSBC with annual "
        "income $100,000 and for Wells Fargo for a amount of $700,000 with annual income of "
        "$120,000?"
    )
    weights = {"continue_lm_weight": 1.0, "continue_later_weight": 3.0, "later_value_bonus": 3.0}
    calls = {}
    for penalty in (0.0, 3.0):
        profile = staged_profile(**weights, waiting_value_penalty=penalty)
        result = ask(question, ScriptedBackend(scorer=score), profile, tools=[LOAN])
        calls[penalty] = [c["args"] for c in result["ai_message"]["tool_calls"]]
    assert calls[0.0][0]["annual_income"] == 120000
    # the trace says which value waited: the second income in the first call
    first = result["attempts"][-1]["staged"]["args"][0]["annual_income"]
    assert first["waiting"] == ["120000"] and first["chosen"] == "100000"
    assert calls[3.0] == [
        {"financial_institution": "HSBC", "loan_amount": 500000, "annual_income": 100000},
        {"financial_institution": "Wells Fargo", "loan_amount": 700000, "annual_income": 120000},
    ]


@pytest.mark.parametrize(
    ("name", "question", "named", "switch"),
    [
        ("detail", "The latest sculpture by James Plensa with detailed description.", True, True),
        ("calculate_years_ago", "Calculate how many years ago was the Ice age?", True, True),
        ("include_influences", "Persian Empire with its religious history and influences", True,
         True),
        # a negation just before the name's words
        ("include_human_impact", "Forest growth if we do not include the impact of humans",
         True, False),
        # not named: other words, a one-letter name, a name that is all verbs
        ("extra_info", "Additional information like director and cast", False, None),
        ("p", "a 0.3 probability of winning", False, None),
        ("include", "including images", False, None),
        # a shorter word that only begins the name (development pair p14a: "What time is it
        # right now?" gave get_current_datetime the timezone "now")
        ("timezone", "What time is it right now?", False, None),
        # a bound in the name, named by the words of a bound (BFCL simple_python_360,
        # development split: "less than 500 calories" left maxCalories out)
        ("maxCalories", "A pasta carbonara recipe with less than 500 calories.", True, True),
        ("max_results", "Show at most 5 results", True, True),
        ("min_stars", "Hotels of at least 4 stars", True, True),
        # ...and the other words of the name are still needed; a bound of the other side
        # does not name it
        ("maxCalories", "A recipe under 500", False, None),
        ("min_stars", "Hotels of 4 stars or less", False, None),
    ],
)  # fmt: skip
def test_a_parameter_the_question_names_in_its_own_words(name, question, named, switch):
    assert names_parameter(name, question) is named
    assert named_switch(name, question) is switch


def test_a_rate_given_as_a_fraction_leaves_no_percentage_behind_for_another_call():
    # BFCL simple_python_150 (development split): "3%" taken as 0.03 left 3 as a value
    # marked like the used 1 ("rate of 3% for 1 year"), and a second call was made
    question = "The return of a deposit of $1000 at an annual interest rate of 3% for 1 year."
    made = [{"deposit": 1000, "annual_interest_rate": 0.03, "years": 1}]
    assert sibling_values(question, made) == []


TRIANGLE = {
    "name": "calculate_triangle_area",
    "description": "Calculate the area of a triangle given its base and height.",
    "parameters": {
        "type": "object",
        "properties": {
            "base": {"type": "integer"},
            "height": {"type": "integer"},
            "unit": {"type": "string", "description": "The unit of measure"},
        },
        "required": ["base", "height"],
    },
}


def test_a_unit_the_question_names_is_a_word_not_the_number_beside_it():
    # BFCL simple_python_0 (development split): "a base of 10 units" names the optional
    # ``unit``; the model liked "10" for it, then "height"
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "calculate": 0.0, "10": -0.5, "5": -1.0}
    table |= {'"10"': -0.5, '"height"': -0.5, '"units"': -2.0}
    question = "Find the area of a triangle with a base of 10 units and height of 5 units."
    result = ask(question, ScriptedBackend(scorer=scorer(table)), tools=[TRIANGLE])
    args = result["ai_message"]["tool_calls"][0]["args"]
    assert args["unit"] == "units" and args["base"] == 10
    # a unit the numbers carry is a value of its own (BFCL parallel_65, dev: "5cm")
    question = "Find the area of a triangle with a base of 10cm and height of 5cm."
    table |= {'"cm"': -1.0}  # scored like any span: it is offered
    result = ask(question, ScriptedBackend(scorer=scorer(table)), tools=[TRIANGLE])
    assert result["ai_message"]["tool_calls"][0]["args"]["unit"] == "cm"
    # no unit stated, none given
    question = "Find the area of a triangle with a base of 10 and height of 5."
    result = ask(question, ScriptedBackend(scorer=scorer(table)), tools=[TRIANGLE])
    assert "unit" not in result["ai_message"]["tool_calls"][0]["args"]


CHARTS = {
    "name": "musicCharts.getMostPlayed",
    "description": "The most played song of a genre in a region.",
    "parameters": {
        "type": "object",
        "properties": {"genre": {"type": "string"}, "region": {"type": "string"}},
        "required": ["genre", "region"],
    },
}


def test_a_value_marked_like_a_used_one_asks_for_another_call_wherever_it_stands():
    """BFCL parallel_45 (development split): after the call for Pop in Australia nothing is
    stated after "Australia", so no value was "later" and the Rock call was never made.
    "Rock" is marked like "Pop" (after "played", before "song"): a sibling of a used value,
    it is evidence for another call and the value that call takes."""
    assert sibling_values(
        "What's the most played Pop song and the most played Rock song in Australia?",
        [{"genre": "Pop", "region": "Australia"}],
    ) == ["Rock"]
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "music": 0.0}
    table |= {'"Pop"': -0.5, '"Rock"': -1.0, '"Australia"': -6.0}
    region = {'"Australia"': -0.5, '"Rock"': -6.0, '"Pop"': -6.0}

    def score(prefix, continuation):
        if prefix.endswith('"region": '):
            return scorer(region)(prefix, continuation)
        return would_stop(table)(prefix, continuation)

    question = "What's the current most played Pop song and the most played Rock song in Australia?"
    weights = {"continue_lm_weight": 1.0, "continue_later_weight": 3.0, "later_value_bonus": 3.0}
    result = ask(question, ScriptedBackend(scorer=score), staged_profile(**weights), tools=[CHARTS])
    assert [c["args"] for c in result["ai_message"]["tool_calls"]] == [
        {"genre": "Pop", "region": "Australia"},
        {"genre": "Rock", "region": "Australia"},
    ]


NOTES_TEXT = """Notes

- Quarterly review is on Friday at 10:00.
- The sales table lives in data/sales.csv (20 rows: region, product, units, price).
"""

DATETIME_TOOL = {
    "name": "get_current_datetime",
    "description": "Get the current date and time.",
    "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}},
}
SKILL_TOOL = {
    "name": "read_skill",
    "description": "Read a skill's instructions (its SKILL.md) and list its files.",
    "parameters": {
        "type": "object",
        "properties": {"skill_name": {"type": "string"}},
        "required": ["skill_name"],
    },
}


def after_call(question, name, args, output, status="success"):
    call = {"id": "call_001", "name": name, "args": args}
    result = {
        "status": status,
        "output": output if status == "success" else None,
        "error": None if status == "success" else output,
    }
    return [
        {"role": "user", "content": question},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_001", "name": name, "content": json.dumps(result),
         "status": status},
    ]  # fmt: skip


# the model (scripted) would call the clock after the read, as the bundled one did
LURED = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "get_current_datetime": 0.0}


def decide_after(messages, tools, table=LURED):
    backend = ScriptedBackend(['{"content": "Friday at 10:00."}'], scorer=scorer(table))
    result = generate_ai_message(staged_profile(), messages, tools, backend=backend).to_dict()
    return result, result["attempts"][0]["staged"]


def test_once_the_calls_succeeded_a_question_without_a_next_step_is_answered():
    # "Open notes.txt and tell me the time of the quarterly review." read notes.txt, then
    # called get_current_datetime and answered with the clock
    reader = basic_tools()[0]
    messages = after_call(
        "Open notes.txt and tell me the time of the quarterly review.",
        "file_reader", {"path": "notes.txt"}, {"path": "notes.txt", "content": NOTES_TEXT},
    )  # fmt: skip
    result, staged = decide_after(messages, [reader, DATETIME_TOOL])
    assert staged["nothing_next"] is True and staged["choice"] == "answer"
    assert result["ai_message"]["tool_calls"] == []


def test_a_next_step_in_words_a_failed_call_or_instructions_let_another_call_be_made():
    reader = basic_tools()[0]
    notes = {"path": "notes.txt", "content": NOTES_TEXT}
    then = after_call(
        "Open notes.txt, then tell me the current time.",
        "file_reader",
        {"path": "notes.txt"},
        notes,
    )
    failed = after_call(
        "Open note.txt and tell me the time of the review.",
        "file_reader", {"path": "note.txt"}, "no such file: note.txt", status="error",
    )  # fmt: skip
    skill = after_call(
        "What's the date? Use the clock skill.",
        "read_skill", {"skill_name": "clock"}, {"instructions": "Call get_current_datetime."},
    )  # fmt: skip
    for messages, tools in [
        (then, [reader, DATETIME_TOOL]),
        (failed, [reader, DATETIME_TOOL]),
        (skill, [SKILL_TOOL, DATETIME_TOOL]),
    ]:
        result, staged = decide_after(messages, tools)
        assert "nothing_next" not in staged and staged["choice"] == "call"
        assert [c["name"] for c in result["ai_message"]["tool_calls"]] == ["get_current_datetime"]


def test_a_next_step_after_a_search_passes_the_repeated_search_over_to_the_reader():
    # "Search the workspace for files about the quarterly review, then read the file you
    # find." searched, then chose the same search again and answered from the hit
    # (development task two_step): the repeat is passed over for the next tool that can be
    # filled, the reader, with the file the hit names
    reader, search = basic_tools()[0], basic_tools()[2]
    hits = {"results": [{"path": "notes.txt", "line": 3, "snippet": "Quarterly review ..."}]}
    messages = after_call(
        "Search the workspace for files about the quarterly review, then read the file you find.",
        "local_file_search", {"query": "quarterly review"}, hits,
    )  # fmt: skip
    table = {
        CALL_OPENING: 0.0,
        ANSWER_OPENING: -9.0,
        "local_file_search": 0.0,
        "file_reader": -3.0,
        '"quarterly review"': 0.0,
        '"notes.txt"': 0.0,
    }
    result, staged = decide_after(messages, [reader, search], table)
    assert [c["name"] for c in staged["passed_over"]] == ["local_file_search"]
    assert staged["passed_over"][0]["repeat_of_a_done_call"]
    calls = result["ai_message"]["tool_calls"]
    assert [(c["name"], c["args"]) for c in calls] == [("file_reader", {"path": "notes.txt"})]
    # without a next step in words the repeat ends the decision: the result is in hand
    done = after_call(
        "Search the workspace for files about the quarterly review.",
        "local_file_search", {"query": "quarterly review"}, hits,
    )  # fmt: skip
    backend = ScriptedBackend(
        ['{"content": "notes.txt mentions the quarterly review."}'], scorer=scorer(table)
    )
    result = generate_ai_message(staged_profile(), done, [reader, search], backend=backend)
    staged = result.to_dict()["attempts"][0]["staged"]
    assert "passed_over" not in staged and result.to_dict()["ai_message"]["tool_calls"] == []


def city_tool(name, description):
    """A tool that takes a city (``location``, required): the weather skill's kind."""
    return tool_of(name, description, location="string")


def test_a_skill_read_again_is_passed_over_for_the_skills_tool():
    # development task weather: after read_skill, the same read scored first again and the
    # decision answered with the skill's instructions ("Use this skill when ...")
    forecast = city_tool("weather_forecast_current", "The current weather of a city.")
    messages = after_call(
        "What's the weather in London?",
        "read_skill", {"skill_name": "weather-forecast"}, {"body": "Run the helper script."},
    )  # fmt: skip
    table = {
        CALL_OPENING: 0.0,
        ANSWER_OPENING: -9.0,
        "read_skill": 0.0,
        "weather_forecast_current": -3.0,
        '"weather-forecast"': 0.0,
        '"London"': 0.0,
    }
    # as lokal's read_skill: the installed skills' names are its parameter's enum
    skill = json.loads(json.dumps(SKILL_TOOL))
    skill["parameters"]["properties"]["skill_name"]["enum"] = ["weather-forecast"]
    result, staged = decide_after(messages, [skill, forecast], table)
    assert [c["name"] for c in staged["passed_over"]] == ["read_skill"]
    calls = result["ai_message"]["tool_calls"]
    assert [(c["name"], c["args"]) for c in calls] == [
        ("weather_forecast_current", {"location": "London"})
    ]


def test_a_next_step_that_is_the_answer_passes_nothing_over():
    # make run's question on the fresh-clone CI of 7470be0: the repeated read was passed
    # over for a search of the file's name, the loop ran to max_iterations and the answer
    # was the empty search's "results: none"
    reader, search = basic_tools()[0], basic_tools()[2]
    question = (
        "Use the file_reader tool to read docs/agent_intro.txt, then tell me what an agent "
        "is made of."
    )
    read = {"path": "docs/agent_intro.txt", "content": "An agent has four parts: Model, Tools."}
    messages = after_call(question, "file_reader", {"path": "docs/agent_intro.txt"}, read)
    table = {
        CALL_OPENING: 0.0,
        ANSWER_OPENING: -9.0,
        "file_reader": 0.0,
        '"docs/agent_intro.txt"': 0.0,
        "local_file_search": -1.0,
    }
    backend = ScriptedBackend(
        ['{"content": "An agent has four parts: Model, Tools."}'], scorer=scorer(table)
    )
    result = generate_ai_message(staged_profile(), messages, [reader, search], backend=backend)
    staged = result.to_dict()["attempts"][0]["staged"]
    assert "passed_over" not in staged
    assert result.to_dict()["ai_message"]["tool_calls"] == []


def test_a_copied_line_with_words_of_its_own_around_it_is_retried_too():
    # p17a: "This guide shows how to work with the local agent runtime. The guide is a
    # text-based guide ..." passed as the model's own answer to "what does the calculator
    # tool do?" (not all of it copied, so not labelled quoted)
    reply = json.dumps(
        {
            "content": "This guide shows how to work with the local agent runtime. "
            "The guide is a text-based guide about the runtime."
        }
    )
    result = answer_after_guide(
        "Open docs/agent_guide.md: what does the calculator tool do?", [reply, reply]
    )
    assert result["attempts"][0]["error"]["type"] == "bad_reply"
    assert result["parse"]["answer_source"] == "extracted"
    assert "arithmetic" in result["ai_message"]["content"]


VEHICLE_EMISSION = {
    "name": "calculate_vehicle_emission",
    "description": "Calculate the yearly carbon emissions of a vehicle.",
    "parameters": {
        "type": "object",
        "properties": {
            "vehicle_type": {
                "type": "string",
                "description": "The type of vehicle. 'gas' refers to a gasoline vehicle, "
                "'diesel' refers to a diesel vehicle, and 'EV' to an electric vehicle.",
            },
            "miles_driven": {"type": "integer"},
            "fuel": {"type": "string", "description": "Optional fuel, e.g. petrol or ethanol."},
        },
        "required": ["vehicle_type", "miles_driven"],
    },
}


def test_an_option_the_description_lists_is_the_value_the_question_states():
    # BFCL simple_python_70 (development split): "a gas-powered vehicle" gave vehicle_type
    # "gas-powered", a span of the question; the description's option 'gas' is offered and
    # taken, whatever the model's likelihood, as a cued enum value is
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "calculate": 0.0}
    table |= {'"gas-powered"': -0.1, '"gas"': -5.0, "1500": -0.1}
    question = "What is the carbon footprint of a gas-powered vehicle driving 1500 miles a year?"
    result = ask(question, ScriptedBackend(scorer=scorer(table)), tools=[VEHICLE_EMISSION])
    call = result["ai_message"]["tool_calls"][0]
    assert call["args"] == {"vehicle_type": "gas", "miles_driven": 1500}
    # an optional parameter whose listed option the question states is given
    table |= {'"ethanol"': -1.0}
    question = "The footprint of a gas-powered vehicle on ethanol driving 1500 miles?"
    result = ask(question, ScriptedBackend(scorer=scorer(table)), tools=[VEHICLE_EMISSION])
    assert result["ai_message"]["tool_calls"][0]["args"]["fuel"] == "ethanol"


EMPLOYEE = {
    "name": "employee.fetch_data",
    "description": "Fetch the data of an employee.",
    "parameters": {
        "type": "object",
        "properties": {
            "employee_id": {"type": "integer"},
            "data_field": {
                "type": "array",
                "items": {
                    "type": "string",
                    "enum": ["Personal Info", "Job History", "Payroll", "Attendance"],
                },
                "description": "Fields to fetch (optional).",
            },
        },
        "required": ["employee_id"],
    },
}


def test_the_items_of_an_enum_list_the_question_names_are_a_candidate_and_keep_the_parameter():
    # BFCL simple_python_90 (development split): "Personal Info and Job History" left the
    # optional list out; the enum items the question names, in its order, are one candidate
    from lokal.llm.staged import args_schema
    from lokal.llm.staged.engine import cued_items

    question = "Retrieve Job History and Personal Info data of the employee whose ID is 345."
    assert cued_items(EMPLOYEE["parameters"]["properties"]["data_field"], question) == [
        "Job History",
        "Personal Info",
    ]
    from lokal.tools.schema import ToolSpec

    tool = ToolSpec.from_dict(EMPLOYEE)
    settings = staged_profile().tool_calling
    assert "data_field" in args_schema(tool, question, settings)["properties"]
    assert "data_field" not in args_schema(tool, "Fetch employee 345.", settings)["properties"]
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "employee": 0.0, "345": -0.1}
    table |= {'["Job History", "Personal Info"]': -2.0}
    result = ask(question, ScriptedBackend(scorer=scorer(table)), tools=[EMPLOYEE])
    assert result["ai_message"]["tool_calls"][0]["args"] == {
        "employee_id": 345,
        "data_field": ["Job History", "Personal Info"],
    }


RESTAURANTS = {
    "name": "find_restaurants",
    "description": "Locate nearby restaurants.",
    "parameters": {
        "type": "object",
        "properties": {
            "location": {"type": "string"},
            "dietary_requirements": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Special dietary requirements, e.g. vegan, gluten-free.",
            },
            "cuisines": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Cuisines, e.g. Thai.",
            },
        },
        "required": ["location"],
    },
}


def test_the_options_a_list_describes_that_the_question_states_are_a_candidate():
    # BFCL simple_python_80 (development split): "a vegan menu" left the optional list of
    # dietary requirements out; the options its description lists that the question states
    # keep the parameter and are one candidate, in the question's order
    from lokal.llm.staged import args_schema
    from lokal.llm.staged.engine import listed_items
    from lokal.tools.schema import ToolSpec

    spec = RESTAURANTS["parameters"]["properties"]["dietary_requirements"]
    assert listed_items(spec, "gluten-free and vegan food") == ["gluten-free", "vegan"]
    assert listed_items(spec, "Thai food") == []
    assert listed_items(EMPLOYEE["parameters"]["properties"]["data_field"], "Payroll") == []
    tool = ToolSpec.from_dict(RESTAURANTS)
    settings = staged_profile().tool_calling
    question = "Find restaurants in Manhattan offering Thai food and a vegan menu."
    kept = args_schema(tool, question, settings)["properties"]
    # a single example shows a form: "Thai" does not ask for the cuisines
    assert "dietary_requirements" in kept and "cuisines" not in kept
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "find": 0.0, '"Manhattan"': -0.1}
    table |= {'["vegan"]': -3.0}
    result = ask(question, ScriptedBackend(scorer=scorer(table)), tools=[RESTAURANTS])
    assert result["ai_message"]["tool_calls"][0]["args"] == {
        "location": "Manhattan",
        "dietary_requirements": ["vegan"],
    }


def test_a_city_state_example_is_a_form_not_an_option():
    from lokal.llm.staged.engine import listed_options

    spec = {"type": "string", "description": "The city and state, e.g. Los Angeles, CA"}
    assert listed_options(spec, "Book a hotel in Los Angeles") == []
    assert listed_options({"type": "integer", "description": "One of 'gas'."}, "gas") == []


LOAN_EXAMPLE = {
    "name": "loan_eligibility_check",
    "description": "Check the eligibility for a loan.",
    "parameters": {
        "type": "object",
        "properties": {
            "financial_institution": {
                "type": "string",
                "description": "The name of the financial institution e.g. HSBC",
            },
            "loan_amount": {"type": "integer"},
        },
        "required": ["financial_institution", "loan_amount"],
    },
}


def test_an_option_an_earlier_call_took_is_no_cue_for_the_next_call():
    # BFCL parallel_20 (development split): "e.g. HSBC" made HSBC the bank of both calls;
    # the second call's bank is the one stated later, as without the description's example
    score = would_stop({CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "loan": 0.0})
    table = {'"HSBC"': -0.1, '"Wells Fargo"': -2.0, "500000": -0.1, "700000": -2.0}

    def scored(prefix, continuation):
        for key, value in table.items():
            if continuation.startswith(key):
                return value
        return score(prefix, continuation)

    weights = {"continue_lm_weight": 1.0, "continue_later_weight": 3.0, "later_value_bonus": 3.0}
    question = "Check a loan of $500,000 from HSBC, and from Wells Fargo a loan of $700,000."
    result = ask(question, ScriptedBackend(scorer=scored), staged_profile(**weights),
                 tools=[LOAN_EXAMPLE])  # fmt: skip
    assert [c["args"] for c in result["ai_message"]["tool_calls"]] == [
        {"financial_institution": "HSBC", "loan_amount": 500000},
        {"financial_institution": "Wells Fargo", "loan_amount": 700000},
    ]


CONVERT = {
    "name": "currency_conversion.convert",
    "description": "Convert a value from one currency to another.",
    "parameters": {
        "type": "object",
        "properties": {
            "amount": {"type": "integer"},
            "from_currency": {"type": "string"},
            "to_currency": {"type": "string"},
        },
        "required": ["amount", "from_currency", "to_currency"],
    },
}


def test_a_value_after_to_is_where_to_not_where_from():
    # BFCL simple_python_390 (development split): "Convert 150 Euros to Canadian dollars"
    # gave from_currency "Canadian", the model's likeliest span; the currency after "to" is
    # a destination (candidates.direction_cue), worth direction_value_bonus either way
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "currency": 0.0, "150": -0.1}
    source = table | {'"Canadian"': -0.5, '"Euros"': -2.0, '"Canadian dollars"': -2.5}
    target = table | {'"Canadian dollars"': -0.5, '"Euros"': -2.0}

    def score(prefix, continuation):
        side = target if prefix.endswith('"to_currency": ') else source
        return scorer(side)(prefix, continuation)

    question = "Convert 150 Euros to Canadian dollars."
    args = {}
    for bonus in (0.0, 3.0):
        profile = staged_profile(direction_value_bonus=bonus)
        result = ask(question, ScriptedBackend(scorer=score), profile, tools=[CONVERT])
        args[bonus] = result["ai_message"]["tool_calls"][0]["args"]
    assert args[0.0]["from_currency"] == "Canadian"
    assert args[3.0] == {"amount": 150, "from_currency": "Euros", "to_currency": "Canadian dollars"}


HOTEL_ROOMS = {
    "name": "hotel_bookings.book_room",
    "description": "Book a hotel room.",
    "parameters": {
        "type": "object",
        "properties": {
            "location": {"type": "string"},
            "no_of_nights": {"type": "integer"},
            "no_of_rooms": {"type": "integer", "description": "Number of rooms, default 1."},
        },
        "required": ["location", "no_of_nights"],
    },
}


def test_an_optional_parameter_is_left_out_when_its_value_is_another_ones():
    # BFCL simple_python_385 (development split): "a hotel room ... for 2 nights" named
    # no_of_rooms ("room") and gave it the 2 of the nights; a number the question writes
    # once fills one parameter, so the optional one is left out (candidates.taken_number)
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "hotel": 0.0, '"Los Angeles"': -0.1}
    table |= {"2": -0.1, "15": -4.0}
    question = "Book a hotel room in Los Angeles for 2 nights starting from 15th October."
    result = ask(question, ScriptedBackend(scorer=scorer(table)), tools=[HOTEL_ROOMS])
    assert result["ai_message"]["tool_calls"][0]["args"] == {
        "location": "Los Angeles",
        "no_of_nights": 2,
    }
    staged = result["attempts"][-1]["staged"]
    assert staged["optional_left_out"] == {"no_of_rooms": "taken number"}
    # written twice, both take it
    question = "Book 2 hotel rooms in Los Angeles for 2 nights starting from 15th October."
    result = ask(question, ScriptedBackend(scorer=scorer(table)), tools=[HOTEL_ROOMS])
    args = result["ai_message"]["tool_calls"][0]["args"]
    assert args == {"location": "Los Angeles", "no_of_nights": 2, "no_of_rooms": 2}


DENSITY = {
    "name": "calculate_density",
    "description": "Calculate the population density of a country.",
    "parameters": {
        "type": "object",
        "properties": {
            "population": {"type": "integer", "description": "The population."},
            "people_in_millions": {"type": "number", "description": "Population in millions."},
        },
        "required": ["population"],
    },
}


def test_a_number_with_a_scale_word_is_offered_scaled_only():
    # BFCL simple_python_65: population 213 of "213 million", the model's likelier digits
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "calculate": 0.0}
    table |= {"213}": -0.1, "213000000": -3.0, "213,": -0.1}
    question = "The density of Brazil, whose population is 213 million?"
    result = ask(question, ScriptedBackend(scorer=scorer(table)), tools=[DENSITY])
    assert result["ai_message"]["tool_calls"][0]["args"]["population"] == 213000000
    # a parameter that counts in millions keeps the bare number
    from lokal.llm.staged import args_schema
    from lokal.tools.schema import ToolSpec

    tool = ToolSpec.from_dict(DENSITY)
    schema = args_schema(tool, question + " (people in millions)", staged_profile().tool_calling)
    assert "people_in_millions" in schema["properties"]
    result = ask(
        question + " Give the people in millions too.",
        ScriptedBackend(scorer=scorer(table)),
        tools=[DENSITY],
    )
    args = result["ai_message"]["tool_calls"][0]["args"]
    assert args["population"] == 213000000 and args["people_in_millions"] == 213


DECK = {
    "name": "find_card_in_deck",
    "description": "Find a card in a deck.",
    "parameters": {
        "type": "object",
        "properties": {
            "rank": {"type": "string"},
            "deck": {"type": "array", "items": {"type": "string"}, "description": "The deck."},
        },
        "required": ["rank"],
    },
}


def test_an_optional_parameter_with_nothing_to_give_is_left_out():
    # BFCL simple_python_335 (development split): "in the deck" named deck, which took [];
    # the list the model writes (no list in the question to offer) is the scripted reply
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "find": 0.0, '"Queen"': -0.1}
    backend = ScriptedBackend(["[]"], scorer=scorer(table))
    result = ask("Find the Queen in the deck.", backend, tools=[DECK])
    assert result["ai_message"]["tool_calls"][0]["args"] == {"rank": "Queen"}
    assert result["attempts"][-1]["staged"]["optional_left_out"] == {"deck": "empty"}


def test_a_name_written_with_its_comma_is_one_candidate():
    # BFCL simple_python_380 (dev split): "near Manhattan, New York"
    spans = text_spans("Book a room near Manhattan, New York for 3 nights.")
    assert "Manhattan, New York" in spans and "Manhattan New York" in spans
    assert "San Francisco, CA" in text_spans("Find restaurants in San Francisco, CA tonight.")
    # a lower-case word after the comma ends no name: "Boston, and you" is none
    assert not [s for s in text_spans("I live in Boston, and you?") if "," in s]


def test_an_ordinal_before_its_noun_is_no_value_alone():
    # BFCL simple_python_265 (dev split): "made in the 19th century"
    values = text_spans("Find sculptures that were made in the 19th century.")
    kept = bare_ordinals(values)
    assert "19th" in values and "19th" not in kept and "19th century" in kept
    # the ordinal a question ends on stays
    assert "5th" in bare_ordinals(text_spans("Book it for the 5th"))


SEASON_TOOL = {
    "name": "sports_stats",
    "description": "A player's performance in a tournament and season.",
    "parameters": {
        "type": "object",
        "properties": {
            "tournament": {"type": "string"},
            "season": {"type": "string"},
            "address": {"type": "string"},
        },
        "required": ["tournament", "season"],
    },
}


def ask_season(question, tournament, season):
    """The call for ``question`` with SEASON_TOOL, each parameter's values scored by its
    table; and the whole result."""

    def score(prefix, continuation):
        if prefix.endswith('"tournament": '):
            return scorer(tournament)(prefix, continuation)
        if prefix.endswith('"season": '):
            return scorer(season)(prefix, continuation)
        return scorer({CALL_OPENING: 0.0, ANSWER_OPENING: -9.0})(prefix, continuation)

    result = ask(question, ScriptedBackend(scorer=score), tools=[SEASON_TOOL])
    return result["ai_message"]["tool_calls"][0]["args"], result


def test_a_value_does_not_hold_another_parameters_value():
    # BFCL simple_python_305 (dev split): tournament "La Liga 2020-2021" beside season
    # "2020-2021" becomes "La Liga"
    args, result = ask_season(
        "Goals of Messi in La Liga 2020-2021 season",
        {'"La Liga 2020-2021"': -1.0, '"La Liga"': -2.0},
        {'"2020-2021"': -0.5},
    )
    assert args == {"tournament": "La Liga", "season": "2020-2021"}
    trace = result["attempts"][-1]["staged"]["args"][0]["tournament"]
    assert trace["switched"] == "holds another parameter's value"


def test_a_value_written_with_a_comma_keeps_what_it_holds():
    args, _ = ask_season(
        "Results of 'Cup 2020, Paris' in Paris",
        {'"Cup 2020, Paris"': -1.0, '"Cup"': -2.0},
        {'"Paris"': -0.5},
    )
    assert args == {"tournament": "Cup 2020, Paris", "season": "Paris"}


@pytest.mark.parametrize(
    "question, counted",
    [
        # BFCL simple_python_370, simple_python_375, live_simple_250 (dev split)
        (
            "Order three bottles of olive oil and a five pound bag of rice from Safeway.",
            [(3, "olive oil"), (1, "rice")],
        ),
        (
            "Check the price of three pumpkins and two dozen eggs at Walmart.",
            [(3, "pumpkins"), (24, "eggs")],
        ),
        ("I'd like two Big Macs and one McFlurry.", [(2, "Big Macs"), (1, "McFlurry")]),
        ("Buy 2 apples, 3 pears, and 1 melon please", [(2, "apples"), (3, "pears"), (1, "melon")]),
        # one counted thing is no list; a clause after a count is no item
        ("Plan a 7-day trip to Tokyo with a budget of $200", []),
        ("Send two reports that describe the whole quarter in detail and one note", []),
    ],
)
def test_the_items_a_question_counts(question, counted):
    assert counted_items(question) == counted


def test_item_names_in_the_singular():
    assert singular_names(["Big Macs", "McFlurry", "glasses", "cherries"]) == [
        "Big Mac",
        "McFlurry",
        "glass",
        "cherry",
    ]


ORDER_TOOL = {
    "name": "order_food",
    "description": "Order food.",
    "parameters": {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"type": "string"}},
            "quantities": {"type": "array", "items": {"type": "integer"}},
        },
        "required": ["items", "quantities"],
    },
}


def test_an_orders_items_and_quantities_are_candidates():
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, '["Big Mac"': -0.5, '["Big Macs"': -1.0}
    backend = ScriptedBackend(scorer=scorer(table))
    result = ask("I'd like two Big Macs and one McFlurry.", backend, tools=[ORDER_TOOL])
    args = result["ai_message"]["tool_calls"][0]["args"]
    assert args == {"items": ["Big Mac", "McFlurry"], "quantities": [2, 1]}
    offered = next(c for p, c in backend.scored if p.endswith('"items": '))
    assert {c.split("]")[0] + "]" for c in offered} == {
        '["Big Macs", "McFlurry"]',
        '["Big Mac", "McFlurry"]',
    }


def test_the_thing_a_hyphenated_participle_names():
    # BFCL simple_python_200, multiple_145 (dev split): fuel_type "gas" of "gas-fueled"
    question = "CO2 of a gas-fueled car, a solar-powered home and a well-known plant-based diet"
    assert compound_heads(question) == ["gas", "solar", "plant"]
    assert compound_heads("a state-of-the-art, 19th-century, X-rayed thing") == []


@pytest.mark.parametrize(
    "question, away",
    [
        # BFCL parallel_120, parallel_multiple_100 (dev split): the whole name, as written
        (
            "the Amazon Rainforest and the Boreal Forests of Canada",
            {"Amazon", "Boreal Forests", "Boreal", "Rainforest"},
        ),
        ("the stock price of Apple Inc. over the next 30 days", {"Apple", "Inc"}),
        ("a supermarket in New York City that opens 24 hours", {"New York", "New", "City"}),
    ],
)
def test_a_name_the_question_writes_whole_is_offered_whole(question, away):
    values = text_spans(question)
    kept = whole_names(values, question)
    assert away <= set(values) and not away & set(kept)
    assert set(kept) == set(values) - away


def test_the_end_of_a_name_and_a_name_alone_stay():
    question = "Visit Paris and Rome"
    assert "Paris" in whole_names(text_spans(question), question)
    # no whole name offered: nothing taken away
    assert whole_names(["New York"], "New York City") == ["New York"]


@pytest.mark.parametrize(
    ("question", "kinds", "away"),
    [
        # BFCL multiple_85, multiple_190, parallel_multiple_180 (development split)
        ("Get the soccer scores for Real Madrid games in La Liga.", [], {"Liga", "Madrid"}),
        ("Book a single room at the Hilton Hotel in Chicago", ["room", "type", "hotel"], {"Hotel"}),
        ("Who discovered the Higgs Boson and when?", [], {"Boson"}),
    ],
)
def test_the_last_word_of_a_name_inside_a_sentence_is_no_value_alone(question, kinds, away):
    values = text_spans(question)
    kept = whole_names(values, question, kinds)
    assert away <= set(values) and not away & set(kept)
    assert {"Real Madrid", "La Liga", "Hilton Hotel", "Higgs Boson"} & set(kept)


@pytest.mark.parametrize(
    ("question", "end"),
    [
        ("Visit Paris and Rome", "Paris"),  # the name opens its sentence: a verb and a name
        ("Lawyer John Doe in Texas", "John Doe"),
        ("the Boreal Forests of Canada", "Canada"),  # a name of its own after "of"
        ("Compare Real Madrid with Madrid's other club", "Madrid"),  # written alone too
        ("the user with ID U123456", "U123456"),  # an identifier, not a word
    ],
)
def test_the_end_of_a_name_stays_where_it_stands_alone(question, end):
    assert end in whole_names(text_spans(question), question)


def test_a_name_that_ends_with_what_the_value_is_keeps_its_beginning():
    # BFCL simple_python_355 (dev split): "the Beef Lasagna Recipe" for a recipe
    question = "How many calories in the Beef Lasagna Recipe from Foodnetwork.com?"
    values = text_spans(question)
    assert "Beef Lasagna" in whole_names(values, question, ["recipe", "calories"])
    assert "Beef Lasagna" not in whole_names(values, question)
    # a run that ends with a number ends with a value of its own (a season)
    question = "Goals of Messi in La Liga 2020-2021"
    assert "La Liga" in whole_names(text_spans(question), question)


BINOMIAL = tool_of(
    "binomial",
    "The probability of a number of successes in independent trials.",
    trials="integer",
    successes="integer",
)


@pytest.mark.parametrize(
    ("question", "args"),
    [
        # BFCL parallel_160 (development split): the model liked 50 for both
        ("If you play 50 times, the chance of winning exactly 15 times?", (50, 15)),
        # a number the question writes twice may fill two parameters
        ("If you play 50 times, the chance of winning 50 times?", (50, 50)),
    ],
)
def test_a_number_written_once_fills_one_parameter_of_a_call(question, args):
    def score(prefix, continuation):
        table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "binomial": 0.0}
        if prefix.endswith('"trials": '):
            table |= {"50": -0.5, "15": -3.0}
        if prefix.endswith('"successes": '):
            table |= {"50": -0.5, "15": -1.0}
        return scorer(table)(prefix, continuation)

    result = ask(question, ScriptedBackend(scorer=score), tools=[BINOMIAL])
    found = result["ai_message"]["tool_calls"][0]["args"]
    assert (found["trials"], found["successes"]) == args


def test_an_enum_item_is_cued_by_its_singular():
    # BFCL multiple_80 (development split): "a guitar shop" names the item "Guitars"
    from lokal.llm.staged.engine import cued_items

    spec = {"type": "array", "items": {"type": "string", "enum": ["Guitars", "Pianos", "Drums"]}}
    assert cued_items(spec, "Find a local guitar shop in Nashville.") == ["Guitars"]
    assert cued_items(spec, "Find a local shop in Nashville.") == []


def test_a_number_written_once_that_an_earlier_call_gave_another_parameter_is_not_reused():
    """BFCL parallel_175 (development split): "$8000 in Microsoft ... a return of 6%" made
    8000 the next call's expected return; a number the question writes once that an
    earlier call of the reply gave to another parameter is that parameter's."""
    invest = {
        "name": "future_value",
        "description": "The future value of an amount invested for some years.",
        "parameters": {
            "type": "object",
            "properties": {"amount": {"type": "integer"}, "years": {"type": "integer"}},
            "required": ["amount", "years"],
        },
    }

    amounts = {1: "5000", 2: "8000", 3: "10000"}
    years = {1: "5", 2: "7", 3: "9"}

    def score(prefix, continuation):
        call = prefix.count('"amount"')  # the call being filled (1, 2, 3)
        if continuation == ', {"name": "':
            return 0.0 if call < 3 else -9.0
        if continuation == "]}":
            return -1.0
        table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "future_value": 0.0}
        if prefix.endswith('"amount": '):
            table[amounts[call]] = 0.0
        if prefix.endswith('"years": '):
            table[years[call]] = -1.0
            if call == 3:  # the model likes the second call's amount for the third's years
                table |= {"8000": 0.0, "9": -5.0}
        return scorer(table)(prefix, continuation)

    question = (
        "I invested $5000 for 5 years, $8000 for 7 years and $10000 for 9 years. "
        "What are they worth?"
    )
    result = ask(question, ScriptedBackend(scorer=score), tools=[invest])
    found = [c["args"] for c in result["ai_message"]["tool_calls"]]
    assert found == [
        {"amount": 5000, "years": 5},
        {"amount": 8000, "years": 7},
        {"amount": 10000, "years": 9},
    ]


def test_a_name_and_its_alias_in_parentheses_are_one_value():
    """BFCL parallel_175 (development split): after the call for "Amazon.com", "(AMZN)" made
    a fourth call; a name and the other name the question gives it in parentheses are one
    thing written twice."""
    from lokal.llm.staged.candidates import aliases

    question = (
        "I invested $5000 in Apple Inc. (AAPL) for 5 years, and $10000 in Amazon.com Inc. "
        "(AMZN) for 10 years."
    )
    assert aliases(question, ["Amazon.com"]) == {"amzn"}
    assert aliases(question, ["AAPL"]) == {"apple inc"}
    assert aliases(question, ["Boston"]) == set()
    first = [{"stock": "AAPL", "amount": 5000, "years": 5}]
    assert "Apple Inc" not in later_values(question, first)
    assert "Amazon.com Inc" in later_values(question, first)
    last = [*first, {"stock": "Amazon.com", "amount": 10000, "years": 10}]
    assert later_values(question, last) == []


COUNTRY_TOOLS = [
    {
        "name": f"country_info.{what}",
        "description": f"Fetch the {words} of a country.",
        "parameters": {
            "type": "object",
            "properties": {"country": {"type": "string", "description": "The country."}},
            "required": ["country"],
        },
    }
    for what, words in [
        ("largest_city", "largest city"),
        ("population", "current population"),
        ("capital", "capital city"),
    ]
]


def test_the_first_call_of_a_request_in_parts_is_about_its_first_part():
    """BFCL parallel_multiple_60 (development split): the whole question ranked
    largest_city first, so the capital was never asked for; the first call's tool is ranked
    against the first part of the request as much as against the whole. The model's name
    scores are flat here: the ranking decides."""
    question = (
        "What is the capital city of Australia, what is the current population of Canada, "
        "and what is the largest city in Brazil?"
    )
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "country_info": 0.0, '"Australia"': 0.0}
    profile = staged_profile(name_similarity_weight=5.0, name_bm25_weight=2.0)
    result = ask(question, ScriptedBackend(scorer=would_stop(table)), profile, COUNTRY_TOOLS)
    assert result["ai_message"]["tool_calls"][0]["name"] == "country_info.capital"


RECIPE_TOOLS = [
    {
        "name": name,
        "description": description,
        "parameters": {
            "type": "object",
            "properties": {"recipe": {"type": "string", "description": "The recipe."}},
            "required": ["recipe"],
        },
    }
    for name, description in [
        ("recipe_search", "Search for a recipe for a dish."),
        ("recipe_prep_time", "How long a recipe takes to prepare and cook."),
        ("recipe_nutrition_info", "The nutritional information of a recipe."),
    ]
]


def test_the_next_call_is_about_the_part_closest_to_a_tool_not_called():
    """BFCL parallel_multiple_55 (development split): after the search and the preparation
    time, the next part left was "cook" (of "prepare and cook"), which asked for the
    preparation time again, and the nutrition was never asked for. With no value left for
    another call, the next call is about the part closest to a tool not called yet. The
    model wants three calls; its name scores are flat: the parts decide."""

    def score(prefix, continuation):
        if continuation == ', {"name": "':
            return 0.0 if prefix.count('"recipe"') < 3 else -9.0
        if continuation == "]}":
            return -1.0
        table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "recipe": 0.0, '"spaghetti"': 0.0}
        return scorer(table)(prefix, continuation)

    question = (
        "Search for a spaghetti recipe, how long will it take to prepare and cook, and what "
        "nutritional information could it provide me?"
    )
    profile = staged_profile(name_similarity_weight=5.0, name_bm25_weight=2.0)
    result = ask(question, ScriptedBackend(scorer=score), profile, RECIPE_TOOLS)
    names = [c["name"] for c in result["ai_message"]["tool_calls"]]
    assert sorted(names) == sorted(t["name"] for t in RECIPE_TOOLS)


def test_an_optional_number_written_beside_what_its_description_names_is_given():
    """BFCL parallel_160 (development split): "a 0.3 probability of winning" names the
    optional ``p`` ("The probability of success"), which was left out; the number beside the
    description's first word is its value, whatever the model likes."""
    tool = {
        "name": "binomial",
        "description": "The probability of a number of successes in independent trials.",
        "parameters": {
            "type": "object",
            "properties": {
                "trials": {"type": "integer", "description": "The number of trials."},
                "successes": {"type": "integer", "description": "The number of successes."},
                "p": {"type": "number", "description": "The probability of success."},
            },
            "required": ["trials", "successes"],
        },
    }

    def score(prefix, continuation):
        table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "binomial": 0.0}
        if prefix.endswith('"trials": '):
            table["20"] = 0.0
        if prefix.endswith('"successes": '):
            table["5"] = 0.0
        if prefix.endswith('"p": '):
            table["20"] = 0.0  # the model likes another number
        return scorer(table)(prefix, continuation)

    question = (
        "You have a 0.3 probability of winning. If you play 20 times, what is the chance of "
        "winning 5 times?"
    )
    result = ask(question, ScriptedBackend(scorer=score), tools=[tool])
    assert result["ai_message"]["tool_calls"][0]["args"] == {"trials": 20, "successes": 5, "p": 0.3}
    question = "If you play 20 times, what is the chance of winning 5 times?"
    result = ask(question, ScriptedBackend(scorer=score), tools=[tool])
    assert result["ai_message"]["tool_calls"][0]["args"] == {"trials": 20, "successes": 5}


def test_a_place_parameter_takes_no_amount():
    """BFCL parallel_multiple_145 (development split): the model liked "$300" for the
    lawyer's city; a place is no amount, number, date or time, whatever the model likes."""
    tool = {
        "name": "lawyer_find",
        "description": "Find a lawyer nearby.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city."},
                "fee": {"type": "integer", "description": "The most per hour."},
            },
            "required": ["city", "fee"],
        },
    }
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "lawyer": 0.0, '"$300"': 0.0}
    table |= {'"Boston"': -3.0, "300": 0.0}
    question = "Find a lawyer in Boston who charges less than $300 per hour."
    result = ask(question, ScriptedBackend(scorer=would_stop(table)), tools=[tool])
    assert result["ai_message"]["tool_calls"][0]["args"] == {"city": "Boston", "fee": 300}


def test_an_enum_value_an_earlier_call_took_waits_for_the_others_asked():
    """BFCL parallel_multiple_85 (development split): "the Euclidean algorithm ... but this
    time using the binary algorithm" gave Euclidean twice. The model likes Euclidean for
    both calls; the second call takes the value asked for that no call has taken."""
    tool = {
        "name": "gcd",
        "description": "The greatest common divisor of two numbers.",
        "parameters": {
            "type": "object",
            "properties": {
                "num1": {"type": "integer"},
                "num2": {"type": "integer"},
                "algorithm": {"type": "string", "enum": ["euclidean", "binary"]},
            },
            "required": ["num1", "num2", "algorithm"],
        },
    }

    def score(prefix, continuation):
        if continuation == ', {"name": "':
            return 0.0 if prefix.count('"num1"') < 2 else -9.0
        if continuation == "]}":
            return -1.0
        table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "gcd": 0.0, '"euclidean"': 0.0}
        return scorer(table)(prefix, continuation)

    question = (
        "Find the greatest common divisor of 56 and 98 using the Euclidean algorithm, and of "
        "81 and 27, but this time using the binary algorithm."
    )
    result = ask(question, ScriptedBackend(scorer=score), tools=[tool])
    calls = [c["args"] for c in result["ai_message"]["tool_calls"]]
    assert [c["algorithm"] for c in calls] == ["euclidean", "binary"]
    # one value asked for: every call takes it, though the model likes the other

    def likes_binary(prefix, continuation):
        if prefix.endswith('"algorithm": '):
            return {'"binary"': 0.0}.get(continuation.split(",")[0].split("}")[0], -2.0)
        return score(prefix, continuation)

    question = "The gcd of 56 and 98 and of 81 and 27, each with the euclidean algorithm"
    result = ask(question, ScriptedBackend(scorer=likes_binary), tools=[tool])
    calls = [c["args"] for c in result["ai_message"]["tool_calls"]]
    assert [c["algorithm"] for c in calls] == ["euclidean", "euclidean"]


@pytest.mark.parametrize(
    "question, opening",
    [
        (
            "Can you help me with a few calculations? First, I need the power of 7 raised to "
            "3. Then, the chance of a red card from a deck of 52 cards.",
            "First, I need the power of 7 raised to 3.",
        ),
        ("The power of 7 raised to 3, then the chance of a red card", None),
        ("Apple Inc. (AAPL) and Microsoft", None),
    ],
)
def test_the_sentence_a_request_opens_with(question, opening):
    assert opening_part(question) == opening


POWER_TOOLS = [
    {
        "name": "power",
        "description": "A number raised to a power.",
        "parameters": {
            "type": "object",
            "properties": {"base": {"type": "integer"}, "exponent": {"type": "integer"}},
            "required": ["base", "exponent"],
        },
    },
    {
        "name": "dna_fetch",
        "description": "Fetch a DNA sequence by its id.",
        "parameters": {
            "type": "object",
            "properties": {"dna_id": {"type": "string"}, "upstream": {"type": "integer"}},
            "required": ["dna_id"],
        },
    },
]


def test_the_first_call_takes_the_values_of_the_first_sentence():
    """BFCL parallel_multiple_155 (development split): "First, I need to calculate the
    power of 7 raised to 3. ... upstream 5 ..." gave the power a base of 5, the number the
    model liked; the first call of a request in several sentences takes the values of the
    first sentence first."""
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "power": 0.0, "dna": -5.0}
    table |= {"5": 0.0, "7": -1.0, "3": -2.0}
    question = (
        "Can you help me with a few calculations? First, I need to calculate the power of 7 "
        "raised to 3. Then, fetch the DNA sequence 'XYZ123' with 5 base pairs upstream."
    )
    profile = staged_profile(later_value_bonus=3.0)
    result = ask(question, ScriptedBackend(scorer=would_stop(table)), profile, POWER_TOOLS)
    call = result["ai_message"]["tool_calls"][0]
    assert (call["name"], call["args"]) == ("power", {"base": 7, "exponent": 3})
    # a request of one sentence: the model's choice
    question = "Calculate the power of 7 raised to 3, then fetch DNA 'XYZ123' 5 bases upstream"
    result = ask(question, ScriptedBackend(scorer=would_stop(table)), profile, POWER_TOOLS)
    assert result["ai_message"]["tool_calls"][0]["args"]["base"] == 5


SAFEWAY = {
    "name": "safeway.order",
    "description": "Order specified items from a Safeway location.",
    "parameters": {
        "type": "object",
        "properties": {
            "location": {"type": "string", "description": "The location of the store."},
        },
        "required": ["location"],
    },
}


def test_a_value_made_of_the_tools_own_name_is_no_argument():
    # BFCL simple_python_370 (development split): location "Safeway", then "Safeway in Palo
    # Alto" for safeway.order, which the model likes best; the place alone is taken instead
    backend = ScriptedBackend(
        scorer=scorer(
            {
                CALL_OPENING: 0.0,
                ANSWER_OPENING: -9.0,
                "safeway.order": 0.0,
                '"Safeway"': -1.0,
                '"Safeway in Palo Alto"': -2.0,
                '"Palo Alto"': -4.0,
            }
        )
    )
    result = ask("Order rice from Safeway in Palo Alto.", backend, tools=[SAFEWAY])
    assert result["ai_message"]["tool_calls"][0]["args"] == {"location": "Palo Alto"}


def test_not_the_tool_keeps_the_parameters_own_words_and_a_lone_value():
    from lokal.llm.staged.candidates import names_the_tool, not_the_tool

    assert names_the_tool("Safeway in Palo Alto", "safeway.order", "location")
    assert not names_the_tool("Hilton Hotel", "book_hotel", "hotel_name")
    assert not names_the_tool("Palo Alto", "safeway.order", "location")
    # a place whose name holds the tool's word (BFCL parallel_120, development split)
    assert not names_the_tool("Boreal Forests of Canada", "forest_growth_forecast", "location")
    assert names_the_tool("Hilton Hotel in Chicago", "book_hotel", "location")

    assert not_the_tool(["Hotel", "single"], "book_hotel", "room_type") == ["single"]
    # the parameter is about the hotel: its name may be the value's
    assert not_the_tool(["Hilton Hotel", "Hotel"], "book_hotel", "hotel_name") == [
        "Hilton Hotel",
        "Hotel",
    ]
    # nothing else to offer: the values stay
    assert not_the_tool(["DNA"], "fetch_DNA_sequence", "format") == ["DNA"]


RESTAURANT = {
    "name": "vegan_restaurant.find_nearby",
    "description": "Locate nearby vegan restaurants.",
    "parameters": {
        "type": "object",
        "properties": {
            "location": {"type": "string", "description": "The city and state."},
            "operating_hours": {
                "type": "integer",
                "description": "Preferred latest closing time. This is in 24 hour format.",
            },
        },
        "required": ["location"],
    },
}


@pytest.mark.parametrize(
    ("question", "args"),
    [
        # BFCL simple_python_35 (development split)
        (
            "Find a vegan restaurant in Boston that opens until at least 11 PM.",
            {"location": "Boston, MA", "operating_hours": 23},
        ),
        ("Find a vegan restaurant in Boston.", {"location": "Boston, MA"}),
    ],
)
def test_an_optional_time_of_day_is_given_when_the_question_states_one(question, args):
    # the model would take 11 as written; for an hour counted in 24 it is 11 AM, no candidate
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, RESTAURANT["name"]: 0.0, "11": 0.0}
    backend = ScriptedBackend(scorer=scorer(table | {'"Boston, MA"': 0.0, "23": -1.0}))
    result = ask(question, backend, tools=[RESTAURANT])
    assert result["ai_message"]["tool_calls"][0]["args"] == args


WEATHER_BY_DATE = {
    "name": "Weather_1_GetWeather",
    "description": "Retrieves the weather forecast for a city on a date.",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The name of the city."},
            "date": {"type": "string", "description": "The date, in the format 'YYYY-MM-DD'."},
        },
        "required": ["city", "date"],
    },
}


def test_a_date_relative_to_the_stated_today_is_offered_before_today():
    # BFCL live_simple_205 (development split) took today's date for "the upcoming Saturday"
    question = (
        "What's the weather in Berkeley on the upcoming Saturday? Today is Tuesday April 25th 2023"
    )
    seen = []

    def score(prefix, continuation):
        if prefix.endswith('"date": '):
            seen.append(continuation)
            return -1.0 if continuation.startswith('"2023-04-25"') else -2.0
        table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "Weather_1": 0.0, '"Berkeley"': 0.0}
        return scorer(table)(prefix, continuation)

    result = ask(question, ScriptedBackend(scorer=score), tools=[WEATHER_BY_DATE])
    # the model would take today's date; it is what the question counts from, no value
    assert result["ai_message"]["tool_calls"][0]["args"]["date"] == "2023-04-29"
    assert not any(s.startswith('"2023-04-25"') for s in seen)
