"""Traces that grow linearly: decision events give prompts by content hash, and
``lokal.trace`` reads the full prompts back."""

import json

import pytest

from helpers import MODEL_CONFIG, envelope
from lokal.config import load_profile
from lokal.events import DecisionMade
from lokal.llm.backends import Completion
from lokal.llm.backends.scripted import ScriptedBackend
from lokal.runtime import Agent, AgentSettings, JsonlTrace
from lokal.tools.registry import ToolRegistry, tool
from lokal.trace import PromptEncoder, TraceError, expand_events, main, read_trace


@pytest.fixture
def profile():
    return load_profile(MODEL_CONFIG, "mock").with_tool_calling(max_retries=0)


@pytest.fixture
def registry():
    reg = ToolRegistry()

    @tool
    def lookup(n: int) -> str:
        """A long record.

        Args:
            n: which record.
        """
        return f"record {n}: " + " ".join(f"field{i}={n * i}" for i in range(150))

    reg.register(lookup)
    return reg


def render(request):
    """A chat template's text, as the llama.cpp backend reports it in ``prompt_text``."""
    return "".join(
        f"<|{m['role']}|>\n{m.get('content') or ''}\n<|end|>\n" for m in request.messages
    )


def with_prompt_text(text):
    """A scripted reply that also reports the rendered prompt, as llama.cpp does."""
    return lambda request: Completion(
        text=text, prompt_tokens=10, completion_tokens=5, details={"prompt_text": render(request)}
    )


def turns(n, *, prompt_text=False):
    replies = [envelope([("lookup", {"n": i})]) for i in range(1, n + 1)]
    replies.append(envelope(content="Done."))
    return [with_prompt_text(r) for r in replies] if prompt_text else replies


def run_traced(profile, registry, replies, path, question="Look the records up", **settings):
    backend = ScriptedBackend(replies)
    agent = Agent(profile, registry, backend=backend, settings=AgentSettings(**settings))
    trace = JsonlTrace(path)
    agent.subscribe(trace)
    try:
        result = agent.run(question)
    finally:
        trace.close()
    return result, backend


def decisions(events):
    """The decision events of a trace's dicts."""
    return [e for e in events if e["type"] == "decision"]


def typed_decisions(result):
    """The decision events of a run, typed."""
    return [e for e in result.events if isinstance(e, DecisionMade)]


def test_read_trace_gives_back_exactly_the_prompts_the_backend_received(
    profile, registry, tmp_path
):
    path = tmp_path / "trace.jsonl"
    result, backend = run_traced(profile, registry, turns(4), path)
    assert result.status == "final" and result.iterations == 5
    prompts = [request.messages for request in backend.requests]

    compact = decisions(json.loads(line) for line in path.read_text().splitlines())
    assert all("prompt" not in d and d["prompt_ref"]["hash"] for d in compact)
    assert [d["prompt"] for d in decisions(read_trace(path))] == prompts
    assert [d["prompt"] for d in decisions(expand_events(result.events))] == prompts
    # the run's own events are compact too, and are not changed by expanding them
    assert typed_decisions(result)
    assert all(d.prompt is None and d.prompt_ref is not None for d in typed_decisions(result))
    assert all(
        "prompt" not in d and "prompt_ref" in d
        for d in decisions(e.to_dict() for e in result.events)
    )
    # each decision gives only the messages it adds: the tool turn, never the system prompt again
    assert [len(d["prompt_messages"]) for d in compact] == [2, 3, 2, 2, 2]


def stored_prompt_bytes(path):
    """The bytes of the trace that hold prompts: references and messages."""
    total = 0
    for event in decisions(json.loads(line) for line in path.read_text().splitlines()):
        total += len(json.dumps(event["prompt_ref"])) + len(json.dumps(event["prompt_messages"]))
        for attempt in event["attempts"]:
            total += len(json.dumps(attempt.get("backend", {}).get("prompt_text_ref", "")))
    return total


def full_prompt_bytes(path):
    """The same prompts written in full, as traces did before."""
    total = 0
    for event in decisions(read_trace(path)):
        total += len(json.dumps(event["prompt"]))
        for attempt in event["attempts"]:
            total += len(json.dumps(attempt.get("backend", {}).get("prompt_text", "")))
    return total


@pytest.mark.parametrize("prompt_text", [False, True], ids=["messages", "prompt_text"])
def test_a_trace_grows_linearly_with_the_run(profile, registry, tmp_path, prompt_text):
    stored, full, size = {}, {}, {}
    for n in (2, 4, 8):
        path = tmp_path / f"trace{n}.jsonl"
        result, _ = run_traced(profile, registry, turns(n, prompt_text=prompt_text), path)
        assert result.status == "final" and result.iterations == n + 1
        stored[n], full[n], size[n] = (
            stored_prompt_bytes(path),
            full_prompt_bytes(path),
            path.stat().st_size,
        )
    # bytes per added turn: constant (linear growth), where full prompts grow per turn
    for series, low, high in ((stored, 0.85, 1.15), (size, 0.85, 1.15), (full, 1.6, 3.0)):
        early, late = (series[4] - series[2]) / 2, (series[8] - series[4]) / 4
        assert low < late / early < high, (series, late / early)
    assert stored[8] < full[8] / 3


def test_the_rendered_prompt_text_is_kept_by_reference(profile, registry, tmp_path):
    path = tmp_path / "trace.jsonl"
    profile = profile.with_tool_calling(max_retries=1)
    replies = turns(3, prompt_text=True)
    # an unusable reply first: the retry's prompt is the first one, the reply and a correction
    replies.insert(1, with_prompt_text(envelope([("no_such_tool", {})])))
    result, backend = run_traced(profile, registry, replies, path)
    assert result.status == "final"
    texts = [render(request) for request in backend.requests]

    text = path.read_text()
    assert "prompt_text" in text and '"prompt_text":' not in text  # only prompt_text_ref
    compact = decisions(json.loads(line) for line in text.splitlines())
    retried = next(d for d in compact if len(d["attempts"]) == 2)
    first, second = (a["backend"]["prompt_text_ref"] for a in retried["attempts"])
    assert second["base"] == first["hash"] and second["parts"][0][0] == 0

    expanded = decisions(read_trace(path))
    got = [a["backend"]["prompt_text"] for d in expanded for a in d["attempts"]]
    assert got == texts
    retry_text = next(d for d in expanded if len(d["attempts"]) == 2)["attempts"][1]
    new_text = sum(len(p) for p in second["parts"] if isinstance(p, str))
    assert new_text < len(retry_text["backend"]["prompt_text"]) / 2  # only what was added
    # a decision's prompt is its last attempt's
    last_attempts = [
        r.messages
        for r, n in zip(backend.requests, attempt_numbers(expanded), strict=True)
        if n == "last"
    ]
    assert [d["prompt"] for d in expanded] == last_attempts


def attempt_numbers(events):
    return [
        "last" if i == len(d["attempts"]) - 1 else i
        for d in events
        for i in range(len(d["attempts"]))
    ]


def test_the_same_text_is_written_once():
    encoder = PromptEncoder()
    first = encoder.text("<|user|>\nhi\n")
    assert first["base"] is None and encoder.text("<|user|>\nhi\n") == {"hash": first["hash"]}
    messages = [{"role": "user", "content": "hi"}]
    given = encoder.prompt(messages)
    again = encoder.prompt(messages)
    assert again == {"prompt_ref": {"hash": given["prompt_ref"]["hash"]}, "prompt_messages": {}}


def test_prompts_that_change_their_system_message_are_rebuilt(profile, registry, tmp_path):
    """Plan, step and the forced final answer each have their own system prompt."""
    path = tmp_path / "trace.jsonl"
    plan = json.dumps(
        {
            "reasoning": "look up two records",
            "plan": [
                {
                    "step": 1,
                    "description": "one",
                    "tool_call": {"name": "lookup", "args": {"n": 1}},
                },
                {
                    "step": 2,
                    "description": "two",
                    "tool_call": {"name": "lookup", "args": {"n": 2}},
                },
            ],
        }
    )
    replies = [plan, envelope([("lookup", {"n": 3})]), envelope(content="Done.")]
    result, backend = run_traced(
        profile, registry, replies, path, strategy="plan_execute", max_iterations=2
    )
    assert result.status == "max_iterations"
    expanded = decisions(read_trace(path))
    assert [d["purpose"] for d in expanded] == ["plan", "step", "final"]
    assert [d["prompt"] for d in expanded] == [r.messages for r in backend.requests]
    systems = {d["prompt"][0]["content"] for d in expanded}
    assert len(systems) == 3


def test_each_run_of_a_trace_stands_alone(profile, registry, tmp_path):
    path = tmp_path / "trace.jsonl"
    backend = ScriptedBackend([*turns(1), *turns(2)])
    agent = Agent(profile, registry, backend=backend)
    trace = JsonlTrace(path)
    agent.subscribe(trace)
    first = agent.run("Look one up")
    second = agent.run("Look two up", history=first.messages)
    trace.close()
    prompts = [r.messages for r in backend.requests]
    assert [d["prompt"] for d in decisions(read_trace(path))] == prompts
    # a run's events hold every message they reference, even those of the run before
    assert [d["prompt"] for d in decisions(expand_events(second.events))] == prompts[2:]


def test_old_traces_pass_through_and_broken_references_are_reported(profile, registry, tmp_path):
    old = {"type": "decision", "seq": 2, "prompt": [{"role": "user", "content": "hi"}]}
    assert expand_events([{"type": "run_start", "seq": 1}, old])[1] is old

    result, _ = run_traced(profile, registry, turns(2), tmp_path / "trace.jsonl")
    events = [e for e in result.events if not (isinstance(e, DecisionMade) and e.iteration == 1)]
    with pytest.raises(TraceError, match="before giving it"):
        expand_events(events)
    tampered = [e.to_dict() for e in result.events]
    first = next(e for e in tampered if e["type"] == "decision")
    first["prompt_messages"] = {
        h: {**m, "content": "altered"} if m["role"] == "user" else m
        for h, m in first["prompt_messages"].items()
    }
    assert expand_events(tampered)  # the messages are taken as given…
    first["prompt_ref"] = {**first["prompt_ref"], "parts": first["prompt_ref"]["parts"][:1]}
    with pytest.raises(TraceError, match="does not match its hash"):  # …the order is checked
        expand_events(tampered)


def test_python_m_lokal_trace_prints_the_full_trace(profile, registry, tmp_path, capsys):
    path = tmp_path / "trace.jsonl"
    run_traced(profile, registry, turns(1), path)
    assert main([str(path)]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert printed == read_trace(path)
    assert all("prompt" in d for d in decisions(printed))
    assert main([str(tmp_path / "missing.jsonl")]) == 1
