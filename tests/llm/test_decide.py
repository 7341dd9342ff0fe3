"""generate_ai_message with the scripted test double: retries, conflicts, reminders, plans."""

import json

import pytest

from helpers import MODEL_CONFIG, basic_tools, envelope
from lokal.config import load_profile
from lokal.errors import BackendError, ConfigError, MessageError
from lokal.llm.backends import Completion
from lokal.llm.backends.scripted import ScriptedBackend, ScriptExhausted
from lokal.llm.decide import generate_ai_message
from lokal.messages import make_tool_message

QUESTION = [{"role": "user", "content": "What is 3.14 * 5 - 2.5?"}]


def decide(backend, messages=QUESTION, tools=None, **kwargs):
    profile = kwargs.pop("profile", None) or load_profile(MODEL_CONFIG, "mock")
    decision = generate_ai_message(
        profile, messages, basic_tools() if tools is None else tools, backend=backend, **kwargs
    )
    return decision.to_dict()  # the JSON shape result.json and traces carry


def test_tool_call_reply_becomes_an_ai_message_with_ids():
    backend = ScriptedBackend([envelope([("calculator", {"expression": "3.14 * 5 - 2.5"})])])
    result = decide(backend)
    assert result["status"] == "success"
    assert result["ai_message"]["tool_calls"] == [
        {"id": "call_001", "name": "calculator", "args": {"expression": "3.14 * 5 - 2.5"}}
    ]
    assert result["usage"]["prompt_tokens"] > 0 and result["latency_ms"] >= 0
    system = backend.requests[0].messages[0]
    assert system["role"] == "system" and '"name": "calculator"' in system["content"]


def test_content_and_tool_calls_keep_the_calls_and_record_the_preamble():
    """The original scripts' calculator failure: both fields filled. Default policy: tool_calls."""
    reply = envelope(
        [("calculator", {"expression": "3.14 * 5 - 2.5"})],
        content="我来帮你计算 3.14 * 5 - 2.5 = 13.2",
    )
    result = decide(ScriptedBackend([reply]))
    assert result["status"] == "success"
    assert result["ai_message"]["content"] == ""
    assert result["ai_message"]["tool_calls"][0]["name"] == "calculator"
    assert result["parse"]["preamble"] == "我来帮你计算 3.14 * 5 - 2.5 = 13.2"
    assert result["parse"]["conflict"] is True


def test_conflict_policy_error_retries_then_reports():
    profile = load_profile(MODEL_CONFIG, "mock").with_tool_calling(
        conflict_policy="error", max_retries=1
    )
    both = envelope([("calculator", {"expression": "1+1"})], content="2")
    result = decide(ScriptedBackend([both, both]), profile=profile)
    assert result["status"] == "error"
    assert len(result["attempts"]) == 2
    assert result["error"]["type"] == "parse_error"


def test_unusable_reply_is_retried_with_the_error_quoted():
    backend = ScriptedBackend(
        [
            'I think I should use a tool. {"tool_calls": [{"name": "calculater"',
            envelope([("calculator", {"expression": "3.14 * 5 - 2.5"})]),
        ]
    )
    result = decide(backend)
    assert result["status"] == "success"
    assert result["parse"]["attempts"] == 2
    first, second = result["attempts"]
    assert first["status"] == "error" and second["status"] == "success"
    corrective = backend.requests[1].messages[-1]
    assert corrective["role"] == "user"
    assert first["error"]["message"] in corrective["content"]
    assert backend.requests[1].messages[-2] == {"role": "assistant", "content": first["raw_text"]}


def test_wrong_argument_types_are_an_error_the_model_is_told_about():
    bad = envelope([("file_reader", {"path": "a.txt", "max_chars": "lots"})])
    good = envelope([("file_reader", {"path": "a.txt", "max_chars": 100})])
    backend = ScriptedBackend([bad, good])
    result = decide(backend)
    assert result["attempts"][0]["error"]["type"] == "invalid_arguments"
    assert "max_chars" in result["attempts"][0]["error"]["message"]
    assert result["ai_message"]["tool_calls"][0]["args"]["max_chars"] == 100


def test_lossless_coercion_avoids_a_retry():
    backend = ScriptedBackend([envelope([("file_reader", {"path": "a.txt", "max_chars": "100"})])])
    result = decide(backend)
    assert result["status"] == "success" and result["parse"]["attempts"] == 1
    assert result["ai_message"]["tool_calls"][0]["args"] == {"path": "a.txt", "max_chars": 100}


def test_bad_output_never_raises_and_every_attempt_is_recorded():
    profile = load_profile(MODEL_CONFIG, "mock").with_tool_calling(max_retries=2)
    result = decide(ScriptedBackend(["", "}}}", "```"]), profile=profile)
    assert result["status"] == "error"
    assert [a["raw_text"] for a in result["attempts"]] == ["", "}}}", "```"]
    assert result["ai_message"] is None
    assert result["error"]["message"]


def test_unknown_tool_is_an_error_not_a_guess():
    result = decide(ScriptedBackend([envelope([("web_search", {"q": "x"})])] * 2))
    assert result["status"] == "error"
    assert result["error"]["type"] == "unknown_tool"


def test_reminder_after_tool_messages_names_how_many_results_arrived():
    calls = [
        {"id": "call_001", "name": "calculator", "args": {"expression": "2+2"}},
        {"id": "call_002", "name": "file_reader", "args": {"path": "a.txt"}},
    ]
    messages = [
        *QUESTION,
        {"role": "assistant", "content": "", "tool_calls": calls},
        make_tool_message(calls[0], output={"result": 4}),
        make_tool_message(calls[1], output={"content": "hello"}),
    ]
    backend = ScriptedBackend([envelope(content="4, and the file says hello")])
    result = decide(backend, messages)
    assert result["ai_message"]["content"] == "4, and the file says hello"
    prompt = backend.requests[0].messages
    assert prompt[-1]["role"] == "user"
    assert "The last 2 ToolMessage(s) contain tool results" in prompt[-1]["content"]
    assert prompt[-3]["role"] == "tool"
    # the assistant's own tool turn is shown in the envelope format it is asked to write
    assert json.loads(prompt[2]["content"])["tool_calls"][0]["name"] == "calculator"


def test_identical_calls_in_one_reply_are_merged_unless_the_profile_keeps_them():
    same = ("calculator", {"expression": "2+2"})
    reply = envelope([same, same, same, ("calculator", {"expression": "3+3"})])
    merged = decide(ScriptedBackend([reply]))
    assert [c["args"]["expression"] for c in merged["ai_message"]["tool_calls"]] == ["2+2", "3+3"]
    assert merged["parse"]["merged_duplicates"] == 2
    profile = load_profile(MODEL_CONFIG, "mock").with_tool_calling(merge_duplicate_calls=False)
    kept = decide(ScriptedBackend([reply]), profile=profile)
    assert len(kept["ai_message"]["tool_calls"]) == 4


@pytest.mark.parametrize(
    ("reply", "shape"),
    [
        (
            json.dumps(
                {
                    "reasoning": "r",
                    "plan": [
                        {
                            "step": 1,
                            "description": "read",
                            "tool_call": {"name": "file_reader", "args": {"path": "a.txt"}},
                        },
                        {
                            "step": 2,
                            "description": "calc",
                            "tool_call": {"name": "calculator", "args": {"expression": "1+1"}},
                        },
                    ],
                }
            ),
            "plan",
        ),
        (
            json.dumps(
                [
                    {
                        "step": 1,
                        "description": "read",
                        "tool_call": {"name": "file_reader", "arguments": {"path": "a.txt"}},
                    },
                    {
                        "step": 2,
                        "description": "calc",
                        "tool_call": {"name": "calculator", "args": {"expression": "1+1"}},
                    },
                ]
            ),
            "plan_list",
        ),
        (
            envelope([("file_reader", {"path": "a.txt"}), ("calculator", {"expression": "1+1"})]),
            "json_envelope",
        ),
    ],
)
def test_plan_replies_in_the_three_seed_shapes_become_tool_calls(reply, shape):
    backend = ScriptedBackend([reply])
    result = decide(backend, strategy="plan_execute")
    assert result["status"] == "success", result["error"]
    assert result["purpose"] == "plan"
    assert [c["name"] for c in result["ai_message"]["tool_calls"]] == ["file_reader", "calculator"]
    assert result["parse"]["format"] == shape
    assert "plan" in backend.requests[0].messages[0]["content"]


def test_final_purpose_disables_tools():
    backend = ScriptedBackend(["The answer is 13.2."])
    result = decide(backend, purpose="final")
    assert result["ai_message"]["content"] == "The answer is 13.2."
    assert backend.requests[0].tools is None
    assert "no longer available" in backend.requests[0].messages[0]["content"]


def test_backend_failure_is_an_error_result():
    def down(request):
        raise BackendError("connection refused")

    result = decide(ScriptedBackend([down]))
    assert result["status"] == "error"
    assert result["error"] == {"type": "backend_error", "message": "connection refused"}


def test_native_tool_calls_are_checked_like_parsed_ones():
    completion = Completion(
        text="",
        native_tool_calls=[{"id": "abc", "name": "Calculator", "args": {"expression": "1+1"}}],
    )
    result = decide(ScriptedBackend([completion]))
    assert result["parse"]["format"] == "native"
    assert result["ai_message"]["tool_calls"] == [
        {"id": "abc", "name": "calculator", "args": {"expression": "1+1"}}
    ]


def test_callers_mistakes_raise():
    with pytest.raises(MessageError, match="non-empty list"):
        decide(ScriptedBackend([]), messages=[])
    with pytest.raises(MessageError, match="role must be one of"):
        decide(ScriptedBackend([]), messages=[{"role": "robot", "content": "x"}])
    with pytest.raises(ConfigError, match="mode must be one of"):
        decide(ScriptedBackend([]), mode="react")


def test_a_mode_the_backend_cannot_do_fails_with_a_clear_message():
    backend = ScriptedBackend([], capabilities=["prompt_json"])
    with pytest.raises(ConfigError, match="cannot do tool_calling 'constrained'"):
        decide(backend, tool_calling="constrained")


def test_a_staged_profile_falls_back_to_constrained_only_where_the_backend_can_do_it():
    """A backend registered from outside may lack constrained: staged cannot fall back to it."""
    backend = ScriptedBackend([], capabilities=["prompt_json"])
    with pytest.raises(ConfigError, match="cannot do tool_calling 'constrained'"):
        decide(backend, tool_calling="staged")


def test_scripted_backend_complains_when_asked_too_often():
    with pytest.raises(ScriptExhausted):
        decide(ScriptedBackend([]))


def test_an_answer_that_copies_the_system_prompt_back_is_retried():
    """Issue 10: an empty question made the model print the system prompt as its answer."""
    system = (
        "You are a helpful assistant working in a local workspace. Use the tools to read "
        "files, search, calculate and analyse tables; answer from their results."
    )
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "Hi there"}]
    echo = envelope(content="You are a helpful assistant working in a local workspace.")
    backend = ScriptedBackend([echo, envelope(content="Hello! How can I help?")])
    result = decide(backend, messages)
    assert result["status"] == "success"
    assert result["ai_message"]["content"] == "Hello! How can I help?"
    assert "copies the instructions" in result["attempts"][0]["error"]["message"]


def test_a_plan_that_leaves_out_part_of_the_request_is_retried_with_what_is_missing():
    # "read notes.txt and compute 12 * 7": the plan read the file and dropped the calculator
    question = [{"role": "user", "content": "Read notes.txt and compute 12 * 7"}]
    read_only = envelope([("file_reader", {"path": "notes.txt"})])
    both = envelope(
        [("file_reader", {"path": "notes.txt"}), ("calculator", {"expression": "12*7"})]
    )
    backend = ScriptedBackend([read_only, both])
    result = decide(backend, messages=question, strategy="plan_execute")
    first = result["attempts"][0]["error"]
    assert first["type"] == "bad_reply" and "'compute 12 * 7'" in first["message"]
    assert "calculator" in first["message"]
    assert [c["name"] for c in result["ai_message"]["tool_calls"]] == ["file_reader", "calculator"]
    # a plan that covers every part is taken at once
    backend = ScriptedBackend([both])
    assert decide(backend, messages=question, strategy="plan_execute")["status"] == "success"
    assert len(backend.requests) == 1
