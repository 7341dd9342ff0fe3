"""The real bundled model (SmolLM2-135M-Instruct, Q4_1 GGUF) through llama.cpp.

These tests assert what the framework guarantees (records, token counts, validity under a
grammar, prefix reuse), never what a 135M model happens to answer: its greedy text differs
between CPUs (and between llama.cpp thread and batch settings: LOKAL_N_THREADS, LOKAL_N_BATCH).
A decision is a valid message or an error of a labelled kind; how often it is valid is a
quality rate, measured by benchmarks/model_mechanisms_quality.py.
"""

import json
import re

import pytest
from jsonschema import Draft202012Validator

from helpers import DATA, MODEL_CONFIG, basic_tools, load_json
from lokal.bench.bfcl_data import AST_CATEGORIES, load_category
from lokal.config import load_profile
from lokal.llm.backends import get_backend
from lokal.llm.decide import generate_ai_message
from lokal.messages import make_tool_message, validate_ai_message
from lokal.records import ERROR_KINDS
from lokal.tools.schema import tool_specs

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def profile():
    return load_profile(MODEL_CONFIG)


@pytest.fixture(scope="module")
def constrained():
    return load_profile(MODEL_CONFIG, "smollm2-135m-constrained")


def assert_valid_against(tools_schema, message):
    validate_ai_message(message)
    tools = {t.name: t for t in tool_specs(tools_schema)}
    for call in message["tool_calls"]:
        assert call["name"] in tools, call
        Draft202012Validator(tools[call["name"]].parameters).validate(call["args"])


def assert_valid_or_labelled(tools_schema, result, case_id=None):
    """A valid message whose calls match their schemas, or an error of a labelled kind with
    its reason; True when valid."""
    assert result["status"] in ("success", "error"), (case_id, result["status"])
    if result["status"] == "success":
        assert_valid_against(tools_schema, result["ai_message"])
        return True
    assert result["error"]["type"] in ERROR_KINDS, (case_id, result["error"])
    assert result["error"]["message"], (case_id, result["error"])
    assert result["ai_message"] is None or result["ai_message"] == {}, case_id
    return False


def assert_constrained_raw_text(result, case_id):
    """Under the grammar every attempt is a JSON envelope: it opens with ``{`` whatever the
    model chose (a cut-off one is reported, never parsed as something else)."""
    for attempt in result["attempts"]:
        assert attempt["raw_text"].lstrip().startswith("{"), (case_id, attempt["raw_text"])


@pytest.mark.parametrize(
    "messages", ["messages_no_tool.json", "messages_with_tool.json", "messages_multi_tool.json"]
)
def test_bundled_model_decisions_are_fully_recorded(profile, messages):
    result = generate_ai_message(
        profile, load_json(DATA / "messages" / messages), basic_tools()
    ).to_dict()
    assert result["model"]["backend"] == "llamacpp"
    assert result["attempts"], "every attempt is recorded"
    for attempt in result["attempts"]:
        if (attempt.get("error") or {}).get("type") == "timeout":
            continue  # stopped by tool_calling.decision_budget_s (a slow or busy CPU)
        assert attempt["usage"]["prompt_tokens"] > 0
        assert attempt["usage"]["completion_tokens"] > 0
        assert attempt["raw_text"] == attempt["raw_text"].strip() or attempt["raw_text"]
    assert_valid_or_labelled(basic_tools(), result, messages)


def test_loaded_model_is_kept_between_decisions(profile):
    assert get_backend(profile) is get_backend(load_profile(MODEL_CONFIG, "smollm2-135m"))
    assert get_backend(profile) is get_backend(
        load_profile(MODEL_CONFIG, "smollm2-135m-constrained")
    )


def bench_cases():
    """The batch benchmark's cases (data/bench_cases): messages, tools and decision mode."""
    for path in sorted((DATA / "bench_cases").glob("*.json")):
        case = load_json(path)
        yield (
            case["id"],
            case["messages"],
            case.get("tools") or basic_tools(),
            case.get("mode", "prompt_json"),
        )


def test_constrained_replies_over_the_bench_cases_always_parse(constrained):
    """The grammar makes every reply a JSON envelope; a decision is a valid message or an
    error of a labelled kind (a loop, a copied instruction, a reply cut off at its token
    budget). How many are valid is measured by the benchmark, not asserted here."""
    seen = 0
    for case_id, messages, tools, mode in bench_cases():
        result = generate_ai_message(constrained, messages, tools, mode=mode).to_dict()
        assert result["tool_calling"] == "constrained", case_id
        assert_constrained_raw_text(result, case_id)
        assert_valid_or_labelled(tools, result, case_id)
        seen += 1
    assert seen >= 30


def constrained_cases():
    cases = [
        (name, load_json(DATA / "messages" / name), basic_tools())
        for name in (
            "messages_no_tool.json",
            "messages_with_tool.json",
            "messages_multi_tool.json",
            "messages_plan_with_results.json",
            "messages_with_failed_tool.json",
        )
    ]
    for category in AST_CATEGORIES[:7]:  # all but the live parallel and live irrelevance
        for entry in load_category(category, limit=2):
            cases.append((entry["id"], entry["question"][0], entry["function"]))
    return cases


def test_constrained_replies_are_always_valid_messages(constrained):
    """Over example inputs and a BFCL sample: names exist, arguments validate, or the
    decision says which kind of failure it was."""
    seen = 0
    for case_id, messages, tools in constrained_cases():
        result = generate_ai_message(constrained, messages, tools).to_dict()
        assert result["tool_calling"] == "constrained"
        assert_constrained_raw_text(result, case_id)
        if assert_valid_or_labelled(tools, result, case_id):
            assert_enveloped_or_extracted(messages, result, case_id)
        seen += 1
    assert seen >= 19


def _strings(value) -> str:
    """Every string in a message's content, JSON tool results decoded (keys too)."""
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            return value
        return value if isinstance(decoded, str) else _strings(decoded)
    if isinstance(value, dict):  # a passage may be a "key: value" line of a result
        return " ".join(f"{k} {_strings(v)}" for k, v in value.items())
    if isinstance(value, list):
        return " ".join(_strings(v) for v in value)
    return "" if value is None else str(value)


def assert_enveloped_or_extracted(messages, result, case_id):
    """A valid constrained decision is the model's JSON envelope, or (its replies failed
    the answer checks after tool results) a passage lokal took from those tool results."""
    parse = result["parse"]
    assert parse["format"] in ("json_envelope", "extracted"), case_id
    if parse["format"] == "extracted":
        assert parse["model_failed"]["type"] in ("bad_reply", "parse_error"), case_id
        passage = parse["extracted"]["passage"]
        # the conversation's words (tool results, calls, their keys), and "failed" of a
        # passage that says a tool failed
        shown = set(re.findall(r"\w+", _strings(messages))) | {"failed"}
        assert passage and set(re.findall(r"\w+", passage)) <= shown, (case_id, passage)
        assert result["ai_message"]["content"].startswith(passage), case_id


def test_constrained_plan_is_valid(constrained):
    result = generate_ai_message(
        constrained,
        load_json(DATA / "messages" / "messages_plan_input.json"),
        basic_tools(),
        mode="plan_execute",
    ).to_dict()
    assert result["tool_calling"] == "constrained"
    assert_constrained_raw_text(result, "plan")
    # a plan cut off at the token limit is a labelled error, not a valid-looking message
    if assert_valid_or_labelled(basic_tools(), result, "plan"):
        assert result["parse"]["format"] in ("plan", "json_envelope")


def test_growing_conversation_reuses_the_evaluated_prefix():
    profile = load_profile(MODEL_CONFIG, "smollm2-135m-free")
    tools = basic_tools()
    first_turn = [{"role": "user", "content": "Read docs/agent_intro.txt please."}]
    first = generate_ai_message(profile, first_turn, tools).to_dict()
    call = {"id": "call_001", "name": "file_reader", "args": {"path": "docs/agent_intro.txt"}}
    second_turn = [
        *first_turn,
        {"role": "assistant", "content": "", "tool_calls": [call]},
        make_tool_message(call, output={"content": "Agents combine a model, tools and memory."}),
    ]
    second = generate_ai_message(profile, second_turn, tools).to_dict()
    third_turn = [
        *second_turn,
        {"role": "assistant", "content": "", "tool_calls": [{**call, "id": "call_002"}]},
        make_tool_message({**call, "id": "call_002"}, output={"content": "Same text."}),
    ]
    third = generate_ai_message(profile, third_turn, tools).to_dict()
    prompts = [r["attempts"][0]["backend"]["prompt_text"] for r in (first, second, third)]
    # the rendered history is byte-identical from turn to turn: each prompt's history part
    # (everything before the generation prompt / reminder) is a prefix of the next prompt
    history_2 = prompts[1][: prompts[1].rindex("<|im_start|>user")]
    assert prompts[2].startswith(history_2)
    assert prompts[1].startswith(prompts[0][: prompts[0].rindex("<|im_start|>assistant")])
    history_tokens = get_backend(profile).llm.tokenize(history_2.encode("utf-8"), special=True)
    reused = third["attempts"][0]["backend"]["reused_prompt_tokens"]
    assert reused >= len(history_tokens) - 1
    assert third["attempts"][0]["usage"]["prompt_tokens"] > len(history_tokens)


def test_the_bundled_model_reports_each_token_as_it_generates(profile):
    from lokal.llm.backends import GenerationRequest
    from lokal.progress import listening

    seen: list[dict] = []
    settings = profile.generation.model_copy(update={"max_new_tokens": 12})
    with listening(seen.append):
        completion = get_backend(profile).generate(
            GenerationRequest(
                messages=[{"role": "user", "content": "Count to ten."}], settings=settings
            )
        )
    tokens = sum(fields.get("tokens", 0) for fields in seen)
    assert seen[0] == {"phase": "generating"}
    # one report per sampled token; llama.cpp samples one more before it sees the limit
    assert 0 < completion.completion_tokens <= tokens <= completion.completion_tokens + 1


def _turns(topic: str) -> list[dict]:
    messages = [{"role": "system", "content": f"You help with questions about {topic}."}]
    for n in range(6):
        messages += [
            {"role": "user", "content": f"Tell me fact number {n + 1} about {topic}."},
            {"role": "assistant", "content": f"Fact {n + 1}: {topic} has long, detailed notes."},
        ]
    return messages


def test_saved_prompt_states_let_conversations_take_turns():
    """With model.prompt_cache_mb, a conversation whose turn comes after another's resumes
    from its own saved state; the scores are the same as when read from scratch."""
    from lokal.config import Profile
    from lokal.llm.backends import GenerationRequest, clear_backend_cache

    base = load_profile(MODEL_CONFIG)
    a, b = _turns("volcanoes"), _turns("tea")
    a2 = [*a, {"role": "user", "content": "And fact seven?"}]
    choices = [" Fact", " I"]

    def ask(backend, messages):
        request = GenerationRequest(messages=messages, settings=base.generation)
        return backend.score(request, choices), backend.last_score["reused_prompt_tokens"]

    results = {}
    for cache_mb in (0, 256):
        clear_backend_cache()
        model = base.model.model_copy(update={"prompt_cache_mb": cache_mb})
        backend = get_backend(Profile(base.name, model, base.generation, base.tool_calling))
        ask(backend, a)
        ask(backend, b)  # the other conversation's turn
        results[cache_mb] = ask(backend, a2)
    clear_backend_cache()
    (cold_scores, cold_reused), (warm_scores, warm_reused) = results[0], results[256]
    assert cold_reused < 20  # only the chat template's opening is shared with the other
    assert warm_reused > 100  # A's whole history came back from its saved state
    assert warm_scores == pytest.approx(cold_scores, abs=1e-3)


def _long_request(settings, deadline=None, max_new_tokens=96):
    from lokal.llm.backends import GenerationRequest

    text = " ".join(f"Item {i}: a line of a long report about river levels." for i in range(90))
    return GenerationRequest(
        messages=[{"role": "user", "content": f"{text}\nSummarise the report."}],
        settings=settings.model_copy(update={"max_new_tokens": max_new_tokens}),
        deadline=deadline,
    )


def test_llama_cpp_stops_inside_an_evaluation_at_the_requests_deadline(profile):
    """The abort callback: a generation or a scoring under way when the request's deadline
    passes stops there (BackendDeadline), and the model's state stays usable."""
    import time

    from lokal.errors import BackendDeadline

    backend = get_backend(profile)
    llm = backend.llm
    llm.n_tokens = 0  # nothing reused: the whole prompt is read
    started = time.perf_counter()
    backend.generate(_long_request(profile.generation))
    unbounded = time.perf_counter() - started
    for run in ("generate", "score"):
        llm.n_tokens = 0
        started = time.perf_counter()
        request = _long_request(profile.generation, deadline=started + unbounded / 5)
        with pytest.raises(BackendDeadline):
            if run == "generate":
                backend.generate(request)
            else:
                backend.score(request, [" The", " Rivers"])
        assert time.perf_counter() - started < unbounded * 0.8, run  # stopped, not finished
        # what llama.cpp kept is a prefix of the prompt, and n_tokens counts only that
        tokens = llm.tokenize(backend._prompt_text(request).encode("utf-8"), special=True)
        assert llm._input_ids[: llm.n_tokens].tolist() == tokens[: llm.n_tokens], run
    # the next request, without a deadline, runs to its end from that state
    after = backend.generate(_long_request(profile.generation, max_new_tokens=8))
    assert after.finish_reason in ("stop", "length", "repetition")
    assert after.completion_tokens and after.prompt_tokens
    scores = backend.score(_long_request(profile.generation), [" The", " Rivers"])
    assert len(scores) == 2 and all(s < 0 for s in scores)
    # no callback is left installed: a request without a deadline is never stopped
    assert backend._abort_at is None


def test_a_staged_decision_on_the_bundled_model_ends_within_its_budget(profile):
    """The longest BFCL parallel_multiple question of the development positions (the kind
    that ran past its budget on a busy machine), with a budget far shorter than such a
    decision needs: it ends at the budget, whatever step was under way."""
    entries = load_category("parallel_multiple")[::5]
    case = max(entries, key=lambda e: len(json.dumps(e["question"])))
    budget = 1.5
    staged = profile.with_tool_calling(mode="staged", decision_budget_s=budget, preselect_k=None)
    get_backend(staged)  # loaded before the clock starts
    result = generate_ai_message(staged, case["question"][0], case["function"])
    assert result.latency_ms <= budget * 1000 + 500, result.latency_ms
    if not result.ok:
        assert result.error.type in ERROR_KINDS


@pytest.mark.parametrize(
    "schema", [None, {"type": "object", "properties": {"a": {"type": "string"}}}]
)
def test_logprobs_are_the_generated_tokens_with_their_alternatives(profile, schema):
    """GenerationSettings.logprobs on llama.cpp: one entry a generated token, whose texts
    make the completion; greedy decoding drew each token as the most likely one, so its
    log-probability is the first alternative's (with a grammar too: after its mask)."""
    from lokal.llm.backends import GenerationRequest

    backend = get_backend(profile)
    settings = profile.generation.model_copy(update={"logprobs": 3, "max_new_tokens": 12})
    request = GenerationRequest(
        messages=[{"role": "user", "content": "Say hello to Sam."}],
        settings=settings,
        response_schema=schema,
    )
    completion = backend.generate(request)
    entries = completion.details["logprobs"]
    assert entries and "".join(e["token"] for e in entries).startswith(completion.text[:1])
    assert "".join(e["token"] for e in entries) == completion.text
    for entry in entries:
        assert entry["logprob"] <= 0 and len(entry["top_logprobs"]) == 3
        values = [alt["logprob"] for alt in entry["top_logprobs"]]
        assert values == sorted(values, reverse=True)
        assert entry["top_logprobs"][0]["token"] == entry["token"]
        assert entry["logprob"] == pytest.approx(values[0])
        assert bytes(entry["bytes"]).decode("utf-8", errors="replace") == entry["token"]
    plain = backend.generate(
        GenerationRequest(messages=request.messages, settings=profile.generation)
    )
    assert "logprobs" not in plain.details
