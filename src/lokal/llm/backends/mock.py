"""The deterministic mock backend, reproducing the original scripts' mock behaviour as raw text.

- First turn (no ToolMessage since the last user message): call ``file_reader`` and
  ``local_file_search`` (those of the two that the tools schema offers).
- After ToolMessages: fail fast on the first failed one; otherwise a final answer of three
  points drawn from every ToolMessage's ``output.content``.
- Plan step (``purpose == "plan"``): a fixed three-step plan.

It writes text, not messages, so its replies go through the same parser as a real model's:
the JSON envelope in prompt_json and constrained mode, Qwen3 XML in builtin mode.

For tests only: ``LOKAL_MOCK_DELAY_S`` (seconds) makes every reply take that long, so that a
test can stop a real ``lokal run`` process in the middle of a decision (Ctrl-C).
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

from lokal.config import Profile
from lokal.errors import ConfigError
from lokal.llm.backends import Completion, GenerationRequest
from lokal.messages import current_turn, last_user_text, read_tool_result
from lokal.progress import report

FIRST_TURN_CALLS = [
    {"name": "file_reader", "args": {"path": "docs/agent_intro.txt", "max_chars": 2000}},
    {"name": "local_file_search", "args": {"query": "Agent"}},
]
PLAN = [
    ("读取 Agent 介绍文档", "file_reader", {"path": "docs/agent_intro.txt"}),
    ("搜索包含 Agent 的文件", "local_file_search", {"query": "Agent", "root_dir": "docs"}),
    ("执行示例数学计算", "calculator", {"expression": "2 + 2"}),
]
FAILURE_PREFIX = "工具调用失败，无法完成请求："
FAILURE_PREFIX_EN = "The tool call failed, so the request cannot be completed: "
ANSWER_PREFIX = "三条中文要点如下：\n"  # the seed's answer, to its Chinese question
ANSWER_PREFIX_EN = "Three points:\n"  # a question in another language is answered in English
NO_CONTENT = "工具结果未提供可提取内容"
DELAY_ENV = "LOKAL_MOCK_DELAY_S"  # tests only: seconds every reply takes


def _current_turn_tool_messages(conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in current_turn(conversation) if m.get("role") == "tool"]


def three_points(text: str) -> str:
    """The first three sentences or lines of ``text``, numbered."""
    pieces = [p.strip() for p in re.split(r"[。！？!?\n；;]+|(?<=\.)\s+", text)]
    pieces = [p.rstrip(".。") for p in pieces if p.strip(" .。")]
    return "\n".join(f"{n}. {piece}" for n, piece in enumerate(pieces[:3], start=1))


def _final_answer(tool_messages: list[dict[str, Any]], question: str = "") -> str:
    chinese = re.search(r"[\u4e00-\u9fff]", question) is not None or not question
    for message in tool_messages:
        result = read_tool_result(message)
        if message.get("status") != "success" or result.get("status") != "success":
            detail = result.get("error") or result.get("output") or "unknown error"
            return f"{FAILURE_PREFIX if chinese else FAILURE_PREFIX_EN}{detail}"
    summaries = []
    for message in tool_messages:
        output = read_tool_result(message).get("output")
        content = output.get("content") if isinstance(output, dict) else None
        if isinstance(content, str) and content.strip():
            summaries.append(content)
    combined = "\n".join(summaries) if summaries else NO_CONTENT
    return (ANSWER_PREFIX if chinese else ANSWER_PREFIX_EN) + three_points(combined)


def _as_qwen_xml(calls: list[dict[str, Any]]) -> str:
    blocks = []
    for call in calls:
        params = "".join(
            f"<parameter={key}>\n{value if isinstance(value, str) else json.dumps(value)}\n"
            "</parameter>\n"
            for key, value in call["args"].items()
        )
        blocks.append(f"<tool_call>\n<function={call['name']}>\n{params}</function>\n</tool_call>")
    return "\n".join(blocks)


class MockBackend:
    """Deterministic replies for demos and tests; loads nothing."""

    name = "mock"
    capabilities = frozenset({"prompt_json", "builtin", "constrained"})

    def __init__(self, profile: Profile | None = None) -> None:
        self.profile = profile

    def generate(self, request: GenerationRequest) -> Completion:
        offered = {(tool.get("function") or tool).get("name") for tool in request.tools or []}
        text = self._reply(request, offered)
        delay = os.environ.get(DELAY_ENV)
        if delay:
            try:
                seconds = float(delay)
            except ValueError:
                raise ConfigError(f"{DELAY_ENV}={delay!r} is not a number of seconds") from None
            time.sleep(seconds)
        prompt_chars = sum(len(str(m.get("content") or "")) for m in request.messages)
        tokens = max(1, len(text) // 4)
        report(tokens=tokens, text=text)
        return Completion(
            text=text,
            prompt_tokens=prompt_chars // 4,
            completion_tokens=tokens,
            finish_reason="stop",
        )

    def _reply(self, request: GenerationRequest, offered: set[str]) -> str:
        tool_messages = _current_turn_tool_messages(request.conversation)
        if request.purpose == "plan" and not tool_messages:
            plan = [
                {"step": i, "description": d, "tool_call": {"name": n, "args": a}}
                for i, (d, n, a) in enumerate(PLAN, start=1)
            ]
            return json.dumps({"reasoning": "Mock plan.", "plan": plan}, ensure_ascii=False)
        if tool_messages or request.purpose == "final":
            answer = _final_answer(tool_messages, last_user_text(request.conversation))
            return json.dumps({"content": answer, "tool_calls": []}, ensure_ascii=False)
        calls = [call for call in FIRST_TURN_CALLS if call["name"] in offered]
        if not calls:
            question = last_user_text(request.conversation)
            return json.dumps({"content": f"Mock answer to: {question}"}, ensure_ascii=False)
        if request.pass_tools:
            return _as_qwen_xml(calls)  # builtin mode: answer in a native format
        return json.dumps({"content": "", "tool_calls": calls}, ensure_ascii=False)
