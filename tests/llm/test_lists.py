"""Lists the question writes out (lokal.llm.staged.lists) and the calls they add: pure
functions over fixed texts, and the staged engine with scripted scores (no model words)."""

import pytest
from test_staged import ask, scorer, would_stop

from lokal.llm.backends.scripted import ScriptedBackend
from lokal.llm.staged import ANSWER_OPENING, CALL_OPENING
from lokal.llm.staged.lists import MAX_PRODUCT_CALLS, chained, coordinated, cross_product, legs

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


def test_a_list_a_call_took_whole_gives_no_other_calls():
    # BFCL parallel_multiple_0 (development split): "the multiples of 3 and 5" went to
    # one call's list; "the first five primes" is no call for 3
    primes = {"type": "object", "properties": {"count": {"type": "integer"}}}
    multiples = {"type": "object", "properties": {"multiples": {"type": "array"}}}
    original = [
        {"name": "sum_of_multiples", "args": {"multiples": [3, 5]}},
        {"name": "product_of_primes", "args": {"count": 5}},
    ]
    question = "The sum of the multiples of 3 and 5, and the product of the first 5 primes"
    parameters = {"sum_of_multiples": multiples, "product_of_primes": primes}
    assert cross_product(original, question, parameters) == original
    # without the list call, 5 is an item of "3 and 5"
    found = cross_product(original[1:], question, parameters)
    assert [c["args"]["count"] for c in found] == [3, 5]


def test_a_value_counts_where_it_stands_in_a_list():
    # BFCL parallel_190 (development split): "shortest" first stands in no list
    question = (
        "What is the shortest driving distance from New York City to Los Angeles, "
        "considering both the shortest and scenic route preferences?"
    )
    assert coordinated(question, "shortest") == ["shortest", "scenic"]


@pytest.mark.parametrize(
    "question, journey",
    [
        # BFCL parallel_135 (development split)
        (
            "What is the total distance in kilometers if I start my journey from New York, "
            "travel to Los Angeles, then from Los Angeles to Miami, and finally from Miami "
            "back to New York?",
            [("New York", "Los Angeles"), ("Los Angeles", "Miami"), ("Miami", "New York")],
        ),
        ("Fly from Paris to Rome and on to Vienna", [("Paris", "Rome"), ("Rome", "Vienna")]),
        # one leg is no journey; a leg per sentence is a request per sentence
        ("Convert 100 from USD to EUR", []),
        (
            "The distance from New York to London. Then the flights from London to Paris.",
            [],
        ),
        # lower-case words are no places
        ("from home to work, then to the gym", []),
    ],
)
def test_the_legs_of_a_journey(question, journey):
    assert legs(question) == journey


def _route(start, end, preference="Shortest"):
    args = {"start_location": start, "end_location": end, "route_preference": preference}
    return {"name": "distance", "args": args}


def test_each_leg_of_a_journey_gets_a_call():
    question = (
        "What is the shortest driving distance from New York City to Los Angeles, and then "
        "from Los Angeles to Miami?"
    )
    found = chained([_route("New York City", "Los Angeles")], question)
    assert found == [_route("New York City", "Los Angeles"), _route("Los Angeles", "Miami")]
    # a leg a call took already is not made again; a call of no leg adds nothing
    done = [_route("New York City", "Los Angeles"), _route("Los Angeles", "Miami")]
    assert chained(done, question) == done
    other = [_route("Boston", "Chicago")]
    assert chained(other, question) == other
    # the ends as the call wrote them: "Los Angeles, CA" is Los Angeles
    found = chained([_route("New York City", "Los Angeles, CA")], question)
    assert found[1]["args"]["start_location"] == "Los Angeles"
    assert len(chained([_route("New York City", "Los Angeles")], question, limit=1)) == 1


def test_the_legs_and_a_list_give_every_pair():
    # BFCL parallel_190: two legs, each by the shortest and the scenic route
    schema = {
        "type": "object",
        "properties": {
            "start_location": {"type": "string"},
            "end_location": {"type": "string"},
            "route_preference": {"type": "string", "enum": ["Shortest", "Scenic"]},
        },
    }
    question = (
        "What is the shortest driving distance from New York City to Los Angeles, and then "
        "from Los Angeles to Miami, considering both the shortest and scenic route preferences?"
    )
    journey = chained([_route("New York City", "Los Angeles")], question)
    found = cross_product(journey, question, {"distance": schema})
    assert sorted(tuple(c["args"].values()) for c in found) == [
        ("Los Angeles", "Miami", "Scenic"),
        ("Los Angeles", "Miami", "Shortest"),
        ("New York City", "Los Angeles", "Scenic"),
        ("New York City", "Los Angeles", "Shortest"),
    ]


def test_the_engine_adds_the_legs_of_a_journey():
    tool = {
        "name": "distance",
        "description": "The driving distance between two places.",
        "parameters": {
            "type": "object",
            "properties": {
                "start_location": {"type": "string", "description": "Where to start."},
                "end_location": {"type": "string", "description": "Where to arrive."},
            },
            "required": ["start_location", "end_location"],
        },
    }
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "distance": 0.0}
    table |= {'"New York City"': 0.0, '"Los Angeles"': -1.0, '"Miami"': -2.0}
    question = (
        "What is the driving distance from New York City to Los Angeles, and then from Los "
        "Angeles to Miami?"
    )
    result = ask(question, ScriptedBackend(scorer=would_stop(table)), tools=[tool])
    found = [tuple(c["args"].values()) for c in result["ai_message"]["tool_calls"]]
    assert found == [("New York City", "Los Angeles"), ("Los Angeles", "Miami")]
    assert result["attempts"][-1]["staged"]["legs"] == 1
