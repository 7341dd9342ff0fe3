"""Live progress: backends report tokens as they generate, the spinner shows them with the
elapsed time, only on a terminal and never on stdout."""

import io
import json
import os
import subprocess
import sys

import pytest
from rich.console import Console

from helpers import DATA, MODEL_CONFIG, REPO, envelope
from lokal.cli.run import LiveProgress
from lokal.config import load_profile
from lokal.events import ModelLoad
from lokal.live import Spinner, working
from lokal.llm.backends import GenerationRequest
from lokal.llm.backends.scripted import ScriptedBackend
from lokal.progress import listening, report
from lokal.runtime import Agent
from lokal.skills.builtin import register_builtin_tools
from lokal.skills.workspace import Workspace
from lokal.tools.registry import ToolRegistry


def terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=100, highlight=False), out


def test_reports_reach_the_listener_of_their_context_only():
    seen: list[dict] = []
    report(tokens=5)  # nobody listens: nothing happens
    with listening(seen.append):
        report(tokens=1)
        report(phase="scoring")
    report(tokens=7)
    assert seen == [{"tokens": 1}, {"phase": "scoring"}]


def test_a_backend_reports_the_tokens_it_generates():
    profile = load_profile(MODEL_CONFIG, "mock")
    backend = ScriptedBackend(["x" * 40])  # test double: 4 characters a token
    spinner = Spinner(Console(file=io.StringIO()))
    with listening(spinner):
        completion = backend.generate(
            GenerationRequest(
                messages=[{"role": "user", "content": "hi"}], settings=profile.generation
            )
        )
    assert spinner.tokens == completion.completion_tokens == 10


def test_the_spinner_shows_label_seconds_and_tokens_on_a_terminal():
    console, out = terminal()
    with working("deciding", console=console) as spinner:
        report(tokens=3)
        report(tokens=4, phase="generating")
        line = spinner.line()
        spinner.console.file.flush()
    assert line.startswith("deciding (generating) … ")
    assert line.endswith(" s, 7 tokens")
    assert "deciding" in out.getvalue()  # drawn while active


def test_no_spinner_off_a_terminal_or_when_quiet():
    for console, quiet in ((Console(file=io.StringIO()), False), (terminal()[0], True)):
        with working("deciding", console=console, quiet=quiet) as spinner:
            report(tokens=2)
            assert not spinner.active
        assert console.file.getvalue() == ""
        assert spinner.tokens == 2  # still counted, only not drawn


def test_live_progress_spins_while_the_model_decides_and_tools_run():
    # no tool preselection: nothing to load before the first decision
    profile = load_profile(MODEL_CONFIG, "mock").with_tool_calling(max_retries=0, preselect_k=None)
    registry = ToolRegistry()
    register_builtin_tools(registry, Workspace(DATA / "workspace"))
    backend = ScriptedBackend(
        [envelope([("calculator", {"expression": "2 + 3"})]), envelope(content="It is 5.")]
    )
    console, out = terminal()
    progress = LiveProgress(console)
    labels: list[str] = []
    original = progress.spinner.start
    progress.spinner.start = lambda label: (labels.append(label), original(label))[1]
    agent = Agent(profile, registry, backend=backend)
    agent.subscribe(progress)
    with listening(progress.spinner):
        result = agent.run("What is 2 + 3?")
    assert result.answer == "It is 5."
    # run_start starts the loading line; the agent was given its backend, so no model_load
    # follows and the first decision takes the line over
    assert labels == ["loading mock", "step 1: deciding", "running calculator", "step 2: deciding"]
    assert not progress.spinner.active
    text = out.getvalue()
    assert "step 1" in text and "calculator" in text and "final" in text
    assert "ready" not in text  # no model was loaded


def test_live_progress_shows_the_model_load_of_the_run(monkeypatch):
    """The run is the one producer of model_load: the progress line spins from run_start
    until its ModelLoad event, then says the model is ready. The mock loads no chat model;
    the embeddings of tool preselection are loaded as a step of their own."""
    import lokal.llm.select

    monkeypatch.setattr(lokal.llm.select, "_DEFAULT", None)  # not loaded in this process yet
    profile = load_profile(MODEL_CONFIG, "mock")
    registry = ToolRegistry()
    register_builtin_tools(registry, Workspace(DATA / "workspace"))
    console, out = terminal()
    progress = LiveProgress(console)
    seen: list[tuple[str, bool]] = []  # (event type, spinner active when it arrived)
    agent = Agent(profile, registry)  # no backend: the run loads it
    agent.subscribe(lambda event: seen.append((event.type, progress.spinner.active)))
    agent.subscribe(progress)
    with listening(progress.spinner):
        result = agent.run("What is 2 + 3?")
    kinds = [kind for kind, _ in seen]
    assert kinds[:3] == ["run_start", "model_load", "decision_start"]
    assert seen[1] == ("model_load", True)  # the loading line was spinning
    (load,) = [e for e in result.events if isinstance(e, ModelLoad)]
    assert load.component == "embeddings"
    text = out.getvalue()
    assert f"{load.model} ready" in text and "loading mock" in text
    assert not progress.spinner.active


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LOKAL_HOME": str(REPO / "outputs" / "test_live_home")}
    return subprocess.run(
        [sys.executable, "-c", "import sys; from lokal.cli import main; sys.exit(main())", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=env,
    )


@pytest.mark.slow
@pytest.mark.parametrize("quiet", [False, True])
def test_run_json_keeps_stdout_clean_and_reports_the_model_load(quiet, tmp_path):
    trace = tmp_path / "trace.jsonl"
    args = ["run", "What is 2 + 3?", "--model_name", "mock", "--json", "--trace", str(trace)]
    args += ["--workspace", str(DATA / "workspace")] + (["--quiet"] if quiet else [])
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)  # nothing but the JSON on stdout
    assert record["model_load_s"] == 0  # the mock loads no chat model
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    # what the run loads is a step of its own, right after run_start (one producer): for
    # the mock profile, the embeddings of tool preselection
    assert [e["type"] for e in events[:3]] == ["run_start", "model_load", "decision_start"]
    (load,) = [e for e in events if e["type"] == "model_load"]
    assert load["component"] == "embeddings"
    assert record["load_s"] == round(load["duration_s"], 4)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert "\x1b[" not in done.stderr  # not a terminal: no spinner frames
    if quiet:
        assert "step 1" not in done.stderr
    else:
        assert "model" in done.stderr and "step 1" in done.stderr
