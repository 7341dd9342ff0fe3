"""The development and evaluation sets share no question (issue 21): a case tuned on must
never be a case reported on."""

from __future__ import annotations

import json
import re

from helpers import DATA


def _norm(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.casefold()))


def _case_questions(folder):
    out = {}
    for path in sorted(folder.glob("*.json")):
        case = json.loads(path.read_text(encoding="utf-8"))
        for message in case.get("messages") or []:
            if message.get("role") == "user" and isinstance(message.get("content"), str):
                out[_norm(message["content"])] = path.name
    return out


def _task_questions(path):
    return {_norm(t["question"]): t["id"] for t in json.loads(path.read_text(encoding="utf-8"))}


def test_development_and_evaluation_questions_do_not_overlap():
    development = {
        **_case_questions(DATA / "dev" / "cases"),
        **_task_questions(DATA / "dev" / "e2e_tasks.json"),
        **_task_questions(DATA / "dev" / "e2e_pairs.json"),
        **_task_questions(DATA / "dev" / "e2e_tasks_zh.json"),
        **_task_questions(DATA / "dev" / "e2e_tasks_more.json"),
    }
    evaluation = {
        **_case_questions(DATA / "bench_cases"),
        **{
            question: task
            for path in sorted((DATA / "eval").glob("e2e_tasks*.json"))
            for question, task in _task_questions(path).items()
        },
    }
    assert len(development) > 100 and len(evaluation) > 40  # the sets were read
    shared = {q: (development[q], evaluation[q]) for q in development.keys() & evaluation.keys()}
    assert shared == {}
