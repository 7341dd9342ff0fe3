"""The bundled model through transformers (GGUF dequantized by transformers), the original
scripts' path. Mechanisms only: a valid message or a labelled error, never what the 135M model
writes (its greedy text differs between CPUs)."""

import pytest
from jsonschema import Draft202012Validator

from helpers import DATA, MODEL_CONFIG, basic_tools, load_json
from lokal.config import load_profile
from lokal.errors import ConfigError
from lokal.llm.backends import get_backend
from lokal.llm.decide import generate_ai_message
from lokal.messages import make_tool_message
from lokal.records import ERROR_KINDS


@pytest.fixture(scope="module")
def hf_profile():
    return load_profile(MODEL_CONFIG, "smollm2-135m-hf")


@pytest.mark.model
def test_transformers_decision_on_the_bundled_model(hf_profile):
    messages = load_json(DATA / "messages" / "messages_with_tool.json")
    result = generate_ai_message(hf_profile, messages, basic_tools()).to_dict()
    assert result["model"]["backend"] == "transformers"
    first = result["attempts"][0]
    assert first["usage"]["prompt_tokens"] > 100 and first["usage"]["completion_tokens"] > 0
    assert result["status"] in ("success", "error")
    if result["status"] == "error":
        assert result["error"]["type"] in ERROR_KINDS and result["error"]["message"]


@pytest.mark.model
def test_transformers_constrained_reply_is_valid(hf_profile):
    profile = hf_profile.with_tool_calling(mode="constrained")
    messages = load_json(DATA / "messages" / "messages_multi_tool.json")
    result = generate_ai_message(profile, messages, basic_tools()).to_dict()
    assert result["tool_calling"] == "constrained" and result["attempts"]
    for attempt in result["attempts"]:  # the grammar holds: every reply is a JSON envelope
        assert attempt["raw_text"].lstrip().startswith("{"), attempt["raw_text"]
    if result["status"] == "error":  # e.g. cut off at the token budget: labelled, not parsed
        assert result["error"]["type"] in ERROR_KINDS and result["error"]["message"]
        return
    assert result["status"] == "success"
    tools = {t["function"]["name"]: t["function"] for t in basic_tools()}
    for call in result["ai_message"]["tool_calls"]:
        Draft202012Validator(tools[call["name"]]["parameters"]).validate(call["args"])


@pytest.mark.model
def test_max_input_tokens_drops_oldest_turns_but_keeps_system_and_last_question(hf_profile):
    backend = get_backend(hf_profile)
    call = {"id": "call_001", "name": "calculator", "args": {"expression": "1+1"}}
    old_turns = []
    for i in range(30):
        old_turns += [
            {"role": "user", "content": f"Old question number {i}: what is {i} + {i}?"},
            {"role": "assistant", "content": "", "tool_calls": [{**call, "id": f"c{i}"}]},
            make_tool_message({**call, "id": f"c{i}"}, output={"result": 2 * i}),
            {"role": "assistant", "content": f"It is {2 * i}."},
        ]
    messages = [
        {"role": "system", "content": "Be brief."},
        *old_turns,
        {"role": "user", "content": "LAST QUESTION: what is 7 * 6?"},
    ]
    profile = hf_profile.with_tool_calling(max_retries=0)
    result = generate_ai_message(profile, messages, basic_tools()).to_dict()
    assert result["dropped_messages"] > 0
    prompt = result["prompt"]
    assert prompt[0]["role"] == "system" and "Be brief." in prompt[0]["content"]
    assert prompt[-1]["content"] == "LAST QUESTION: what is 7 * 6?"
    # no orphan ToolMessage: each kept tool result follows its assistant turn
    for index, message in enumerate(prompt):
        if message["role"] == "tool":
            assert prompt[index - 1]["role"] in ("assistant", "tool")
    assert backend.count_prompt_tokens(prompt, None) <= hf_profile.model.max_input_tokens


@pytest.mark.slow  # imports torch and transformers
def test_missing_local_model_directory_is_a_clear_error():
    profile = load_profile(MODEL_CONFIG, "qwen-4b")
    with pytest.raises(ConfigError, match="not found"):
        get_backend(profile)
