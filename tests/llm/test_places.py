"""Places in the form a parameter asks for (issue 21: values that need a light
normalisation): "Chicago" → "Chicago, IL" when the description says 'City, State'. BFCL's
development split: "Find me a Rock concert in Chicago" called ``location: "Chicago"``,
"an all vegan restaurant in New York" ``"New York"``, and live questions ``"Mariposa"``,
``"Paris"``, each rejected by the checker ("Chicago, IL", "New York, NY", "Mariposa, CA",
"Paris, France")."""

from __future__ import annotations

import pytest

from helpers import staged_args
from lokal.llm.places import asks_city_state, city_state_forms, names_a_place
from lokal.llm.staged import ANSWER_OPENING, CALL_OPENING

CODES = {
    "type": "string",
    "description": "The city where you are looking for a concert, in the format of "
    "'City, State', such as 'Berkeley, CA' or 'New York, NY'.",
}


@pytest.mark.parametrize(
    ("description", "asked"),
    [
        (CODES["description"], True),
        ("The city and state, e.g. San Francisco, CA", True),
        ("The destination city of the trip, e.g., 'Los Angeles, CA'.", True),
        ("The name of the artist.", False),
        ("The city to search in.", False),
    ],
)
def test_a_description_that_asks_for_city_and_state(description, asked):
    assert asks_city_state({"type": "string", "description": description}) is asked


@pytest.mark.parametrize(
    ("value", "forms"),
    [
        # the example writes a code ("Berkeley, CA"): only the code (BFCL simple_python_35,
        # development split: the model chose "New York, New York" over "New York, NY")
        ("Chicago", ["Chicago, IL"]),
        ("New York", ["New York, NY"]),  # GeoNames: "New York City"
        ("Mariposa", ["Mariposa, CA"]),  # 2,000 people
        ("Paris", ["Paris, France"]),  # the most populous Paris, not Paris, Texas
        ("Boston, MA", []),  # already in that form
        ("Rock", []),  # a town in England, too small to be offered abroad
        ("Friday", []),
        ("chicago", []),  # a place name is written with a capital
    ],
)
def test_a_city_in_the_form_asked(value, forms):
    assert city_state_forms(value, CODES) == forms


def test_both_forms_state_name_first_when_no_example_writes_a_code():
    spec = {"type": "string", "description": "The location, in the format City, State."}
    assert city_state_forms("Chicago", spec) == ["Chicago, Illinois", "Chicago, IL"]


def test_a_staged_call_takes_the_city_in_the_form_asked():
    tool = {
        "type": "function",
        "function": {
            "name": "find_concert",
            "description": "Find a concert by city, genre and price.",
            "parameters": {
                "type": "object",
                "properties": {"location": CODES, "genre": {"type": "string"}},
                "required": ["location", "genre"],
            },
        },
    }

    def score(prefix, continuation):
        # the model (scripted) prefers the bare name; the code form is next
        table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "find_concert": 0.0, '"Chicago"': 0.0}
        table['"Chicago, IL"'] = -1.0
        return next((v for k, v in table.items() if continuation.startswith(k)), -5.0)

    args = staged_args(tool, "Find me a Rock concert in Chicago.", score)
    assert args["location"] == "Chicago, IL"


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("What's the weather in London right now?", True),
        ("Find flights from JFK to Boston.", True),
        ("I need a therapist for my family in berkeley.", True),  # a known place, after "in"
        ("get the weather of nyc", True),  # another name of New York City
        ("Any music events in the big apple this weekend?", True),
        ("上海明天会下雨吗？", True),
        ("How many days are in a week?", False),
        ("I need help looking for a bus.", False),  # "I" is no name
        ("Weather please.", False),  # a capital that opens a sentence
        ("I'd like a three star hotel.", False),  # Star is a town, but not after "in"
        ("hola como estas", False),  # so is Como
        ("What's 1+1?", False),
    ],
)
def test_a_text_that_can_name_a_place(text, named):
    assert names_a_place(text) is named
