"""Evidence: the passages of tool results that answer the question.

A tool result is cut into short passages (``key: value`` for scalars, a list's flat records
whole, the sentences and list items of long text, a list's lead line with the heads of its
items); the passages closest to
the question are found by BM25 then ranked by the embedding model (the selector's MiniLM).
The answer prompt shows them below the results (``Most relevant: ...``), and the extractive
fallback (``lokal.llm.extract``) answers with one of them when the model's replies fail the
answer checks. Tool preselection, which ranks tools rather than passages, is
``lokal.llm.select``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lokal.llm.select import ToolSelector, bm25_text, default_selector
from lokal.messages import last_user_text, read_tool_result

__all__ = ["Passage", "evidence", "rank_passages", "result_passages", "text_passages"]


_LINE_SPLIT = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")
_ENDS = (".", "!", "?", ":", "。", "！", "？")
_MAX_EVIDENCE_CANDIDATES = 30


_ITEM = re.compile(r"^\s*(?:\d{1,3}[.)]|[-*•])\s+(.*)$")
_ITEM_HEAD = re.compile(r"^(.{1,40}?)\s+(?:-|–|—|:)\s+")


def text_passages(text: str) -> list[str]:
    """The passages of a long text: its sentences (prose lines wrapped at a width joined
    first), each list item whole (with its wrapped lines), and for a line that introduces a
    list ("… four parts:") that line with the heads of its items ("… four parts: Model,
    Tools, Memory, Loop.") — the shortest passage that says what the list holds."""
    passages: list[str] = []
    lead: str | None = None  # a line ending in ":" just before a list, maybe a block above
    for block in re.split(r"\n\s*\n", text):
        items: list[str] = []
        prose: list[str] = []
        for line in (line.rstrip() for line in block.splitlines() if line.strip()):
            item = _ITEM.match(line)
            if item:
                if not items and prose and prose[-1].endswith(":"):
                    lead = prose[-1]
                items.append(item.group(1).strip())
            elif items and line[:1].isspace():  # a wrapped line of the item above
                items[-1] += " " + line.strip()
            elif prose and len(prose[-1]) >= 50 and not prose[-1].endswith(_ENDS):
                prose[-1] += " " + line.strip()  # a prose line wrapped at a width
            else:
                prose.append(line.strip())
        for line in prose:
            for sentence in _LINE_SPLIT.split(line):
                sentence = sentence.strip(" -*#|>\t")
                if len(sentence) > 3:
                    passages.append(sentence[:300])
        passages += [item[:300] for item in items]
        heads = [m.group(1) for m in map(_ITEM_HEAD.match, items) if m]
        if items and lead is not None and len(heads) == len(items):
            passages.append(f"{lead} {', '.join(heads)}."[:300])
        lead = prose[-1] if not items and prose and prose[-1].endswith(":") else None
    return list(dict.fromkeys(passages))


_MAX_RECORD = 240


def _record(item: Any, echoes: set[str]) -> str | None:
    """A list item that is a flat record (a search hit, a table row) as one passage, its
    fields together ("path: data/sales.csv, line: 4, snippet: East,Gizmo,8,7.25"): the file
    a hit is in and the region a total belongs to stay with their values. None for
    anything else, or a record too long to be a passage."""
    if not isinstance(item, dict) or not item:
        return None
    if any(isinstance(v, dict | list) for v in item.values()):
        return None
    fields = [
        f"{k}: {str(v).strip()}"
        for k, v in item.items()
        if v is not None and not isinstance(v, bool) and str(v).strip() not in echoes
    ]
    text = ", ".join(fields)
    return text if fields and len(text) <= _MAX_RECORD else None


def _result_passages(output: Any, echoes: set[str]) -> list[str]:
    """Short passages of a tool output: ``key: value`` for scalars, a flat record of a list
    (a search hit, a table row) whole, lines and sentences of long strings. Values that only
    echo the call's arguments are left out."""
    passages: list[str] = []

    def walk(value: Any, key: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, str(k))
        elif isinstance(value, list):
            for item in value[:50]:
                record = _record(item, echoes)
                if record is not None:
                    passages.append(record)
                else:
                    walk(item, key)
        elif value is None or isinstance(value, bool):
            return
        else:
            text = str(value).strip()
            if not text or text in echoes:
                return
            if len(text) <= 80:
                passages.append(f"{key}: {text}" if key else text)
                return
            passages.extend(text_passages(text))

    walk(output, "")
    return list(dict.fromkeys(passages))


@dataclass(frozen=True)
class Passage:
    """A passage of a tool result, with the tool that returned it and the file it read
    (the call's ``path`` argument, when it had one)."""

    text: str
    tool: str
    file: str | None = None
    failed: bool = False

    @property
    def origin(self) -> str:
        return f"{self.tool} ({self.file})" if self.file else self.tool


def result_passages(messages: Sequence[dict[str, Any]]) -> list[Passage]:
    """The passages of the tool results that follow the last assistant message (the latest
    round of calls), in order, each once; a failed call gives one passage saying so."""
    trailing = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        trailing.insert(0, message)
    calls = {
        c.get("id"): c
        for m in messages
        if m.get("role") == "assistant"
        for c in m.get("tool_calls") or []
    }
    passages: list[Passage] = []
    seen: set[str] = set()
    for message in trailing:
        result = read_tool_result(message)
        call = calls.get(message.get("tool_call_id")) or {}
        tool = str(message.get("name") or call.get("name") or "tool")
        args = call.get("args") or {}
        path = args.get("path") or args.get("file") or args.get("filename")
        file = str(path) if isinstance(path, str) and path else None
        if result["status"] != "success":
            failure = f"{tool} failed: {result['error']}"[:300]
            if failure not in seen:
                seen.add(failure)
                passages.append(Passage(failure, tool, file, failed=True))
            continue
        echoes = {str(v).strip() for v in args.values()}
        for text in _result_passages(result["output"], echoes):
            if text not in seen:
                seen.add(text)
                passages.append(Passage(text, tool, file))
    return passages


def rank_passages(
    question: str,
    passages: Sequence[Passage],
    *,
    k: int = 1,
    selector: ToolSelector | None = None,
) -> list[Passage]:
    """The ``k`` passages that match ``question`` best (BM25 picks up to 30 candidates,
    MiniLM ranks them; BM25 alone without embeddings)."""
    from lokal.rag.retrieval import BM25Index

    if len(passages) <= k:
        return list(passages)
    texts = [p.text for p in passages]
    ranked = [
        i
        for i, _ in BM25Index(list(range(len(texts))), [bm25_text(t) for t in texts]).search(
            bm25_text(question), k=_MAX_EVIDENCE_CANDIDATES
        )
    ]
    rest = [i for i in range(len(texts)) if i not in ranked]
    pool = ranked + rest[: _MAX_EVIDENCE_CANDIDATES - len(ranked)]
    selector = selector or default_selector()
    vectors = selector.embed_texts([question, *(texts[i] for i in pool)])
    if vectors is None:
        return [passages[i] for i in pool[:k]]
    cosines = vectors[1:] @ vectors[0]
    order = np.argsort(-cosines, kind="stable")[:k]
    return [passages[pool[i]] for i in order]


def evidence(
    messages: Sequence[dict[str, Any]], *, k: int = 1, selector: ToolSelector | None = None
) -> list[str]:
    """The ``k`` passages of the latest tool results that match the last question best
    (``rank_passages`` over ``result_passages``)."""
    passages = result_passages(messages)
    if not passages:
        return []
    question = last_user_text(list(messages))
    return [p.text for p in rank_passages(question, passages, k=k, selector=selector)]
