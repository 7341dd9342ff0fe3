"""`lokal decide` on the mock backend reproduces the original scripts' outputs for each
example input."""

import json

import pytest

from helpers import DATA, MODEL_CONFIG, load_json
from lokal.cli import main

SEED_FIRST_TURN = [
    {
        "id": "call_001",
        "name": "file_reader",
        "args": {"path": "docs/agent_intro.txt", "max_chars": 2000},
    },
    {"id": "call_002", "name": "local_file_search", "args": {"query": "Agent"}},
]
SEED_PLAN = [
    {"id": "call_001", "name": "file_reader", "args": {"path": "docs/agent_intro.txt"}},
    {"id": "call_002", "name": "local_file_search", "args": {"query": "Agent", "root_dir": "docs"}},
    {"id": "call_003", "name": "calculator", "args": {"expression": "2 + 2"}},
]
SEED_PLAN_ANSWER = (
    "三条中文要点如下：\n1. Agent 系统通常由模型、工具、记忆和执行循环组成\n"
    "2. 工具调用让模型能够读取本地文件、执行计算\n3. Memory 为 Agent 提供全局知识和历史对话上下文"
)


def run_decide(tmp_path, messages, *extra):
    outdir = tmp_path / "out"
    code = main(
        [
            "decide",
            "--model_config",
            str(MODEL_CONFIG),
            "--messages",
            str(DATA / "messages" / messages),
            "--tools_schema",
            str(DATA / "messages" / "tools_schema_basic.json"),
            "--outdir",
            str(outdir),
            *extra,
        ]
    )
    return code, outdir


@pytest.mark.parametrize(
    "messages", ["messages_no_tool.json", "messages_with_tool.json", "messages_multi_tool.json"]
)
def test_mock_first_turn_calls_file_reader_and_search(tmp_path, capsys, messages):
    code, outdir = run_decide(tmp_path, messages, "--mode", "mock")
    assert code == 0
    expected = {"role": "assistant", "content": "", "tool_calls": SEED_FIRST_TURN}
    assert load_json(outdir / "ai_message.json") == expected
    assert json.loads(capsys.readouterr().out) == expected
    result = load_json(outdir / "result.json")
    assert result["status"] == "success" and result["model"]["backend"] == "mock"
    assert result["parse"]["format"] == "json_envelope"
    assert (outdir / "raw_output.txt").read_text(encoding="utf-8") == result["raw_text"]
    prompt = load_json(outdir / "prompt.json")
    assert prompt[0]["role"] == "system" and "Available tools:" in prompt[0]["content"]


def test_mock_plan_is_the_seeds_three_step_plan(tmp_path):
    code, outdir = run_decide(
        tmp_path, "messages_plan_input.json", "--mode", "plan_execute", "--model_name", "mock"
    )
    assert code == 0
    assert load_json(outdir / "ai_message.json")["tool_calls"] == SEED_PLAN
    plan = load_json(outdir / "result.json")["parse"]["plan"]
    assert plan["reasoning"] == "Mock plan." and plan["total_steps"] == 3


def test_mock_plan_with_results_gives_the_seeds_final_answer(tmp_path):
    code, outdir = run_decide(
        tmp_path,
        "messages_plan_with_results.json",
        "--mode",
        "plan_execute",
        "--model_name",
        "mock",
    )
    assert code == 0
    assert load_json(outdir / "ai_message.json") == {
        "role": "assistant",
        "content": SEED_PLAN_ANSWER,
        "tool_calls": [],
    }
    assert load_json(outdir / "result.json")["purpose"] == "step"


def test_mock_fails_fast_on_a_failed_tool_message(tmp_path):
    code, outdir = run_decide(tmp_path, "messages_with_failed_tool.json", "--mode", "mock")
    assert code == 0
    content = load_json(outdir / "ai_message.json")["content"]
    assert content == "工具调用失败，无法完成请求：no such file: docs/missing.txt"


def test_mock_builtin_mode_answers_in_qwen_xml_and_the_parser_reads_it(tmp_path):
    code, outdir = run_decide(
        tmp_path, "messages_with_tool.json", "--mode", "mock", "--tool_calling", "builtin"
    )
    assert code == 0
    result = load_json(outdir / "result.json")
    assert result["raw_text"].startswith("<tool_call>\n<function=file_reader>")
    assert result["parse"]["format"] == "qwen_xml"
    assert result["ai_message"]["tool_calls"] == SEED_FIRST_TURN


def test_missing_messages_file_is_a_clear_error(tmp_path, capsys):
    code = main(
        [
            "decide",
            "--model_config",
            str(MODEL_CONFIG),
            "--messages",
            str(tmp_path / "nope.json"),
            "--mode",
            "mock",
        ]
    )
    assert code == 2
    assert "not found" in capsys.readouterr().err
