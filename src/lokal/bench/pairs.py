"""Paraphrase pairs (issue 21): two tasks that ask the same thing in different words should
get the same first decision. ``data/dev/e2e_pairs.json`` holds such pairs (``pair`` names
the pair); ``benchmarks/run_tasks.py`` reports how often the two members agree."""

from __future__ import annotations

from typing import Any

__all__ = ["first_decision", "pair_agreement"]


def first_decision(messages: list[dict[str, Any]]) -> str:
    """The run's first decision: the sorted names of the first assistant message's calls
    (``"file_reader"``, ``"calculator+file_reader"``), or ``"answer"``."""
    for message in messages:
        if message.get("role") == "assistant":
            names = sorted({c["name"] for c in message.get("tool_calls") or []})
            return "+".join(names) if names else "answer"
    return "answer"


def pair_agreement(tasks: list[dict[str, Any]], decisions: dict[str, str]) -> dict[str, Any]:
    """How many pairs of ``tasks`` (grouped by ``pair``) got the same first decision in
    ``decisions`` (task id -> decision). Pairs with a member not run are left out."""
    members: dict[str, list[str]] = {}
    for task in tasks:
        if task.get("pair"):
            members.setdefault(task["pair"], []).append(task["id"])
    agreed, split = [], {}
    for pair, ids in members.items():
        if len(ids) < 2 or not all(i in decisions for i in ids):
            continue
        seen = {decisions[i] for i in ids}
        if len(seen) == 1:
            agreed.append(pair)
        else:
            split[pair] = {i: decisions[i] for i in ids}
    pairs = len(agreed) + len(split)
    return {
        "pairs": pairs,
        "agreed": len(agreed),
        "rate": len(agreed) / pairs if pairs else 0.0,
        "disagreements": split,
    }
