"""Optional parameters decided by likelihood (issue 21, part 2; ``optional_args: likely``):
one the question does not name is added when the model finds its key likelier than closing
the arguments and the question holds a value for it, left out otherwise."""

from test_staged import ask, scorer, staged_profile

from lokal.llm.backends.scripted import ScriptedBackend
from lokal.llm.staged import ANSWER_OPENING, CALL_OPENING

FALL = {
    "name": "fall_time",
    "description": "Time for an object to fall from a height.",
    "parameters": {
        "type": "object",
        "properties": {
            "height": {"type": "number", "description": "height in metres"},
            "gravity": {"type": "number", "description": "acceleration in m/s^2"},
        },
        "required": ["height"],
    },
}


def decide(question, key_score, optional_args="likely", bias=0.0):
    backend = ScriptedBackend(
        scorer=scorer(
            {
                CALL_OPENING: 0.0,
                ANSWER_OPENING: -5.0,
                "fall_time": 0.0,
                "20": -0.5,
                "9.8": -0.7,
                ', "gravity": ': key_score,
                "}": -1.0,
            }
        )
    )
    profile = staged_profile(optional_args=optional_args, optional_bias=bias)
    result = ask(question, backend, profile=profile, tools=[FALL])
    return result["ai_message"]["tool_calls"][0]["args"], result["attempts"][0]["staged"]


QUESTION = "How long does a stone take to fall 20 m where the pull is 9.8?"


def test_an_optional_parameter_the_model_expects_is_added_with_a_value_from_the_question():
    args, staged = decide(QUESTION, key_score=-0.5)
    assert args == {"height": 20, "gravity": 9.8}
    assert staged["args"][0]["gravity"]["optional_margin"] > 0


def test_an_optional_parameter_the_model_does_not_expect_is_left_out():
    args, staged = decide(QUESTION, key_score=-30.0)
    assert args == {"height": 20}
    assert staged["optional_left_out"]["gravity"] < 0


def test_the_bias_moves_the_choice():
    assert decide(QUESTION, key_score=-8.0)[0] == {"height": 20}
    assert decide(QUESTION, key_score=-8.0, bias=5.0)[0] == {"height": 20, "gravity": 9.8}


def test_without_a_value_in_the_question_nothing_is_added():
    args, staged = decide("How long does a stone take to fall 20 m?", key_score=-0.5)
    assert args == {"height": 20}  # the only number is taken by height
    assert "gravity" in staged["optional_left_out"]


def test_mentioned_mode_leaves_unnamed_optionals_out_whatever_the_model_says():
    args, _ = decide(QUESTION, key_score=-0.5, optional_args="mentioned")
    assert args == {"height": 20}
