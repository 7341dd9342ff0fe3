"""The README's examples work as printed: every ``lokal …`` command in a fenced shell block of
README.md and docs/*.md is in ``EXAMPLES`` below, with how it is checked.

- ``Run``: executed here through ``lokal.cli.main`` in a working folder of its own (``data``
  and ``configs`` linked from the repository, ``LOKAL_HOME`` the test's own, see
  tests/conftest.py), and its outcome asserted. ``variants`` are the concrete command lines a
  shorthand (``[--json]``, ``a|b``) stands for; ``extra`` options are appended when the
  example would load the bundled model and the mock keeps its point.
- ``Covered``: an existing test runs exactly this example; it must exist and its source must
  hold the example's words.
- ``HelpOnly``: cannot run here (a long-running server, a collector to send to); the command
  line parses and its options are in ``--help``.

Whatever the kind, every option of every example is in its command's ``--help``, every
variant parses, and every repository path it names exists. Nothing here loads the bundled
model (a backend other than the mock fails the test), so no test is marked ``model``.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from helpers import MOCK_YAML, REPO
from lokal.cli import build_parser, main

SHELL_LANGUAGES = {"sh", "bash", "console", "shell"}
LOKAL_PREFIXES = ("lokal ", ".venv/bin/lokal ")
REPO_PATH_PREFIXES = ("data/", "configs/", "tests/", "benchmarks/", "docs/")


# --- the collector ---------------------------------------------------------------------------


def _drop_comment(line: str) -> str:
    """``line`` without a trailing ``# comment`` (a ``#`` after a space, outside quotes)."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def _fenced_blocks(text: str) -> Iterable[tuple[str, int, list[str]]]:
    """(language, line number of the first line, lines) of every fenced code block."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = re.match(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)", lines[i])
        if not opening:
            i += 1
            continue
        fence, language = opening.groups()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not re.match(
            rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$", lines[j]
        ):
            body.append(lines[j])
            j += 1
        yield language.lower(), i + 2, body
        i = j + 1


def collect_commands(text: str, name: str) -> dict[str, list[str]]:
    """Every ``lokal …`` command of the shell blocks of one markdown text → where it is."""
    found: dict[str, list[str]] = {}
    for language, first, body in _fenced_blocks(text):
        starts = [line.lstrip().removeprefix("$ ") for line in body]
        shell = language in SHELL_LANGUAGES or (
            language == "" and any(s.startswith(LOKAL_PREFIXES) for s in starts)
        )
        if not shell:
            continue
        logical: list[tuple[int, str]] = []  # backslash continuations joined
        pending: tuple[int, str] | None = None
        for offset, line in enumerate(body):
            stripped = line.strip()
            if pending is not None:
                start, text_so_far = pending
                stripped = f"{text_so_far} {stripped}"
                pending = None
            else:
                start = first + offset
            if stripped.endswith("\\"):
                pending = (start, stripped[:-1].rstrip())
                continue
            logical.append((start, stripped))
        if pending is not None:
            logical.append(pending)
        for number, line in logical:
            command = _drop_comment(line.removeprefix("$ ").strip())
            if command.startswith(LOKAL_PREFIXES):
                found.setdefault(command, []).append(f"{name}:{number}")
    return found


def collect_documented() -> dict[str, list[str]]:
    """The commands of README.md and docs/*.md → where each is printed."""
    found: dict[str, list[str]] = {}
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        name = str(path.relative_to(REPO))
        for command, places in collect_commands(path.read_text("utf-8"), name).items():
            found.setdefault(command, []).extend(places)
    return found


# --- the table -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """Executed by the scenario ``scenario`` (a function of this module, see SCENARIOS)."""

    scenario: str
    variants: tuple[str, ...] = ()  # the concrete command lines; () = the command itself
    extra: tuple[str, ...] = ()  # appended to each variant when it is run here
    note: str = ""


@dataclass(frozen=True)
class Covered:
    """An existing test runs exactly this example (``tests/…py::function``)."""

    tests: tuple[str, ...]
    words: tuple[str, ...] = ()  # in the source of at least one of the tests, each
    variants: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class HelpOnly:
    """Not run here: the command line parses, its options are in ``--help``."""

    why: str
    variants: tuple[str, ...] = ()
    parsed: dict[str, object] = field(default_factory=dict)  # the first variant's values


DECIDE = (
    "lokal decide --model_config configs/model.yaml --messages "
    "data/messages/messages_with_tool.json --tools_schema data/messages/tools_schema_basic.json "
    "--strategy react"
)
DECIDE_OUT = "--outdir outputs/with_tool_demo"
WEATHER = (
    'lokal run "What\'s the weather in Beijing?" --workspace data/workspace --skills data/skills'
)
RAG_QUESTION = "How do readers and writers share a WAL database?"
BFCL_DOCS = (
    ".venv/bin/lokal bfcl --limit 20 --pipelines staged,constrained,prompt_json,bfcl-prompt,"
    "builtin --categories simple_python,multiple,parallel,parallel_multiple,irrelevance,"
    "live_simple,live_multiple,live_relevance,live_irrelevance --outdir outputs/bfcl20 --resume"
)
BFCL_README = (
    "lokal bfcl --limit 20 --pipelines staged,constrained,bfcl-prompt --outdir outputs/bfcl"
)
MOCK = ("--backend", "mock")
MOCK_NOTE = "--backend mock: the stored conversation and its history are the point, not the words"
MEMORY_VARIANTS = (
    "lokal memory show",
    "lokal memory notes",
    'lokal memory add "text"',
    'lokal memory select "question"',
    "lokal memory delete 3",
)
SERVE_RUNS = "long-running server (tests/serve and tests/viewer start it on loopback)"
OTLP_TEST = "tests/viewer/test_viewer_otlp.py::test_otlp_endpoint_sends_the_spans_with_the_sdk"
OTLP_NOTE = "needs an OTLP collector: the test sends the spans to a receiver on loopback"

EXAMPLES: dict[str, Run | Covered | HelpOnly] = {
    # README: One decision
    f"{DECIDE} [--profile smollm2-135m-free] [--tool_calling prompt_json|builtin|constrained|"
    f"staged] [--backend mock] [--mode prompt_json|plan_execute|mock] {DECIDE_OUT}": Run(
        "decide",
        variants=(
            f"{DECIDE} --backend mock {DECIDE_OUT}",
            f"{DECIDE} --mode mock {DECIDE_OUT}",
            f"{DECIDE} --profile smollm2-135m-free --tool_calling prompt_json --backend mock "
            f"--mode prompt_json {DECIDE_OUT}",
            f"{DECIDE} --tool_calling builtin --backend mock --mode plan_execute {DECIDE_OUT}",
            f"{DECIDE} --tool_calling constrained --backend mock {DECIDE_OUT}",
            f"{DECIDE} --tool_calling staged --backend mock {DECIDE_OUT}",
        ),
        note="every variant with the mock the example offers (--backend mock / --mode mock)",
    ),
    # README: The agent
    f"{WEATHER} [--profile smollm2-135m-free] [--strategy react|plan_execute] "
    "[--max_iterations 20] [--time_budget 600] [--trace trace.jsonl] [--json]": Covered(
        (
            "tests/runtime/test_runtime.py::test_weather_skill_in_two_rounds_through_its_command_tool",
            "tests/runtime/test_runtime.py::test_weather_skill_in_three_rounds",
        ),
        words=("What's the weather in Beijing?", "weather-forecast"),
        variants=(
            f"{WEATHER} --profile smollm2-135m-free --strategy react --max_iterations 20 "
            "--time_budget 600 --trace trace.jsonl --json",
            f"{WEATHER} --strategy plan_execute",
        ),
        note="the weather comes from the skill's script, which the mock never calls",
    ),
    # README and docs/tracing.md: the trace viewer
    "lokal traces list": Run("traces"),
    "lokal traces list [--limit 20] [--json]": Run(
        "traces", variants=("lokal traces list --limit 20 --json",)
    ),
    "lokal trace view RUN.jsonl -o run.html": Run("traces"),
    "lokal trace view RUN.jsonl [-o run.html]": Run(
        "traces", variants=("lokal trace view RUN.jsonl", "lokal trace view RUN.jsonl -o run.html")
    ),
    "lokal trace export RUN.jsonl --format otlp-json -o spans.json [--include-content]": Run(
        "traces",
        variants=(
            "lokal trace export RUN.jsonl --format otlp-json -o spans.json",
            "lokal trace export RUN.jsonl --format otlp-json -o spans.json --include-content",
        ),
    ),
    "lokal trace export RUN.jsonl --format otlp-json [-o spans.json] [--include-content]": Run(
        "traces",
        variants=(
            "lokal trace export RUN.jsonl --format otlp-json",
            "lokal trace export RUN.jsonl --format otlp-json -o spans.json",
            "lokal trace export RUN.jsonl --format otlp-json -o spans.json --include-content",
        ),
    ),
    "lokal trace export RUN.jsonl --otlp-endpoint http://127.0.0.1:6006/v1/traces": Covered(
        (OTLP_TEST,), words=('"--otlp-endpoint"',), note=OTLP_NOTE
    ),
    "lokal trace export RUN.jsonl --otlp-endpoint http://127.0.0.1:4318/v1/traces": Covered(
        (OTLP_TEST,), words=('"--otlp-endpoint"',), note=OTLP_NOTE
    ),
    "lokal serve": HelpOnly(SERVE_RUNS),
    # README: lokal serve; docs/serve.md
    "lokal serve --profile smollm2-135m --port 8000 --api-key sk-local": HelpOnly(
        SERVE_RUNS, parsed={"model_name": "smollm2-135m", "port": 8000, "api_key": "sk-local"}
    ),
    "lokal serve [--profile P] [--host 127.0.0.1] [--port 8000] [--api-key KEY] [--max-queue 8] "
    "[--max-body-bytes 4194304] [--body-timeout 30] [--log FILE] "
    "[--traces-dir DIR] [--no-traces] [--conversations] [--mcp servers.json] "
    "[--model_config configs/model.yaml] [--tool_calling MODE] [--backend NAME]": HelpOnly(
        SERVE_RUNS + "; the bracketed values are the defaults",
        variants=(
            "lokal serve",
            "lokal serve --profile P --host 127.0.0.1 --port 8000 --api-key KEY --max-queue 8 "
            "--max-body-bytes 4194304 --body-timeout 30 --log FILE "
            "--traces-dir DIR --no-traces --conversations --mcp servers.json "
            "--model_config configs/model.yaml --tool_calling staged --backend NAME",
        ),
        parsed={
            "host": "127.0.0.1",
            "port": 8000,
            "max_queue": 8,
            "max_body_bytes": 4194304,
            "body_timeout": 30,
        },
    ),
    # README: MCP tools
    "lokal mcp list servers.json": Covered(
        (
            "tests/cli/test_cli_outputs.py::"
            "test_the_readme_mcp_example_starts_without_an_activated_environment",
        ),
        words=("lokal mcp list", "weather: 9 tool(s)"),
        note="starts the README's servers.json MCP server (slow)",
    ),
    'lokal run "Use the weather_get-weather tool to get the weather in Oslo." --mcp servers.json': (
        Covered(
            (
                "tests/mcp/test_mcp_run.py::test_lokal_run_calls_an_mcp_tool_on_the_bundled_model",
                "tests/mcp/test_mcp_run.py::test_lokal_run_calls_an_mcp_tool_scripted",
            ),
            words=("Use the weather_get-weather tool to get the weather in Oslo.",),
            note="the bundled model's run (mechanisms) and the call itself with a scripted model",
        )
    ),
    # README: Benchmarks; docs/benchmarks.md
    "lokal bench --profile smollm2-135m --modes staged,constrained,prompt_json,builtin "
    "--cases data/bench_cases --outdir outputs/bench [--mode mock] [--concurrency 4] "
    "[--limit 5]": Run(
        "bench",
        variants=(
            "lokal bench --profile smollm2-135m --modes staged,constrained,prompt_json,builtin "
            "--cases data/bench_cases --outdir outputs/bench --mode mock --concurrency 4 "
            "--limit 5",
        ),
        note="with its own --mode mock (without it: 140 decisions of the bundled model)",
    ),
    ".venv/bin/lokal bench --profiles smollm2-135m --modes staged,constrained,prompt_json,builtin "
    "--outdir outputs/bench_after": Run(
        "bench",
        extra=("--mode", "mock"),
        note="--mode mock: the flags, the 35 cases × 4 modes and the reports, not the numbers",
    ),
    "lokal bfcl --limit 20 --pipelines staged,constrained,bfcl-prompt --outdir outputs/bfcl "
    "[--resume]": Run(
        "bfcl",
        variants=(
            BFCL_README,
            f"{BFCL_README} --resume",
        ),
        note="each question's decision scripted (636 decisions take 44 s even on the mock): "
        "the command line, results.jsonl, scores and --resume are checked",
    ),
    BFCL_DOCS: Run("bfcl", note="decisions scripted, as above; run twice, the second resumes"),
    "lokal bfcl --categories simple_python,irrelevance --pipelines staged "
    "--outdir outputs/bfcl_eval_sp": HelpOnly(
        "512 decisions of the bundled model (docs/benchmarks.md: the evaluation split): the "
        "command line parses; the same command is run scripted above",
        parsed={"categories": "simple_python,irrelevance", "split": "eval"},
    ),
    "lokal bfcl --categories multiple --pipelines staged "
    "--outdir outputs/bfcl_eval_multiple": HelpOnly(
        "160 decisions of the bundled model (docs/benchmarks.md: the evaluation split): the "
        "command line parses; the same command is run scripted above",
        parsed={"categories": "multiple", "split": "eval"},
    ),
    # README: Memory and conversations; docs/memory.md
    'lokal run "My name is Ada." --conversation ada': Run(
        "conversations", extra=MOCK, note=MOCK_NOTE
    ),
    'lokal run "What is my name?" --conversation ada': Run(
        "conversations", extra=MOCK, note=MOCK_NOTE
    ),
    "lokal conversations list [--format json|markdown]": Run(
        "conversations",
        variants=(
            "lokal conversations list",
            "lokal conversations list --format json",
            "lokal conversations list --format markdown",
        ),
    ),
    "lokal conversations list [--format markdown]": Run(
        "conversations",
        variants=("lokal conversations list", "lokal conversations list --format markdown"),
    ),
    "lokal conversations show ada [--format markdown|json]": Run(
        "conversations",
        variants=(
            "lokal conversations show ada",
            "lokal conversations show ada --format markdown",
            "lokal conversations show ada --format json",
        ),
    ),
    "lokal conversations show ada [--format json]": Run(
        "conversations",
        variants=("lokal conversations show ada", "lokal conversations show ada --format json"),
    ),
    "lokal conversations export ada [--format json|markdown]": Run(
        "conversations",
        variants=(
            "lokal conversations export ada",
            "lokal conversations export ada --format json",
            "lokal conversations export ada --format markdown",
        ),
    ),
    "lokal conversations export ada --format json|markdown": Run(
        "conversations",
        variants=(
            "lokal conversations export ada --format json",
            "lokal conversations export ada --format markdown",
        ),
    ),
    "lokal conversations delete ada": Run("conversations"),
    'lokal memory show | notes | add "text" | select "question" | delete 3': Run(
        "memory", variants=MEMORY_VARIANTS
    ),
    'lokal memory show | notes | add "text" | select "question" | delete ID': Run(
        "memory", variants=MEMORY_VARIANTS, note="ID: the id of the third note, 3"
    ),
    # README: Documents (RAG); docs/rag.md
    "lokal rag index data/docs": Run("rag"),
    f'lokal rag ask "{RAG_QUESTION}"': Covered(
        (
            "tests/rag/test_rag_answer.py::"
            "test_a_model_that_says_not_available_beside_the_answer_gets_the_passage",
        ),
        words=(RAG_QUESTION,),
        note="answered by a model; the mock's reply cites nothing (exit 1)",
    ),
    f'lokal rag ask "{RAG_QUESTION}" [--profile NAME]': Covered(
        (
            "tests/rag/test_rag_answer.py::"
            "test_a_model_that_says_not_available_beside_the_answer_gets_the_passage",
            "tests/rag/test_rag_answer.py::test_rag_ask_on_the_bundled_model_cites_the_documents",
        ),
        words=(RAG_QUESTION, '"--model_name", "smollm2-135m"'),
        variants=(f'lokal rag ask "{RAG_QUESTION}" --profile NAME',),
    ),
    'lokal rag search "busy timeout" --k 5 --json': Run("rag"),
    "lokal rag stats": Run("rag"),
    "lokal rag eval": Run("rag"),
    'lokal run "..." --store sqlite': Run(
        "rag", extra=MOCK, note="--backend mock: the point is the knowledge_search tool offered"
    ),
}


def variants(command: str) -> tuple[str, ...]:
    return EXAMPLES[command].variants or (command,)


# --- running a command -----------------------------------------------------------------------


def argv_of(command: str) -> list[str]:
    words = shlex.split(command)
    assert words[0].endswith("lokal"), command
    return words[1:]


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


class Shell:
    """Runs examples of the table (recorded, with their ``extra``) and set-up commands."""

    def __init__(self, capsys, extras: dict[str, tuple[str, ...]]) -> None:
        self.capsys = capsys
        self.extras = extras
        self.ran: set[str] = set()

    def _main(self, argv: list[str]) -> Result:
        self.capsys.readouterr()
        try:
            code = main(argv)
        except SystemExit as exit:  # --help
            code = exit.code
        out, err = self.capsys.readouterr()
        return Result(code, out, err)

    def example(self, command: str) -> Result:
        assert command in self.extras, f"not a variant of an example in the table: {command}"
        self.ran.add(command)
        return self._main(argv_of(command) + list(self.extras[command]))

    def setup(self, *argv: str) -> Result:
        result = self._main(list(argv))
        assert result.code == 0, (argv, result.err)
        return result


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    """A working folder where the examples' relative paths resolve and outputs stay."""
    work = tmp_path / "work"
    work.mkdir()
    for name in ("data", "configs"):
        (work / name).symlink_to(REPO / name, target_is_directory=True)
    (work / "mock.yaml").write_text(MOCK_YAML, encoding="utf-8")  # for set-up runs only
    monkeypatch.chdir(work)
    return work


@pytest.fixture(autouse=True)
def only_the_mock(monkeypatch):
    """A backend other than the mock (the bundled model) fails the test."""
    import lokal.bench.bfcl
    import lokal.llm.backends
    import lokal.llm.request

    real = lokal.llm.backends.get_backend

    def mock_only(profile, *args, **kwargs):
        assert profile.backend == "mock", f"the {profile.backend} backend was about to load"
        return real(profile, *args, **kwargs)

    for module in (lokal.llm.backends, lokal.llm.request, lokal.bench.bfcl):
        monkeypatch.setattr(module, "get_backend", mock_only)


SCENARIOS: dict[str, Callable[..., None]] = {}
SLOW = {"conversations", "rag", "bench", "decide"}  # seconds each on 2 busy cores (MiniLM)


def scenario(function: Callable[..., None]) -> Callable[..., None]:
    SCENARIOS[function.__name__.removeprefix("scenario_")] = function
    return function


@scenario
def scenario_decide(sh: Shell, work: Path, home: Path, monkeypatch) -> None:
    outdir = work / "outputs" / "with_tool_demo"
    for command in variants(next(k for k in EXAMPLES if k.startswith("lokal decide"))):
        shutil.rmtree(outdir, ignore_errors=True)
        done = sh.example(command)
        assert done.code == 0, (command, done.err)
        message = done.json()
        assert message["role"] == "assistant"
        # the original scripts' mock, first turn: file_reader + local_file_search
        assert [c["name"] for c in message["tool_calls"]] == ["file_reader", "local_file_search"]
        names = ("ai_message.json", "raw_output.txt", "prompt.json", "result.json")
        assert sorted(p.name for p in outdir.iterdir()) == sorted(names), command
        assert json.loads((outdir / "ai_message.json").read_text("utf-8")) == message
        assert json.loads((outdir / "result.json").read_text("utf-8"))["status"] == "success"


def _mock_run(sh: Shell, question: str, *argv: str) -> None:
    sh.setup("run", question, "--model_config", "mock.yaml", "--workspace", "data/workspace",
             "--quiet", *argv)  # fmt: skip


@scenario
def scenario_traces(sh: Shell, work: Path, home: Path, monkeypatch) -> None:
    _mock_run(sh, "Read the intro", "--trace", "RUN.jsonl")  # the RUN.jsonl of the examples
    listed = sh.example("lokal traces list")
    assert listed.code == 0 and "Read the intro" in listed.out
    assert str((work / "RUN.jsonl").resolve()) in listed.out
    listed = sh.example("lokal traces list --limit 20 --json")
    assert listed.code == 0
    (run,) = listed.json()
    assert run["question"] == "Read the intro" and run["status"] == "final"

    for command, page in (
        ("lokal trace view RUN.jsonl", work / "RUN.html"),  # the default: FILE.html
        ("lokal trace view RUN.jsonl -o run.html", work / "run.html"),
    ):
        viewed = sh.example(command)
        assert viewed.code == 0, viewed.err
        html = page.read_text("utf-8")
        assert html.lstrip().lower().startswith("<!doctype html") and "Read the intro" in html

    printed = sh.example("lokal trace export RUN.jsonl --format otlp-json")
    assert printed.code == 0 and "resourceSpans" in printed.json()
    spans = work / "spans.json"
    without = sh.example("lokal trace export RUN.jsonl --format otlp-json -o spans.json")
    assert without.code == 0 and "resourceSpans" in json.loads(spans.read_text("utf-8"))
    assert "Read the intro" not in spans.read_text("utf-8")  # contents only when asked
    command = "lokal trace export RUN.jsonl --format otlp-json -o spans.json --include-content"
    assert sh.example(command).code == 0
    text = spans.read_text("utf-8")
    assert "gen_ai.input.messages" in text and "Read the intro" in text


@scenario
def scenario_bench(sh: Shell, work: Path, home: Path, monkeypatch) -> None:
    cases = len(list((REPO / "data" / "bench_cases").glob("*.json")))
    modes = ("staged", "constrained", "prompt_json", "builtin")
    for command, outdir, n in (
        (variants(next(k for k in EXAMPLES if k.startswith("lokal bench")))[0], "bench", 5),
        (next(k for k in EXAMPLES if k.startswith(".venv/bin/lokal bench")), "bench_after", cases),
    ):
        done = sh.example(command)
        assert done.code == 0, done.err
        assert "lokal bench" in done.out
        folder = work / "outputs" / outdir
        summary = json.loads((folder / "summary.json").read_text("utf-8"))["summary"]
        # the mock decided, so the rows say mock, one per mode
        assert {group: s["cases"] for group, s in summary.items()} == {
            f"mock/{mode}": n for mode in modes
        }
        assert len((folder / "cases.jsonl").read_text("utf-8").splitlines()) == n * len(modes)
        assert (folder / "report.html").is_file()


@scenario
def scenario_bfcl(sh: Shell, work: Path, home: Path, monkeypatch) -> None:
    import lokal.bench.bfcl

    asked: list[str] = []

    def scripted(profile, pipeline_or_template, entry, *args):
        asked.append(entry["id"])
        return {"decoded": [], "raw_text": "", "valid": True}

    monkeypatch.setattr(lokal.bench.bfcl, "_run_lokal", scripted)
    monkeypatch.setattr(lokal.bench.bfcl, "_run_bfcl_prompt", scripted)
    readme = variants(next(k for k in EXAMPLES if k.startswith("lokal bfcl")))
    for first, again, outdir in (
        (readme[0], readme[1], "bfcl"),
        (BFCL_DOCS, BFCL_DOCS, "bfcl20"),
    ):
        words = shlex.split(first)
        pipelines = words[words.index("--pipelines") + 1].split(",")
        asked.clear()
        done = sh.example(first)
        assert done.code == 0, done.err
        assert "BFCL v4 AST accuracy" in done.out
        folder = work / "outputs" / outdir
        rows = [json.loads(x) for x in (folder / "results.jsonl").read_text("utf-8").splitlines()]
        assert len(rows) == len(asked) > 0
        assert {r["pipeline"] for r in rows} == set(pipelines)
        scores = json.loads((folder / "scores.json").read_text("utf-8"))
        assert list(scores["pipelines"]) == pipelines
        if "--categories" in words:
            wanted = words[words.index("--categories") + 1].split(",")
            assert {r["category"] for r in rows} == set(wanted)
        for category in {r["category"] for r in rows}:  # --limit 20: at most 20 per category
            assert len({r["id"] for r in rows if r["category"] == category}) <= 20
        assert (folder / "scores.md").is_file()
        asked.clear()
        resumed = sh.example(again)  # with --resume: nothing left to ask
        assert resumed.code == 0 and asked == []
        assert f"resuming: {len(rows)} of {len(rows)} questions" in resumed.out
        assert len((folder / "results.jsonl").read_text("utf-8").splitlines()) == len(rows)


@scenario
def scenario_conversations(sh: Shell, work: Path, home: Path, monkeypatch) -> None:
    first = sh.example('lokal run "My name is Ada." --conversation ada')
    assert first.code == 0, first.err
    second = sh.example('lokal run "What is my name?" --conversation ada')
    assert second.code == 0, second.err
    # earlier messages are the history: the second run's first prompt holds the first question
    from lokal.trace import read_trace

    traces = [read_trace(path) for path in (home / "traces").glob("*.jsonl")]
    (events,) = [t for t in traces if t[0]["question"] == "What is my name?"]
    decision = next(e for e in events if e["type"] == "decision")
    assert "My name is Ada." in [m.get("content") for m in decision["prompt"]]

    for format in ("", " --format json"):
        listed = sh.example(f"lokal conversations list{format}")
        assert listed.code == 0
        (conversation,) = listed.json()
        assert conversation["name"] == "ada" and conversation["runs"] == 2
    table = sh.example("lokal conversations list --format markdown")
    assert table.code == 0 and table.out.startswith("| name |") and "| ada |" in table.out

    for command in (
        "lokal conversations show ada",
        "lokal conversations show ada --format markdown",
        "lokal conversations export ada --format markdown",
    ):
        shown = sh.example(command)
        assert shown.code == 0 and shown.out.startswith("# Conversation ada")
        assert "My name is Ada." in shown.out and "What is my name?" in shown.out
    for command in (
        "lokal conversations show ada --format json",
        "lokal conversations export ada",
        "lokal conversations export ada --format json",
    ):
        exported = sh.example(command)
        assert exported.code == 0
        record = exported.json()
        assert record["name"] == "ada"
        assert [r["question"] for r in record["runs"]] == ["My name is Ada.", "What is my name?"]

    deleted = sh.example("lokal conversations delete ada")
    assert deleted.code == 0 and deleted.json()["deleted"] == "ada"
    again = sh.example("lokal conversations delete ada")  # does not exist: exit 2
    assert again.code == 2 and "ada" in again.err


@scenario
def scenario_memory(sh: Shell, work: Path, home: Path, monkeypatch) -> None:
    (home / "memory").mkdir(exist_ok=True)
    (home / "memory" / "profile.md").write_text("The user's editor is vim.\n", "utf-8")
    shown = sh.example("lokal memory show")
    assert shown.code == 0 and "The user's editor is vim." in shown.out
    notes = sh.example("lokal memory notes")
    assert notes.code == 0 and notes.json() == []
    added = sh.example('lokal memory add "text"')
    assert added.code == 0 and added.json() == {"id": 1}
    sh.setup("memory", "add", "The staging server is called Orion.")
    sh.setup("memory", "add", "Backups run at 02:00.")
    selected = sh.example('lokal memory select "question"')
    assert selected.code == 0 and isinstance(selected.json(), list)
    deleted = sh.example("lokal memory delete 3")
    assert deleted.code == 0 and deleted.json() == {"deleted": 3}
    assert [n["id"] for n in sh.example("lokal memory notes").json()] == [1, 2]
    again = sh.example("lokal memory delete 3")  # no such note any more: exit 2
    assert again.code == 2 and "3" in again.err


@scenario
def scenario_rag(sh: Shell, work: Path, home: Path, monkeypatch) -> None:
    docs = [p for p in (REPO / "data" / "docs").iterdir() if p.is_file()]
    indexed = sh.example("lokal rag index data/docs")
    assert indexed.code == 0, indexed.err
    report = indexed.json()
    assert report["files"] == len(docs) and report["total_chunks"] > 0
    found = sh.example('lokal rag search "busy timeout" --k 5 --json')
    assert found.code == 0
    hits = found.json()
    assert 1 <= len(hits) <= 5
    assert all({"source", "text", "score"} <= set(hit) for hit in hits)
    assert "sqlite_wal.txt" in {hit["source"] for hit in hits}  # where busy_timeout is
    stats = sh.example("lokal rag stats")
    assert stats.code == 0
    assert stats.json()["chunks"] == report["total_chunks"]
    assert sorted(stats.json()["files"]) == sorted(p.name for p in docs)
    scores = sh.example("lokal rag eval")
    assert scores.code == 0, scores.err
    for word in ("hit@1", "hit@5", "MRR", "vector", "bm25", "hybrid"):
        assert word in scores.out
    ran = sh.example('lokal run "..." --store sqlite')
    assert ran.code == 0, ran.err
    from lokal.trace import read_trace

    (trace,) = (home / "traces").glob("*.jsonl")
    start = read_trace(trace)[0]
    assert start["type"] == "run_start" and "knowledge_search" in start["tools"]


# --- the tests -------------------------------------------------------------------------------


def test_the_collector_reads_shell_blocks_only():
    text = "\n".join(
        [
            "```sh",
            "lokal run \"What's up?\" --json   # a comment, with it's quote",
            "lokal bench --profile p \\",
            "  --limit 5",
            "make run",
            "```",
            "```console",
            "$ lokal mcp list servers.json",
            "weather: 9 tool(s)",
            "```",
            "```",
            "$ lokal traces list",
            "```",
            "```",
            "round 1  lokal in prose",
            "```",
            "```python",
            "lokal = 1",
            "lokal run('x')",
            "```",
            "```json",
            '{"command": "lokal"}',
            "```",
        ]
    )
    assert collect_commands(text, "x.md") == {
        'lokal run "What\'s up?" --json': ["x.md:2"],
        "lokal bench --profile p --limit 5": ["x.md:3"],
        "lokal mcp list servers.json": ["x.md:8"],
        "lokal traces list": ["x.md:12"],
    }


def test_every_documented_command_is_in_the_table_and_only_those():
    documented = collect_documented()
    missing = sorted(set(documented) - set(EXAMPLES))
    stale = sorted(set(EXAMPLES) - set(documented))
    lines = []
    if missing:
        lines.append("printed but without a check in EXAMPLES (add an entry):")
        lines += [f"  {c!r}  ({', '.join(documented[c])})" for c in missing]
    if stale:
        lines.append("in EXAMPLES but no longer printed (remove or update the entry):")
        lines += [f"  {c!r}" for c in stale]
    assert not lines, "\n".join(lines)


def _words(command: str) -> list[str]:
    return shlex.split(re.sub(r"[\[\]]", " ", command))


def _flags(command: str) -> set[str]:
    return {w.split("=")[0] for w in _words(command) if re.match(r"^--?[A-Za-z]", w)}


def _alternatives(command: str) -> set[str]:
    """The choices a shorthand offers: ``a|b`` in one word, or ``x | y`` between words."""
    words = _words(command)
    found = {a for w in words if "|" in w and w != "|" for a in w.split("|")}
    for i, word in enumerate(words):
        if word == "|":
            found |= {words[i - 1], words[i + 1]}
    return found


def _command_path(argv: list[str]) -> list[str]:
    """The (sub)command words of ``argv``: ``["rag", "ask"]``."""
    import argparse

    parser, path = build_parser(), []
    for word in argv:
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subparsers or word not in subparsers[0].choices:
            break
        parser = subparsers[0].choices[word]
        path.append(word)
    return path


@pytest.mark.parametrize("command", sorted(EXAMPLES))
def test_each_example_parses_and_its_options_are_in_its_help(command, capsys):
    entry = EXAMPLES[command]
    concrete = variants(command)
    # the variants are the shorthand written out: its options, and each of its choices
    assert _flags(command) == set().union(*map(_flags, concrete)), concrete
    used = {w for v in concrete for w in _words(v)}
    assert _alternatives(command) <= used, _alternatives(command) - used
    for variant in concrete:
        argv = argv_of(variant)
        path = _command_path(argv)
        assert path, f"no lokal command in {variant!r}"
        capsys.readouterr()
        with pytest.raises(SystemExit) as done:
            main([*path, "--help"])
        assert done.value.code == 0
        help_text = capsys.readouterr().out
        for flag in _flags(variant):
            assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text), (
                f"{flag} of {variant!r} is not in `lokal {' '.join(path)} --help`"
            )
        args = build_parser().parse_args(argv)  # a bad value would exit 2 here
        if isinstance(entry, HelpOnly) and variant == concrete[0]:
            for name, value in entry.parsed.items():
                assert getattr(args, name) == value, (name, getattr(args, name), value)
        # the files and folders of the repository it names exist
        for word in _words(variant)[1:]:
            if word.startswith(REPO_PATH_PREFIXES):
                assert (REPO / word).exists(), f"{word} of {variant!r} is not in the repository"


def _load_test(reference: str, monkeypatch) -> Callable[..., object]:
    """The test function ``path::name``, from the module pytest imported if it did (its
    modules are imported by file name, their folder first on sys.path), else imported here."""
    path, _, name = reference.partition("::")
    file = REPO / path
    assert file.is_file(), f"{path} does not exist"
    module = sys.modules.get(file.stem)
    if module is None or Path(module.__file__ or "").resolve() != file.resolve():
        monkeypatch.syspath_prepend(str(file.parent))  # its sibling modules (fixtures)
        spec = importlib.util.spec_from_file_location(f"readme_examples_{file.stem}", file)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    function = getattr(module, name, None)
    assert callable(function), f"{reference} does not exist"
    return function


@pytest.mark.parametrize(
    "command", sorted(c for c, e in EXAMPLES.items() if isinstance(e, Covered))
)
def test_covered_examples_have_their_test(command, monkeypatch):
    entry = EXAMPLES[command]
    sources = [inspect.getsource(_load_test(ref, monkeypatch)) for ref in entry.tests]
    for words in entry.words:
        assert any(words in source for source in sources), (
            f"none of {entry.tests} holds {words!r} of the example"
        )


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else []) for n in SCENARIOS],
)
def test_examples_run_as_printed(name, workdir, isolated_lokal_home, capsys, monkeypatch):
    mine = [c for c, e in EXAMPLES.items() if isinstance(e, Run) and e.scenario == name]
    assert mine, f"no example runs in scenario {name}"
    extras = {v: EXAMPLES[c].extra for c in mine for v in variants(c)}
    for c in mine:  # a command line shared by two entries is run one way
        assert all(extras[v] == EXAMPLES[c].extra for v in variants(c)), c
    sh = Shell(capsys, extras)
    SCENARIOS[name](sh, workdir, isolated_lokal_home, monkeypatch)
    not_run = sorted(set(extras) - sh.ran)
    assert not not_run, f"scenario {name} did not run: {not_run}"


def test_every_run_entry_has_its_scenario():
    unknown = {e.scenario for e in EXAMPLES.values() if isinstance(e, Run)} - set(SCENARIOS)
    assert not unknown, f"no scenario function for {unknown}"
