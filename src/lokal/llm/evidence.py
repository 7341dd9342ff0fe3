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

from lokal.glosses import cjk_share, english_glosses, stemmed
from lokal.llm.select import ToolSelector, bm25_text, default_selector
from lokal.llm.signals import (
    asks_for_each,
    asks_for_several,
    asks_how_many,
    asks_which_file,
    names_a_file,
)
from lokal.messages import last_user_text, read_tool_result

__all__ = [
    "Passage",
    "answerable",
    "evidence",
    "rank_passages",
    "result_passages",
    "says_something",
    "text_passages",
]


_LINE_SPLIT = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")
_ENDS = (".", "!", "?", ":", "。", "！", "？")
_MAX_EVIDENCE_CANDIDATES = 30


_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
_RULE = re.compile(r"^:?-{3,}:?$")
_ITEM = re.compile(r"^\s*(?:\d{1,3}[.)]|[-*•])\s+(.*)$")
_ITEM_HEAD = re.compile(r"^(.{1,40}?)\s+(?:-|–|—|:)\s+")


def text_passages(text: str) -> list[str]:
    """The passages of a long text: its sentences (prose lines wrapped at a width joined
    first), each list item whole (with its wrapped lines), and for a line that introduces a
    list ("… four parts:") that line with the heads of its items ("… four parts: Model,
    Tools, Memory, Loop.") — the shortest passage that says what the list holds."""
    passages: list[str] = []
    lead: str | None = None  # a line ending in ":" just before a list, maybe a block above
    heading: str | None = None  # the latest markdown heading ("## Tools the agent can use")
    for block in re.split(r"\n\s*\n", text):
        items: list[str] = []
        prose: list[str] = []
        rows: list[list[str]] = []
        for line in (line.rstrip() for line in block.splitlines() if line.strip()):
            item = _ITEM.match(line)
            if _HEADING.match(line):
                # a heading names a section: it introduces what follows, answers nothing
                heading = _HEADING.match(line).group(1).strip()
                continue
            if line.lstrip().startswith("|"):
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                if not all(_RULE.match(c) for c in cells):
                    rows.append(cells)
                continue
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
        body = rows[1:] if len(rows) > 1 else rows  # the first row names the columns
        passages += [" | ".join(c for c in row if c)[:300] for row in body]
        row_heads = [row[0] for row in body if row and row[0]]
        table_lead = next((p for p in reversed(prose) if p.endswith(":")), None) or heading
        if len(row_heads) > 1 and table_lead:
            # "Tools the agent can use: file_reader, local_file_search, calculator."
            lead_text = table_lead.rstrip(":")
            passages.append(f"{lead_text}: {', '.join(row_heads)}."[:300])
        heads = [m.group(1) for m in map(_ITEM_HEAD.match, items) if m]
        if items and lead is not None and len(heads) == len(items):
            passages.append(f"{lead} {', '.join(heads)}."[:300])
        lead = prose[-1] if not items and prose and prose[-1].endswith(":") else None
    return list(dict.fromkeys(passages))


_MAX_RECORD = 240
_MAX_LISTING = 400
# a text of this many words or more is a sentence, not a count or a name
_SENTENCE_WORDS = 5


_MIN_RECORD_FINDINGS = 3  # a flat result with this many fields of its own is one passage too


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


def _is_scalar(value: Any) -> bool:
    """A number or a string (not a flag, a record or a list)."""
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


def _result_passages(output: Any, echoes: set[str]) -> tuple[list[tuple[str, bool]], list[str]]:
    """Short passages of a tool output: ``key: value`` for scalars, a short list of scalars
    whole (``columns: region, product, units, price``), a flat record of a list (a search
    hit, a table row) whole, lines and sentences of long strings. Values that only
    echo the call's arguments are left out. Each comes with whether it is bookkeeping: a
    scalar beside the records or text that a result carries (``files_matched: 1`` next to
    the hits, ``truncated: false`` next to a file's content) says how the tool went, not
    what it found. Second, the listings: a short list of records whole (every region's
    total of a group-by), for a question about each of them."""
    passages: list[tuple[str, bool]] = []
    listings: list[str] = []

    def walk(value: Any, key: str, meta: bool = False) -> None:
        if isinstance(value, dict):
            found = any(
                (isinstance(v, list) and v) or (isinstance(v, str) and len(v.strip()) > 80)
                for v in value.values()
            )
            # a result whose findings are an empty list found nothing, and says so: "results:
            # none", not "files_scanned: 4" (a Chinese search for a topic of an English file)
            empty = [k for k, v in value.items() if isinstance(v, list) and not v]
            for k in empty if not found else []:
                passages.append((f"{k}: none", False))
            for k, v in value.items():
                walk(v, str(k), found or bool(empty))
        elif isinstance(value, list):
            scalars = [str(v).strip() for v in value if _is_scalar(v)]
            whole = ", ".join(scalars)
            short = all(scalars) and all(len(v) <= 80 for v in scalars)
            if 1 < len(scalars) == len(value) and short and len(whole) <= _MAX_LISTING:
                # a short list of names or numbers is one passage, whole: "columns: region,
                # product, units, price" says what the table holds, "columns: price" (one
                # item of it) said nothing of the rest (development task m12: "分析一下
                # data/sales.csv 这个表格。" was answered with it)
                passages.append((f"{key}: {whole}" if key else whole, False))
                return
            records = []
            for item in value[:50]:
                record = _record(item, echoes)
                if record is not None:
                    records.append(record)
                    passages.append((record, False))
                else:
                    walk(item, key)
            whole = "; ".join(records)
            if 1 < len(records) == len(value) and len(whole) <= _MAX_LISTING:
                # every group of a "per region" total together, as the question asks for
                listings.append(whole)
        elif value is None or isinstance(value, bool):
            return
        else:
            text = str(value).strip()
            if not text or text in echoes:
                return
            if len(text) <= 80:
                # a sentence beside the records says what was found ("overview: a table of
                # 20 rows and 4 columns: ..."), where a count or a word says how it went
                bookkeeping = meta and len(text.split()) < _SENTENCE_WORDS
                passages.append((f"{key}: {text}" if key else text, bookkeeping))
                return
            passages.extend((t, False) for t in text_passages(text))

    if isinstance(output, dict):
        # a result that is one flat record of several findings (the weather: condition,
        # temperature, wind...) is also one passage, its subject with it ("location:
        # Beijing" echoes the call, and says what the rest is about): "What's the weather
        # like in Beijing?" is answered by the whole of it, not by "country: China"
        found = [v for v in output.values() if v is not None and str(v).strip() not in echoes]
        whole = _record(output, set())
        if whole is not None and len(found) >= _MIN_RECORD_FINDINGS:
            passages.append((whole, False))
    walk(output, "")
    return list(dict.fromkeys(passages)), listings


@dataclass(frozen=True)
class Passage:
    """A passage of a tool result, with the tool that returned it and the file it read
    (the call's ``path`` argument, when it had one)."""

    text: str
    tool: str
    file: str | None = None
    failed: bool = False
    bookkeeping: bool = False
    listing: bool = False

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
        found, listings = _result_passages(result["output"], echoes)
        for text, bookkeeping in found:
            if text not in seen:
                seen.add(text)
                passages.append(Passage(text, tool, file, bookkeeping=bookkeeping))
        for text in listings:
            if text not in seen:
                seen.add(text)
                passages.append(Passage(text, tool, file, listing=True))
    return passages


def rank_passages(
    question: str,
    passages: Sequence[Passage],
    *,
    k: int = 1,
    selector: ToolSelector | None = None,
) -> list[Passage]:
    """The ``k`` passages that match ``question`` best: BM25 picks up to 30 candidates,
    MiniLM ranks them, and the two rankings are fused by reciprocal rank (BM25 alone
    without embeddings). A file the question names is left out of the query (it says
    where to look, not what). A Chinese question over passages most of whose letters are
    not Chinese is ranked through the English glosses of its topic (``lokal.glosses``:
    the words that ask left out), BM25 on word stems: neither ranking compares the two
    languages."""
    from lokal.rag.retrieval import BM25Index, rrf

    if len(passages) <= 1:
        return list(passages)
    texts = [p.text for p in passages]
    # the file the question names says where to look, not what: "Read docs/agent_guide.md
    # and tell me which tools..." matched "This guide shows how to work with the agent..."
    # A Chinese question (its share counted without the file name) over passages most of
    # whose letters are not Chinese is glossed without the words that ask: "读取
    # docs/agent_intro.txt，记忆部分保存哪些内容？" was ranked as written (its file name
    # outweighed its Chinese, and the file holds lines of Chinese), and its 读取 ("read")
    # matched "工具调用让模型能够读取本地文件" instead of the English line on memory
    query = question
    for name in names_a_file(question):
        query = query.replace(name, " ")
    # most of the passages' letters are not Chinese (a number alone, "result: 4", weighs
    # little: the Chinese content beside it is what a Chinese question is asked over)
    crossed = cjk_share(query) > 0.5 and cjk_share(" ".join(texts)) < 0.5
    if crossed:
        query = english_glosses(query, topic=True)
    words = stemmed if crossed else bm25_text  # a gloss's "tool" finds "Tools"
    ranked = [
        i
        for i, _ in BM25Index(list(range(len(texts))), [words(t) for t in texts]).search(
            words(query), k=_MAX_EVIDENCE_CANDIDATES
        )
    ]
    rest = [i for i in range(len(texts)) if i not in ranked]
    pool = ranked + rest[: _MAX_EVIDENCE_CANDIDATES - len(ranked)]
    selector = selector or default_selector()
    vectors = selector.embed_texts([query, *(texts[i] for i in pool)])
    if vectors is None:
        return [passages[i] for i in pool[:k]]
    cosines = vectors[1:] @ vectors[0]
    dense = [pool[i] for i in np.argsort(-cosines, kind="stable")]
    # hybrid, as lokal's RAG retrieval: "Which tools can the agent use?" is closest by
    # MiniLM to "This guide shows how to work with the local agent runtime.", by BM25 to
    # "Tools the agent can use: file_reader, ..."; the fused ranks choose the second
    return [passages[i] for i, _ in rrf([dense, ranked])][:k]


def says_something(text: str) -> bool:
    """Whether a passage can be an answer: a ``key: value`` field, or at least two words
    (four characters of Chinese or Japanese), not a lone heading."""
    return ": " in text or len(text.split()) >= 2 or (len(text.strip()) >= 4 and not text.isascii())


def _field_words(passage: str) -> set[str]:
    """The words of a ``key: value`` passage's key (``files_matched`` → file, matched)."""
    key = passage.split(":", 1)[0] if ":" in passage else ""
    return {w.rstrip("s") for w in re.findall(r"[^\W\d_]+", key.lower())}


# the statistics a table summary names by field (pandas' describe), and how questions ask
_STATISTICS = {
    "mean": re.compile(r"\b(?:average|mean)\b|平均", re.IGNORECASE),
    "50%": re.compile(r"\bmedian\b|中位数", re.IGNORECASE),
    "std": re.compile(r"\bstandard\s+deviation\b|标准差", re.IGNORECASE),
}
_ONE_FIELD = re.compile(r"\s*[^\W\d][\w .-]{0,40}:\s*(?P<value>[^:,;\n]+?)\s*")


def _restates(text: str, question: str) -> bool:
    """Whether ``text`` is one ``key: value`` field whose value only repeats words of the
    question ("columns: price" for a question about the price)."""
    match = _ONE_FIELD.fullmatch(text)
    if match is None:
        return False
    value = set(re.findall(r"[^\W_]+", match.group("value").casefold()))
    said = set(re.findall(r"[^\W_]+", question.casefold()))
    return bool(value) and value <= said


def answerable(question: str, passages: Sequence[Passage]) -> list[Passage]:
    """The passages that can answer ``question``, for the evidence shown and the extracted
    answer alike (each rule gives way when it would leave nothing)."""
    # a title ("Notes") names a document; it answers nothing while a sentence or field can
    passages = [p for p in passages if says_something(p.text)] or list(passages)
    # a list's lead line ("...built from four parts:") says less than the same lead with
    # the heads of its items, which is a passage too ("...four parts: Model, Tools, ...")
    passages = [
        p
        for p in passages
        if not p.text.rstrip().endswith((":", "："))
        or not any(o.text != p.text and o.text.startswith(p.text.rstrip()) for o in passages)
    ] or passages
    # "files_matched: 1" says how the search went; the hit says what it found. Unless the
    # question asks for that count: "how many files matched?"
    asked = {w.rstrip("s") for w in re.findall(r"[^\W\d_]+", question.lower())}
    passages = [
        p
        for p in passages
        if not p.bookkeeping or (asks_how_many(question) and _field_words(p.text) & asked)
    ] or passages
    # "columns: price" for "What is the average price in data/sales.csv?" gives back the
    # question's own word; the record with the mean says something (development task d17)
    passages = [p for p in passages if not _restates(p.text, question)] or passages
    # a statistic the question asks for in words ("the average price") is answered by a
    # passage with that field ("mean: 6.4125") beside another word of the question
    for key, asked_for in _STATISTICS.items():
        if asked_for.search(question):
            said = set(re.findall(r"[^\W_]+", asked_for.sub(" ", question).casefold()))
            passages = [
                p
                for p in passages
                if re.search(rf"(?:^|[\s,;{{]){re.escape(key)}\s*:", p.text)
                and said & set(re.findall(r"[^\W_]+", p.text.casefold()))
            ] or passages
    # "units per region" is answered by every region's total, not by one of them, and
    # "the three rows with the most units" by the three rows; other questions by one
    # record, not the whole list
    listings = [p.text for p in passages if p.listing]
    if asks_for_each(question) or asks_for_several(question):
        passages = [
            p for p in passages if p.listing or not any(p.text in t for t in listings)
        ] or passages
    else:
        passages = [p for p in passages if not p.listing] or passages
    if asks_which_file(question):
        # "Which file mentions Gizmo?" is answered by a passage that names one
        # (a passage of a file that was read names it in its origin)
        passages = [p for p in passages if p.file or names_a_file(p.text)] or passages
    return list(passages)


def evidence(
    messages: Sequence[dict[str, Any]], *, k: int = 1, selector: ToolSelector | None = None
) -> list[str]:
    """The ``k`` passages of the latest tool results that match the last question best
    (``rank_passages`` over ``result_passages``)."""
    passages = result_passages(messages)
    if not passages:
        return []
    question = last_user_text(list(messages))
    passages = answerable(question, passages)
    return [p.text for p in rank_passages(question, passages, k=k, selector=selector)]
