"""The light normalisations a staged decision offers as candidate values (issue 21)."""

from __future__ import annotations

import pytest

from lokal.llm.staged.candidates import (
    boolean_cue,
    formula_candidates,
    implied_numbers,
    iso_dates,
    number_candidates,
    number_words,
    percentages,
    unit_numbers,
)


@pytest.mark.parametrize(
    "text, numbers",
    [
        ("the top three results", [3]),
        ("twenty-five items", [25]),
        ("a dozen eggs", [12]),
        ("one hundred and five pages", [105]),
        ("two thousand three hundred", [2300]),
        ("the fourth quarter", [4]),
        ("no numbers here", []),
    ],
)
def test_number_words(text, numbers):
    assert number_words(text) == numbers


def test_percentages_as_given_and_as_fractions():
    assert percentages("a rate of 5% for 12.5 percent") == [5, 0.05, 12.5, 0.125]
    assert percentages("5 apples") == []


@pytest.mark.parametrize(
    "text, iso",
    [
        ("on March 10th, 2023", "2023-03-10"),
        ("10 March 2023", "2023-03-10"),
        ("the 1st of Feb 2024", "2024-02-01"),
        ("2023/03/10", "2023-03-10"),
        ("03/10/2023", "2023-03-10"),
    ],
)
def test_iso_dates(text, iso):
    assert iso_dates(text) == [iso]


def test_impossible_dates_are_not_offered():
    assert iso_dates("February 30, 2023") == []


def test_units_stripped_and_implied_numbers():
    assert unit_numbers("9.8 m/s^2, $1,200, 15kg.") == [9.8, 1200, 15]
    assert implied_numbers("A ball is dropped from a height of 10 m") == [0]
    assert implied_numbers("A ball is thrown up") == []
    assert number_candidates("the top three at 5%") == [5, 3, 0.05]


def test_a_staged_decision_offers_the_normalised_forms_as_candidates():
    from helpers import MODEL_CONFIG
    from lokal.config import load_profile
    from lokal.llm.backends.scripted import ScriptedBackend
    from lokal.llm.decide import generate_ai_message
    from lokal.llm.staged import ANSWER_OPENING, CALL_OPENING

    tool = {
        "type": "function",
        "function": {
            "name": "top_stocks",
            "description": "the best performing stocks",
            "parameters": {
                "type": "object",
                "properties": {
                    "count": {"type": "integer", "description": "how many"},
                    "since": {"type": "string", "description": "start date, YYYY-MM-DD"},
                },
                "required": ["count", "since"],
            },
        },
    }

    def score(prefix, continuation):
        if continuation.startswith(CALL_OPENING):
            return 0.0
        if continuation.startswith(ANSWER_OPENING):
            return -9.0
        return 0.0 if continuation.startswith(("3", '"2023-03-10"', "top_stocks")) else -5.0

    profile = load_profile(MODEL_CONFIG).with_tool_calling(
        mode="staged", preselect_k=None, staged={"generated_values": False}
    )
    question = "Show the top three stocks since March 10th, 2023"
    result = generate_ai_message(
        profile,
        [{"role": "user", "content": question}],
        [tool],
        backend=ScriptedBackend(scorer=score),
    )
    assert result.ai_message["tool_calls"][0]["args"] == {"count": 3, "since": "2023-03-10"}


@pytest.mark.parametrize(
    "name, text, value",
    [
        ("include_tax", "the price with tax", True),
        ("include_tax", "the price without tax", False),
        ("with_images", "a page including images", True),
        ("includeImages", "no images, please", False),
        ("dolby_atmos", "a cinema with Dolby Atmos sound", True),
        ("include_tax", "what is the price?", None),
        ("is_open", "is it open?", None),
        ("include", "with everything", None),  # a name with no thing to switch
    ],
)
def test_boolean_cue(name, text, value):
    assert boolean_cue(name, text) is value


def test_a_boolean_the_question_cues_is_chosen_whatever_the_model_prefers():
    from test_staged import ask, scorer, staged_profile

    from lokal.llm.backends.scripted import ScriptedBackend
    from lokal.llm.staged import ANSWER_OPENING, CALL_OPENING

    tool = {
        "name": "price",
        "description": "The price of an item.",
        "parameters": {
            "type": "object",
            "properties": {"item": {"type": "string"}, "include_tax": {"type": "boolean"}},
            "required": ["item", "include_tax"],
        },
    }
    for question, wanted in (("price of a lamp with tax", True), ("lamp, without tax", False)):
        backend = ScriptedBackend(
            scorer=scorer(
                {
                    CALL_OPENING: 0.0,
                    ANSWER_OPENING: -5.0,
                    "price": 0.0,
                    '"lamp"': -0.5,
                    "true": -1.0 if wanted is False else -9.0,  # the model prefers the other
                    "false": -1.0 if wanted is True else -9.0,
                }
            )
        )
        result = ask(question, backend, profile=staged_profile(), tools=[tool])
        assert result["ai_message"]["tool_calls"][0]["args"]["include_tax"] is wanted


@pytest.mark.parametrize(
    "text, formulas",
    [
        # the development pairs' arithmetic, which called the calculator with "2.5" or "36"
        ("Work out 2.5 * 40 for me.", ["2.5 * 40"]),
        ("How much is 2.5 times 40?", ["2.5 * 40"]),
        ("Compute 144 divided by 12, minus 3.", ["144 / 12 - 3"]),
        ("请计算 36 除以 4。", ["36 / 4"]),
        ("Use the calculator tool to add 1234 and 4321.", ["1234 + 4321"]),
        ("subtract 3 from 10", ["10 - 3"]),
        ("What is 2 to the power of 10?", ["2 ** 10"]),
        ("What is (3 + 4) * 2?", ["(3 + 4) * 2"]),
        ("Over 100 units were sold in 2023.", []),
        ("What is sqrt(2) * sin(pi / 4)?", []),  # not cut into "(2) * sin("
    ],
)
def test_formula_candidates(text, formulas):
    assert formula_candidates(text) == formulas


def test_an_expression_parameter_takes_the_whole_expression():
    # "Work out 2.5 * 40 for me." called calculator(expression="2.5"): the model preferred
    # the shorter span; an expression parameter takes whole expressions when there are some
    from helpers import MODEL_CONFIG
    from lokal.config import load_profile
    from lokal.llm.backends.scripted import ScriptedBackend
    from lokal.llm.decide import generate_ai_message
    from lokal.llm.staged import ANSWER_OPENING, CALL_OPENING

    calculator = {
        "name": "calculator",
        "description": "Calculate an arithmetic expression.",
        "parameters": {
            "type": "object",
            "properties": {
                "expression": {"type": "string", "description": "The arithmetic expression."}
            },
            "required": ["expression"],
        },
    }

    def score(prefix, continuation):
        if continuation.startswith(CALL_OPENING):
            return 0.0
        if continuation.startswith(ANSWER_OPENING):
            return -9.0
        return 0.0 if continuation.startswith(('"2.5"', '"2.5 / 12"', "calculator")) else -5.0

    profile = load_profile(MODEL_CONFIG).with_tool_calling(
        mode="staged", preselect_k=None, staged={"generated_values": False}
    )
    for question, expression in (
        ("Work out 2.5 * 40 for me.", "2.5 * 40"),
        ("How much is 2.5 times 40?", "2.5 * 40"),
        ("What is the square root of 2.5?", "2.5"),  # no expression stated: spans compete
        ("What is 2.5 / 12 - 3?", "2.5 / 12 - 3"),  # not its part "2.5 / 12"
    ):
        result = generate_ai_message(
            profile,
            [{"role": "user", "content": question}],
            [calculator],
            backend=ScriptedBackend(scorer=score),
        )
        assert result.ai_message["tool_calls"][0]["args"] == {"expression": expression}
