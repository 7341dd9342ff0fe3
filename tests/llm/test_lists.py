"""Lists the question writes out (lokal.llm.staged.lists) and the calls they add: pure
functions over fixed texts, and the staged engine with scripted scores (no model words)."""

import pytest
from test_staged import ask, scorer

from lokal.llm.backends.scripted import ScriptedBackend
from lokal.llm.staged import ANSWER_OPENING, CALL_OPENING
from lokal.llm.staged.lists import MAX_PRODUCT_CALLS, coordinated, cross_product

POINTS = {
    "type": "object",
    "properties": {
        "substance": {"type": "string", "description": "The substance."},
        "sea_level": {"type": "integer", "description": "Sea level in meters."},
    },
    "required": ["substance", "sea_level"],
}
POINTS_TOOL = {
    "name": "get_boiling_melting_points",
    "description": "The boiling and melting points of a substance at a sea level.",
    "parameters": POINTS,
}


def calls(*pairs, name="get_boiling_melting_points"):
    return [{"name": name, "args": {"substance": s, "sea_level": n}} for s, n in pairs]


@pytest.mark.parametrize(
    "question, value, items",
    [
        ("points of water and iron at sea level", "iron", ["water", "iron"]),
        ("at sea levels of 0 meters and 1000 meters", 0, [0, 1000]),
        ("at sea levels of 0 and 1000 meters", 1000, [0, 1000]),
        (
            "What were the 'Open', 'Close', 'High', and 'Low' prices?",
            "Open",
            ["Open", "Close", "High", "Low"],
        ),
        ("prices for Microsoft and Apple over 30 days", "Apple", ["Microsoft", "Apple"]),
        ("radii of 5, 10 and 15 cm", 10, [5, 10, 15]),
        ("loans of $15,000 or $20,000", 15000, [15000, 20000]),
        # no list: a place and its state, a date, a lone value
        ("theft crimes in Los Angeles, California", "Los Angeles", []),
        ("the weather on December 13, 2019", 13, []),
        ("the weather in Paris", "Paris", []),
        # no list of lower-case words that join clauses
        ("sorted by popularity and then by date", "popularity", []),
        # lists paired item by item are no alternatives
        ("Taylor Swift and Maroon 5 for 20 and 15 minutes respectively", 20, []),
        # a value the question does not write
        ("points of water and iron", "gold", []),
        (
            "points of water and iron",
            True,
            [],
        ),
    ],
)
def test_the_list_a_value_is_written_in(question, value, items):
    assert coordinated(question, value) == items


def test_two_lists_give_every_pair():
    question = "Boiling points of water and iron at 0 meters and 1000 meters?"
    found = cross_product(
        calls(("water", 0), ("iron", 1000)), question, {POINTS_TOOL["name"]: POINTS}
    )
    assert [tuple(c["args"].values()) for c in found] == [
        ("water", 0),
        ("water", 1000),
        ("iron", 0),
        ("iron", 1000),
    ]


def test_one_call_with_two_lists_gives_the_rest():
    question = "Boiling points of water and iron at 0 meters and 1000 meters?"
    found = cross_product(calls(("water", 0)), question, {POINTS_TOOL["name"]: POINTS})
    assert len(found) == 4


def test_values_stated_in_groups_stay_paired():
    # BFCL parallel_15 (dev split): no value is written inside a list of its kind
    question = "Points of water at 0 meters, and of iron at 1000 meters"
    original = calls(("water", 0), ("iron", 1000))
    assert cross_product(original, question, {POINTS_TOOL["name"]: POINTS}) == original


def test_a_list_of_two_arguments_of_one_call_is_no_alternative():
    # "between a human and a chimpanzee": species1 and species2 of one call
    schema = {
        "type": "object",
        "properties": {"species1": {"type": "string"}, "species2": {"type": "string"}},
    }
    original = [{"name": "similarity", "args": {"species1": "human", "species2": "chimpanzee"}}]
    question = "the similarity between a human and a chimpanzee"
    assert cross_product(original, question, {"similarity": schema}) == original


def test_a_parameters_own_word_is_no_item():
    # BFCL simple_python_0: "10 units and height of 5 units" lists no unit "height"
    schema = {
        "type": "object",
        "properties": {
            "base": {"type": "integer"},
            "height": {"type": "integer"},
            "unit": {"type": "string"},
        },
    }
    original = [{"name": "area", "args": {"base": 10, "height": 5, "unit": "units"}}]
    question = "the area of a triangle with a base of 10 units and height of 5 units"
    assert cross_product(original, question, {"area": schema}) == original


def test_items_take_the_enums_spelling_and_must_fit_it():
    schema = {
        "type": "object",
        "properties": {
            "route": {"type": "string", "enum": ["Shortest", "Scenic"]},
            "city": {"type": "string"},
        },
    }
    question = "the distance to Boston, considering both the shortest and scenic routes"
    found = cross_product(
        [{"name": "distance", "args": {"city": "Boston", "route": "Scenic"}}],
        question,
        {"distance": schema},
    )
    assert [c["args"]["route"] for c in found] == ["Shortest", "Scenic"]
    # an item the enum does not hold: no product
    question = "the distance to Boston, considering both the shortest and quickest routes"
    original = [{"name": "distance", "args": {"city": "Boston", "route": "Shortest"}}]
    assert cross_product(original, question, {"distance": schema}) == original


def test_other_tools_calls_keep_their_places_and_the_product_is_bounded():
    question = "Boiling points of water and iron at 0 meters and 1000 meters?"
    other = {"name": "other", "args": {"x": 1}}
    original = [other, *calls(("water", 0))]
    found = cross_product(original, question, {POINTS_TOOL["name"]: POINTS})
    assert found[0] == other and len(found) == 5
    assert cross_product(original, question, {POINTS_TOOL["name"]: POINTS}, limit=4) == original
    assert MAX_PRODUCT_CALLS == 16


def _two_calls(prefix, continuation):
    """Scores for two calls, (water, 0) then (iron, 1000), and no third."""
    if continuation == ', {"name": "':
        return 0.0 if prefix.count('"substance"') < 2 else -9.0
    if continuation == "]}":
        return -1.0
    second = prefix.count('"substance"') >= 2
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "get_boiling": 0.0}
    if prefix.endswith('"substance": '):
        table.update({'"water"': -5.0 if second else 0.0, '"iron"': 0.0 if second else -5.0})
    if prefix.endswith('"sea_level": '):
        table.update({"0": -5.0 if second else 0.0, "1000": 0.0 if second else -5.0})
    return scorer(table)(prefix, continuation)


def test_the_engine_adds_the_calls_the_lists_ask_for():
    result = ask(
        "What are the boiling points of water and iron at 0 meters and 1000 meters?",
        ScriptedBackend(scorer=_two_calls),
        tools=[POINTS_TOOL],
    )
    found = [tuple(c["args"].values()) for c in result["ai_message"]["tool_calls"]]
    assert sorted(found) == [("iron", 0), ("iron", 1000), ("water", 0), ("water", 1000)]
    assert result["attempts"][-1]["staged"]["cross_product"] == 2


def test_the_engine_keeps_pairs_the_question_pairs():
    result = ask(
        "What are the boiling points of water and iron at 0 meters and 1000 meters respectively?",
        ScriptedBackend(scorer=_two_calls),
        tools=[POINTS_TOOL],
    )
    found = [tuple(c["args"].values()) for c in result["ai_message"]["tool_calls"]]
    assert found == [("water", 0), ("iron", 1000)]
    assert "cross_product" not in result["attempts"][-1]["staged"]


def test_a_word_followed_by_its_object_is_a_verb_not_an_item():
    # development pair p18a: "the quarterly review and read it" made a second search for
    # "read"
    question = "Search the workspace for the file about the quarterly review and read it."
    assert coordinated(question, "review") == []
    assert coordinated("the review and the audit", "review") == ["review", "audit"]
