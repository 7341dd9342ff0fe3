"""Currency names as the codes a parameter asks for (issue 21: values that need a light
normalisation): "200 euros" → "EUR". BFCL's development split: "Convert 200 euros to US
dollars" called ``from_currency: "euros"``, ``to_currency: "US"``; the checker wants "EUR"
and "USD"."""

from __future__ import annotations

import pytest

from helpers import MODEL_CONFIG, staged_args
from lokal.config import load_profile
from lokal.llm.backends.scripted import ScriptedBackend
from lokal.llm.currencies import currency_codes, wants_currency
from lokal.llm.decide import generate_ai_message
from lokal.llm.staged import ANSWER_OPENING, CALL_OPENING


@pytest.mark.parametrize(
    ("text", "codes"),
    [
        ("Change 300 euros into US dollars", [("EUR", "euros"), ("USD", "US dollars")]),
        (
            "How many Canadian dollars for 40 Swiss francs?",
            [("CAD", "Canadian dollars"), ("CHF", "Swiss francs")],
        ),
        # a word that is part of one currency's name only
        ("Pay 90 Japanese yen or 5 yuan", [("JPY", "yen"), ("CNY", "yuan")]),
        ("Send 12 Indian rupees", [("INR", "Indian rupees")]),
        # a noun a dozen currencies share, a weight, a country's adjective alone: none
        ("5 dollars for 2 pounds of butter", []),
        ("A Canadian recipe", []),
        # each code once, as first written
        ("euros to euros", [("EUR", "euros")]),
    ],
)
def test_the_currencies_a_text_names(text, codes):
    assert currency_codes(text) == codes


def test_a_parameter_takes_a_currency_by_its_name_or_description():
    assert wants_currency("from_currency", {"type": "string"})
    assert wants_currency("base", {"type": "string", "description": "The currency to sell"})
    assert not wants_currency("amount", {"type": "number", "description": "How much"})


_CODE = {"type": "string", "description": "Three-letter code"}
FX = {
    "name": "fx_convert",
    "description": "Convert an amount between currencies.",
    "parameters": {
        "type": "object",
        "properties": {"amount": {"type": "number"}, "from_currency": _CODE, "to_currency": _CODE},
        "required": ["amount", "from_currency", "to_currency"],
    },
}


def _scored(table):
    """The model, scripted: these continuations score as given, any other -20."""
    table = {CALL_OPENING: 0.0, ANSWER_OPENING: -9.0, "fx_convert": 0.0, **table}
    return lambda prefix, c: next((v for k, v in table.items() if c.startswith(k)), -20.0)


def test_a_staged_call_takes_the_codes_where_from_and_where_to():
    # the model likes the two codes alike, and the words as written less: the codes win
    # as candidates; which goes where is read from "to US dollars"
    score = _scored(
        {"250": 0.0, '"EUR"': -1.0, '"USD"': -1.0, '"euros"': -4.0, '"US dollars"': -4.0}
    )
    args = staged_args(FX, "Convert 250 euros to US dollars, please.", score)
    assert args == {"amount": 250, "from_currency": "EUR", "to_currency": "USD"}


def test_the_words_a_code_was_read_from_are_no_value_for_another_call():
    # "Euros" and "Canadian dollars" were used as EUR and CAD: nothing is stated later,
    # so no second call (the development run made one with from_currency "Canadian")
    profile = load_profile(MODEL_CONFIG).with_tool_calling(
        mode="staged", preselect_k=None, staged={"generated_values": False}
    )
    result = generate_ai_message(
        profile,
        [{"role": "user", "content": "Convert 150 Euros to Canadian dollars."}],
        [FX],
        backend=ScriptedBackend(scorer=_scored({"150": 0.0, '"EUR"': -1.0, '"CAD"': -1.0})),
    ).to_dict()
    calls = result["ai_message"]["tool_calls"]
    assert [c["args"] for c in calls] == [
        {"amount": 150, "from_currency": "EUR", "to_currency": "CAD"}
    ]
    evidence = result["attempts"][0]["staged"]["calls"][0]["continue"]
    assert evidence["later"] == 0.0
