"""lokal bench: the case files, judging, reports, and independence from --concurrency."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest
import yaml

from helpers import DATA, MODEL_CONFIG, basic_tools, envelope
from lokal.bench.batch import judge, load_cases, percentile, run_bench, summarize
from lokal.bench.report import CHARTS
from lokal.cli import main
from lokal.config import load_profile
from lokal.errors import ConfigError
from lokal.llm.backends.scripted import ScriptedBackend
from lokal.records import ERROR_KINDS

CASES_DIR = DATA / "bench_cases"
SEED_SCENARIOS = (
    "file_read",
    "calculator",
    "file_search",
    "multi_tool",
    "direct_answer",
    "table_analyzer",
)


def _without_timing(records):
    return [{k: v for k, v in r.items() if k != "latency_ms"} for r in records]


def test_case_files_are_complete():
    cases = load_cases(CASES_DIR)
    assert len(cases) >= 30
    ids = [c["id"] for c in cases]
    assert len(set(ids)) == len(ids)
    assert set(SEED_SCENARIOS) <= set(ids)
    kinds = {
        "plan": any(c.get("mode") == "plan_execute" for c in cases),
        "skills": any(
            any((t.get("function") or t)["name"] == "read_skill" for t in c.get("tools", []))
            for c in cases
        ),
        "failed tool": any(
            c["messages"][-1]["role"] == "tool" and c["messages"][-1]["status"] == "error"
            for c in cases
        ),
        "no tool": any(c["expect"].get("no_tool") for c in cases),
        "several tools": any(len(c["expect"].get("tool_calls", [])) >= 2 for c in cases),
        "follow-up": any(
            c["messages"][-1]["role"] == "tool" and c["expect"].get("content_contains")
            for c in cases
        ),
        "chinese": any(
            any("\u4e00" <= ch <= "\u9fff" for ch in c["messages"][-1]["content"])
            for c in cases
            if c["messages"][-1]["role"] == "user"
        ),
    }
    assert all(kinds.values()), kinds
    for case in cases:
        assert case["description"]
        expect = case["expect"]
        assert {"tool_calls", "no_tool", "content_contains"} & set(expect), case["id"]


@pytest.mark.slow
def test_mock_bench_over_all_cases_writes_the_reports(tmp_path, capsys):
    outdir = tmp_path / "bench"
    code = main(
        [
            "bench",
            "--model_config", str(MODEL_CONFIG),
            "--cases", str(CASES_DIR),
            "--tools_schema", str(DATA / "messages" / "tools_schema_basic.json"),
            "--mode", "mock",
            "--modes", "prompt_json,constrained",
            "--outdir", str(outdir),
        ]
    )  # fmt: skip
    assert code == 0
    n_cases = len(load_cases(CASES_DIR))
    summary = json.loads((outdir / "summary.json").read_text("utf-8"))
    # the mock decided, so the rows say mock, not the llama.cpp profile
    assert set(summary["summary"]) == {"mock/prompt_json", "mock/constrained"}
    for group in summary["summary"].values():
        assert group["cases"] == n_cases
        for field in (
            "success_rate", "correct_rate", "latency_ms_mean", "latency_ms_p50",
            "latency_ms_p95", "prompt_tokens_total", "completion_tokens_total",
            "prompt_tokens_mean", "completion_tokens_mean",
        ):  # fmt: skip
            assert field in group
        assert group["success_rate"] == 100.0  # the mock always answers validly
    lines = (outdir / "cases.jsonl").read_text("utf-8").splitlines()
    assert len(lines) == 2 * n_cases
    record = json.loads(lines[0])
    for field in (
        "case", "profile", "mode", "status", "valid", "correct", "latency_ms", "prompt_tokens",
        "completion_tokens", "tool_calls_count", "content_len", "parse_format", "retries", "error",
    ):  # fmt: skip
        assert field in record
    page = (outdir / "report.html").read_text("utf-8")
    assert page.count('<img alt="') == len(CHARTS)
    for name in CHARTS:
        assert f'<img alt="{name}" src="data:image/png;base64,' in page
        assert (outdir / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "http://" not in page and "https://" not in page  # self-contained
    _assert_valid_html(page)
    assert "lokal bench" in capsys.readouterr().out


class _TagChecker(HTMLParser):
    VOID = frozenset({"meta", "img", "br", "hr", "link", "input"})

    def __init__(self):
        super().__init__()
        self.stack: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, (tag, self.stack[-3:])
        self.stack.pop()


def _assert_valid_html(page: str) -> None:
    assert page.startswith("<!DOCTYPE html>")
    checker = _TagChecker()
    checker.feed(page)
    checker.close()
    assert checker.stack == []


@pytest.mark.slow
def test_mock_bench_does_not_depend_on_concurrency():
    profile = load_profile(MODEL_CONFIG)
    cases = load_cases(CASES_DIR)
    runs = [
        run_bench([profile], [None, "constrained"], cases, basic_tools(), decision_mode="mock",
                  concurrency=n)
        for n in (1, 4)
    ]  # fmt: skip
    assert _without_timing(runs[0]) == _without_timing(runs[1])
    assert [r["case"] for r in runs[0][: len(cases)]] == [c["id"] for c in cases]


SCRIPTED_CASES = [
    {"id": "calc_ok", "messages": [{"role": "user", "content": "calc 2+2"}],
     "expect": {"tool_calls": [{"name": "calculator", "args": {"expression": " 2+2 "}}]}},
    {"id": "calc_wrong_args", "messages": [{"role": "user", "content": "calc 3+3"}],
     "expect": {"tool_calls": [{"name": "calculator", "args": {"expression": "3+3"}}]}},
    {"id": "two_any_order", "messages": [{"role": "user", "content": "read and calc"}],
     "expect": {"tool_calls": [{"name": "calculator"},
                               {"name": "file_reader", "args": {"path": "DOCS/A.TXT"}}]}},
    {"id": "two_ordered_wrong", "messages": [{"role": "user", "content": "read then calc"}],
     "expect": {"tool_calls": [{"name": "calculator"}, {"name": "file_reader"}],
                "order_matters": True}},
    {"id": "answer_ok", "messages": [{"role": "user", "content": "hello"}],
     "expect": {"no_tool": True}},
    {"id": "answer_called_tool", "messages": [{"role": "user", "content": "joke"}],
     "expect": {"no_tool": True}},
    {"id": "contains_ok", "messages": [{"role": "user", "content": "sum?"}],
     "expect": {"content_contains": ["144"]}},
    {"id": "garbage", "messages": [{"role": "user", "content": "garbage"}],
     "expect": {"no_tool": True}},
]  # fmt: skip
REPLIES = {
    "calc 2+2": envelope([("calculator", {"expression": "2+2"})]),
    "calc 3+3": envelope([("calculator", {"expression": "3*3"})]),
    "read and calc": envelope(
        [("file_reader", {"path": "docs/a.txt"}), ("calculator", {"expression": "1+1"})]
    ),
    "read then calc": envelope(
        [("file_reader", {"path": "docs/a.txt"}), ("calculator", {"expression": "1+1"})]
    ),
    "hello": "Hello! How can I help?",
    "joke": envelope([("calculator", {"expression": "1+1"})]),
    "sum?": "The total is 144.",
    "garbage": '{"tool_calls": [{"name": "nope"',
}
VERDICTS = {
    "calc_ok": True,
    "calc_wrong_args": False,
    "two_any_order": True,
    "two_ordered_wrong": False,
    "answer_ok": True,
    "answer_called_tool": False,
    "contains_ok": True,
    "garbage": False,
}


def _scripted(request):
    question = request.conversation[-1]["content"]
    return REPLIES[question]


@pytest.mark.parametrize("concurrency", [1, 4])
def test_scripted_cases_are_judged_right(concurrency):
    profile = load_profile(MODEL_CONFIG, "mock")
    backend = ScriptedBackend([_scripted] * 64)
    records = run_bench(
        [profile], [None], SCRIPTED_CASES, basic_tools(), concurrency=concurrency,
        backend=backend,
    )  # fmt: skip
    assert {r["case"]: r["correct"] for r in records} == VERDICTS
    garbage = next(r for r in records if r["case"] == "garbage")
    assert not garbage["valid"] and garbage["retries"] == 1 and garbage["error"]
    summary = summarize(records)["mock/prompt_json"]
    assert summary["correct"] == 4 and summary["success"] == 7


def test_judge_rules():
    message = {"content": "", "tool_calls": [{"name": "calculator", "args": {"expression": "2"}}]}
    assert (
        judge({"tool_calls": [{"name": "calculator", "args": {"expression": 2}}]}, message)[0]
        is False
    )
    assert judge({"tool_calls": [{"name": "calculator"}]}, message) == (True, None)
    assert judge({"no_tool": True}, {"content": "  ", "tool_calls": []})[0] is False
    assert judge({"content_contains": ["ABC"]}, {"content": "xabcx", "tool_calls": []})[0]
    assert judge({"no_tool": True}, None) == (False, "no valid AIMessage")


def test_percentile_and_bad_case_dirs(tmp_path):
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([5.0], 95) == 5.0
    with pytest.raises(ConfigError, match="not found"):
        load_cases(tmp_path / "missing")
    with pytest.raises(ConfigError, match=r"no \*\.json"):
        load_cases(tmp_path)
    (tmp_path / "bad.json").write_text('{"messages": []}', "utf-8")
    with pytest.raises(ConfigError, match="expect"):
        load_cases(tmp_path)


@pytest.mark.model
@pytest.mark.server
def test_bench_against_a_real_llama_cpp_server_with_concurrency(tmp_path):
    from lokal.models import resolve_model_path
    from servers import llama_cpp_server

    log = tmp_path / "server.log"
    cases = [c for c in load_cases(CASES_DIR) if c["id"] in ("calculator", "direct_answer")]
    with llama_cpp_server(resolve_model_path("bundled:smollm2-135m"), log) as url:
        config = tmp_path / "model.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "model": {
                        "backend": "openai",
                        "base_url": url,
                        "model": "smollm2",
                        "response_format": "json_object",
                    },
                    "generation": {"max_new_tokens": 96, "temperature": 0},
                    # short bounds so that a reply fits in 96 tokens (a cut-off reply
                    # is not a valid one)
                    "tool_calling": {
                        "mode": "constrained",
                        "max_calls": 1,
                        "max_string_length": 32,
                    },
                }
            ),
            "utf-8",
        )
        profile = load_profile(config)
        runs = [run_bench([profile], [None], cases, basic_tools(), concurrency=n) for n in (1, 2)]
    assert [r["case"] for r in runs[0]] == ["calculator", "direct_answer"]
    # a valid reply or a labelled failure (how many are valid is the 135M model's quality,
    # which differs between CPUs: benchmarks/model_mechanisms_quality.py)
    for record in runs[0]:
        assert record["valid"] in (True, False)
        if not record["valid"]:
            assert record["error"]["type"] in ERROR_KINDS, record
    assert _without_timing(runs[0]) == _without_timing(runs[1])


# --- arguments that matter, and the mode a summary names (issue 18, 7f) ----------------------

# the parameters whose value decides whether a call does what was asked, per tool
ARGUMENTS_THAT_MATTER = {
    "calculator": {"expression"},
    "file_reader": {"path"},
    "local_file_search": {"query"},
    "table_analyzer": {"path"},
    "read_skill": {"skill_name"},
    "code_execution": {"command"},
    "get_weather": {"city"},
}


def test_every_expected_call_of_the_cases_states_the_arguments_that_matter():
    missing = []
    for case in load_cases(CASES_DIR):
        for call in case["expect"].get("tool_calls", []):
            needed = ARGUMENTS_THAT_MATTER.get(call["name"])
            assert needed is not None, f"{case['id']}: add {call['name']} to the table"
            if not needed <= set(call.get("args") or {}):
                missing.append(f"{case['id']}: {call['name']} needs {sorted(needed)}")
    assert missing == []


def test_a_calculator_call_is_judged_by_its_value_not_its_name():
    (case,) = [c for c in load_cases(CASES_DIR) if c["id"] == "calculator"]  # 3.14 * 5

    def reply(expression):
        return {
            "content": "",
            "tool_calls": [{"name": "calculator", "args": {"expression": expression}}],
        }

    for right in ("3.14 * 5", "5*3.14", "15.7", " 3.14*5 "):
        assert judge(case["expect"], reply(right)) == (True, None), right
    for wrong in ("3.14", "3.14 + 5", "three", ""):
        correct, reason = judge(case["expect"], reply(wrong))
        assert correct is False and "calculator" in reason, wrong
    contains = {"tool_calls": [{"name": "run", "args": {"cmd": {"$contains": ["a.py", "X"]}}}]}
    call = {"content": "", "tool_calls": [{"name": "run", "args": {"cmd": "python A.py x"}}]}
    assert judge(contains, call)[0] is True
    call["tool_calls"][0]["args"]["cmd"] = "python b.py x"
    assert judge(contains, call)[0] is False


def test_summary_names_the_tool_calling_mode_the_decisions_used(tmp_path, capsys):
    from lokal.bench.batch import _record

    config = tmp_path / "model.yaml"
    config.write_text(
        "model: {name: m, backend: mock}\ntool_calling: {mode: staged}\n", encoding="utf-8"
    )
    outdir = tmp_path / "bench"
    argv = [
        *["bench", "--model_config", str(config), "--cases", str(CASES_DIR)],
        *["--limit", "2", "--outdir", str(outdir)],
    ]
    assert main(argv) == 0
    summary = json.loads((outdir / "summary.json").read_text("utf-8"))
    records = [json.loads(line) for line in (outdir / "cases.jsonl").read_text().splitlines()]
    # a staged profile on the mock, which cannot score: its decisions were constrained ones,
    # and the summary says so (not the --mode default, prompt_json)
    assert {r["mode"] for r in records} == {"staged"}
    assert {r["decision_mode"] for r in records} == {"constrained"}
    assert summary["decision_mode"] == "constrained"
    assert summary["tool_calling"] == ["constrained"]
    # a staged decision is recorded as staged
    result = {"status": "success", "ai_message": {"content": "hi", "tool_calls": []},
              "tool_calling": "staged", "mode": "prompt_json", "strategy": "react"}  # fmt: skip
    record = _record({"id": "c", "expect": {"no_tool": True}}, "p", "staged", result)
    assert record["decision_mode"] == "staged" and record["strategy"] == "react"
