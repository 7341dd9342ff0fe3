"""Checks of a final answer's text: what users saw go wrong, caught before they read it.

Each check is a small function of the answer and what the answer was written from (the
question, the tool results of the turn, lokal's own prompt texts, the system prompt with its
memory notes). A check either *trims* the answer (a repeated block kept once, lokal's label
removed, an echoed note or a sentence that contradicts the tool results dropped) or asks for
a *retry* with a reason the model is shown. Every finding is recorded, so the decision says
what was changed and why (``Finding.to_dict``).

The quoted outputs of issue 20 are the tests (tests/llm/test_checks.py).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from lokal.llm.select import CJK
from lokal.llm.signals import asks_for_each, asks_for_several, asks_which_file, names_a_file
from lokal.llm.staged.candidates import refers_back

__all__ = [
    "LABELS",
    "AnswerContext",
    "Finding",
    "check_answer",
    "glued_words",
    "note_lines",
    "quoted_from",
    "quotes_any",
    "repeated_blocks",
    "restated",
    "stutter",
    "unfinished",
    "wrong_arithmetic",
]

# the headings of the system message memory writes (lokal.memory.store), read back here
GLOBAL_HEADING = "Global memory (always true for this user):"
NOTES_HEADING = "Notes relevant to this question:"
# labels lokal writes into prompts and answers; none of them may reach a user
LABELS = (
    "Most relevant:",
    "(From the tool results:",
    "From the tool results:",
    GLOBAL_HEADING,
    NOTES_HEADING,
)
_RESULT_LABEL = re.compile(r"^\s*Result of [\w.-]+:\s*|\s*\(source: [^()\n]{1,80}\)", re.MULTILINE)

_SENTENCE_END = ".!?。！？"
_SPLIT = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?(?![\w])")
_DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
# words a finished sentence does not end on
_OPEN_ENDS = set(
    [
        "the",
        "a",
        "an",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "of",
        "to",
        "and",
        "or",
        "but",
        "with",
        "by",
        "for",
        "in",
        "on",
        "at",
        "from",
        "as",
        "than",
        "that",
        "which",
        "who",
        "whose",
        "called",
        "named",
        "into",
        "onto",
        "about",
        "their",
        "its",
        "my",
        "your",
        "our",
        "his",
        "her",
        "this",
        "these",
        "those",
    ]
)
# common short words that glued text is made of, beside the words of the context
_COMMON = set(
    [
        "the",
        "a",
        "an",
        "is",
        "are",
        "was",
        "were",
        "be",
        "of",
        "to",
        "and",
        "or",
        "in",
        "on",
        "at",
        "for",
        "with",
        "by",
        "it",
        "this",
        "that",
        "as",
        "from",
        "has",
        "have",
        "had",
        "not",
        "no",
        "yes",
        "most",
        "more",
        "data",
        "file",
        "files",
        "result",
        "results",
        "answer",
        "relevant",
        "tool",
        "user",
        "name",
        "value",
        "total",
        "number",
        "per",
    ]
)
_MIN_UNGROUNDED_WORDS = 3  # an answer this long (its own words) must use a word of the results
_STOP = _OPEN_ENDS | {"i", "you", "it", "we", "they", "do", "does", "did", "what", "how", "why"}


@dataclass(frozen=True)
class Finding:
    """One check's verdict: ``trimmed`` (the answer was changed, ``detail`` says how) or
    ``retry`` (the answer cannot be used; ``detail`` is the reason shown to the model)."""

    check: str
    action: Literal["trimmed", "retry"]
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"check": self.check, "action": self.action, "detail": self.detail}


@dataclass(frozen=True)
class AnswerContext:
    """What an answer was written from: the ``question``, the texts of the turn's tool
    results (``sources``), the system prompt (``system``: profile lines and memory
    notes, which the answer may use but should not recite), and the tools the turn ran
    (``called``)."""

    question: str = ""
    sources: Sequence[str] = ()
    system: str = ""
    extra_words: frozenset[str] = field(default_factory=frozenset)
    called: frozenset[str] = field(default_factory=frozenset)


def _pieces(text: str) -> list[str]:
    """``text`` as sentences and line breaks, in order; joining them gives ``text`` back
    (up to spaces between sentences). A sentence ends at ``.!?`` before a space or the
    line's end ("3.14" stays whole) or at a CJK full stop."""
    pieces: list[str] = []
    for n, line in enumerate(text.split("\n")):
        if n:
            pieces.append("\n")
        pieces += [p for p in _SPLIT.split(line) if p.strip()]
    return pieces


def _norm(piece: str) -> str:
    return " ".join(_WORD.findall(piece.casefold()))


def _join(pieces: list[str]) -> str:
    out = ""
    for piece in pieces:
        if piece == "\n":
            out = out.rstrip(" ") + "\n"
        else:
            stripped = piece.strip()
            if not stripped:
                continue
            out += ("" if not out or out.endswith("\n") else " ") + stripped
    return re.sub(r"\n{3,}", "\n\n", out).strip()


def strip_labels(text: str, ctx: AnswerContext) -> tuple[str, Finding | None]:
    """lokal's own labels (``Most relevant:``, ``Result of tool:``) removed."""
    cleaned = _RESULT_LABEL.sub("", text)
    for label in LABELS:
        cleaned = cleaned.replace(label, "")
    cleaned = re.sub(r"[ \t]{2,}", " ", cleaned).strip()
    if cleaned == text.strip():
        return text, None
    return cleaned, Finding("labels", "trimmed", "lokal's own labels removed from the answer")


def repeated_blocks(text: str, *, min_chars: int = 16) -> tuple[str, list[str]]:
    """``text`` with every sentence or line of ``min_chars``+ characters kept once (the
    first time), and the blocks that were repeated."""
    seen: set[str] = set()
    kept: list[str] = []
    repeated: list[str] = []
    for piece in _pieces(text):
        key = _norm(piece)
        if len(piece.strip()) >= min_chars and key:
            if key in seen:
                if piece.strip() not in repeated:
                    repeated.append(piece.strip())
                continue
            seen.add(key)
        kept.append(piece)
    return (_join(kept) if repeated else text), repeated


def _check_said_over(text: str, ctx: AnswerContext) -> tuple[str, Finding | None]:
    """A short sentence that is the whole answer, said three times or more ("4. 4. 4. 4.",
    what was left of an answer once its Chinese sentences were dropped): too short to be
    kept once as a block, and no answer. Run last, on what the trims left."""
    said = [_norm(p) for p in _pieces(text) if p != "\n"]
    if len(said) >= 3 and len(set(said)) == 1 and said[0]:
        return text, Finding(
            "repeated_block", "retry", f"the answer says {said[0][:40]!r} over and over"
        )
    return text, None


def _check_repeats(text: str, ctx: AnswerContext) -> tuple[str, Finding | None]:
    kept, repeated = repeated_blocks(text)
    if not repeated:
        return text, None
    shown = repeated[0][:60]
    return kept, Finding(
        "repeated_block", "trimmed", f"{len(repeated)} repeated block(s) kept once: {shown!r}"
    )


def counting(text: str, *, times: int = 3) -> str | None:
    """A sentence or clause said ``times``+ times with only its numbers changed ("The
    answer is 18. The answer is 19. The answer is 20."; "2 days are 2 weeks, 3 days are 3
    weeks, 4 days are 4 weeks"): the model counting on instead of answering. The shape
    (numbers as ``#``), or None."""
    shapes: dict[str, set[str]] = {}
    # a sentence's clauses too: "1 day is 7 days in a week, 2 days are 2 weeks, 3 days are
    # 3 weeks, ..." counted on inside one sentence until the token limit
    clauses = [c for p in _pieces(text) for c in re.split(r"[,;，；]\s*(?!\d)", p)]
    for piece in clauses:
        numbers = _NUMBER.findall(piece)
        if not numbers:
            continue
        shape = _NUMBER.sub("#", _norm_numbers(piece))
        if len([w for w in shape.split() if w != "#"]) < 2:
            continue  # a list's "1." "2." "3.", or a bare number: no sentence
        shapes.setdefault(shape, set()).add(" ".join(numbers))
    return next((shape for shape, seen in shapes.items() if len(seen) >= times), None)


def _norm_numbers(piece: str) -> str:
    return " ".join(re.findall(r"[^\W_]+|\d[\d,.]*", piece.casefold())).strip(" .")


def _check_counting(text: str, ctx: AnswerContext) -> tuple[str, Finding | None]:
    shape = counting(text)
    if shape is None:
        return text, None
    return text, Finding(
        "counting",
        "retry",
        f"the answer says {shape[:50]!r} again and again with other numbers; answer once",
    )


def _content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.casefold()) if w not in _STOP and len(w) > 2}


def restated(text: str, *, min_words: int = 2) -> tuple[str, list[str]]:
    """``text`` without the sentences that say again, in other words, what one earlier
    sentence said: every content word (``min_words``+ of them) and every number or named day
    is already in that sentence ("The review is on Friday." after "The quarterly review is
    on Friday at 10:00."). Returns the text and the sentences dropped."""
    earlier: list[tuple[set[str], set[str]]] = []
    kept: list[str] = []
    dropped: list[str] = []
    for piece in _pieces(text):
        words = _content_words(piece)
        numbers = set(_NUMBER.findall(piece))
        if len(words) >= min_words and any(
            words <= seen_words and numbers <= seen_numbers for seen_words, seen_numbers in earlier
        ):
            dropped.append(piece.strip())
            continue
        if (
            numbers
            and len(words) <= 1
            and any(numbers <= seen_numbers for _, seen_numbers in earlier)
        ):
            # a number said again with one word around it: "The result of the calculator is
            # 84. The answer is 84. The calculator is 84." (development task m04)
            dropped.append(piece.strip())
            continue
        if words:
            earlier.append((words, numbers))
        kept.append(piece)
    return (_join(kept) if dropped else text), dropped


def _check_restated(text: str, ctx: AnswerContext) -> tuple[str, Finding | None]:
    kept, dropped = restated(text)
    if not dropped:
        return text, None
    return kept, Finding(
        "restated",
        "trimmed",
        f"{len(dropped)} sentence(s) saying again what an earlier one said: {dropped[0][:60]!r}",
    )


def _paraphrases(words: set[str], lines: list[set[str]]) -> bool:
    """Whether a sentence of four or more content words takes 70 % of them from one line
    ("The weather in Beijing, Shanghai, Shenzhen, London, and New York, from offline data
    shipped with the weather_forecast skill, is currently 20." from a skill's description)."""
    if len(words) < 4:
        return False
    return any(len(words & line) >= 0.7 * len(words) for line in lines)


def _check_echo(text: str, ctx: AnswerContext) -> tuple[str, Finding | None]:
    """Sentences that recite a line of the system prompt (a memory note, a profile line, a
    skill's description), word for word or in other words, although the question is not
    about it are dropped."""
    if not ctx.system.strip():
        return text, None
    pieces = [p for p in _pieces(ctx.system) if len(_WORD.findall(p)) >= 3]
    lines = {_norm(p) for p in pieces}
    lines.discard("")
    # the lines' content words, for a recital in other words
    line_words = [w for w in map(_content_words, pieces) if len(w) >= 4]
    asked = _content_words(ctx.question)
    kept: list[str] = []
    dropped: list[str] = []
    for piece in _pieces(text):
        key = _norm(piece)
        words = _content_words(piece)
        if key and not (words & asked) and (key in lines or _paraphrases(words, line_words)):
            dropped.append(piece.strip())
            continue
        kept.append(piece)
    if not dropped:
        return text, None
    return _join(kept), Finding(
        "echoed_context", "trimmed", f"recited the system prompt or a note: {dropped[0][:60]!r}"
    )


def _values(text: str) -> tuple[set[str], set[str]]:
    """The numbers (commas dropped, ``12.0`` as ``12``) and named days and months of ``text``."""
    numbers = set()
    text = re.sub(r"\[\d{1,3}\]", " ", text)  # citation markers are not values
    for match in _NUMBER.finditer(text):
        raw = match.group(0).replace(",", "").lstrip("+")
        try:
            value = float(raw)
        except ValueError:
            continue
        numbers.add(f"{value:g}" if abs(value) < 1e15 else raw)
    words = set(_WORD.findall(text.casefold()))
    named = {w for w in words if w in _DAYS or w in _MONTHS}
    return numbers, named


_EQUATION = re.compile(
    r"(?<![\w.])((?:\d[\d,]*(?:\.\d+)?(?:\s*[-+*/×÷]|\s+x)\s*)+\d[\d,]*(?:\.\d+)?)\s*=\s*"
    r"(-?\d[\d,]*(?:\.\d+)?)(?![\d.]*\d)"
)


def wrong_arithmetic(text: str) -> tuple[str, float, str] | None:
    """The first sum the answer writes out that is false ("35 * 8 = 270"): the left side,
    its value and the value written; None when every one holds (within the written
    value's decimals) or there is none. Evaluated by simpleeval, numbers and ``+ - * /``
    only."""
    import simpleeval

    for match in _EQUATION.finditer(text):
        left, claimed = match.group(1), match.group(2)
        expression = re.sub(r"(?<=\d),(?=\d{3})", "", left)
        expression = re.sub(r"\s*[x×]\s*", " * ", expression).replace("÷", "/")
        try:
            value = float(simpleeval.simple_eval(expression))
            written = float(claimed.replace(",", ""))
        except Exception:  # a division by zero, an expression simpleeval refuses
            continue
        decimals = len(claimed.split(".", 1)[1]) if "." in claimed else 0
        if abs(value - written) > max(0.5 * 10**-decimals, 1e-9 * abs(value)):
            return left.strip(), value, claimed
    return None


def _check_arithmetic(text: str, ctx: AnswerContext) -> tuple[str, Finding | None]:
    """An answer whose own arithmetic is false ("A crate holds 35 bottles. 8 crates can
    hold 35 * 8 = 270 bottles.") is asked for again."""
    wrong = wrong_arithmetic(text)
    if wrong is None:
        return text, None
    left, value, claimed = wrong
    shown = f"{value:g}" if abs(value) < 1e15 else str(value)
    return text, Finding(
        "wrong_arithmetic",
        "retry",
        f"the answer says {left} = {claimed}, but {left} is {shown}; compute it again",
    )


def _unescaped(source: str) -> str:
    """A JSON result with its ``\\u`` escapes (``\\u7cfb``) written out as the characters
    they stand for (a result serialised with ``ensure_ascii``), or the text as it is."""
    if "\\u" not in source:
        return source
    try:
        return json.dumps(json.loads(source), ensure_ascii=False)
    except (ValueError, RecursionError):
        return source


def _foreign(piece: str, sources: Sequence[str]) -> bool:
    """Whether a sentence is Chinese or Japanese the tool results do not hold: mostly in
    them with a run of their characters the results lack ("工元" for 工具), or with such a
    run of four or more inside English (a name such as 北京 is two; a quote of a Chinese line
    of the file is the file's)."""
    letters = [c for c in piece if c.isalpha()]
    missing = [
        run
        for run in re.findall(f"[{CJK}]+", piece)
        if not any(run in source for source in sources)
    ]
    if not letters or not missing:
        return False
    mostly = 2 * sum(1 for c in letters if re.match(f"[{CJK}]", c)) > len(letters)
    return mostly or any(len(run) >= 4 for run in missing)


def _check_language(text: str, ctx: AnswerContext) -> tuple[str, Finding | None]:
    """An answer to a question without Chinese or Japanese that has sentences in them
    ("In docs/agent_intro.txt, what does the Loop part repeat?" answered with the file's
    Chinese line rewritten into nonsense, or `make run`'s "工元被模板创建为一个系统，...,
    can be used to implement any function ...") is asked for again, in the question's
    language: what the model wrote around such a sentence was no better, so nothing is
    trimmed. A Chinese question may be answered from English results, so the other way
    round is not checked."""
    if not ctx.question or re.search(f"[{CJK}]", ctx.question):
        return text, None
    sources = [*ctx.sources, *(_unescaped(source) for source in ctx.sources)]
    if not any(_foreign(p, sources) for p in _pieces(text)):
        return text, None
    return text, Finding(
        "wrong_language", "retry", "the question is not in Chinese; answer in its language"
    )


def _check_contradiction(text: str, ctx: AnswerContext) -> tuple[str, Finding | None]:
    """A sentence stating a number, day or month that differs from every one in the tool
    results (and the question) contradicts them: it is dropped when the rest of the answer
    stands, and the answer is retried when nothing else is left."""
    if not ctx.sources:
        return text, None
    source_numbers, source_named = _values("\n".join(ctx.sources))
    question_numbers, question_named = _values(ctx.question)
    known_numbers = source_numbers | question_numbers
    known_named = source_named | question_named
    kept: list[str] = []
    wrong: list[tuple[str, str]] = []
    for piece in _pieces(text):
        numbers, named = _values(piece)
        if re.fullmatch(r"\s*\d{1,2}[.)]\s*", piece):  # a list marker, not a value
            kept.append(piece)
            continue
        bad_numbers = sorted(numbers - known_numbers) if source_numbers else []
        # a day stated where the results name another day (months likewise)
        bad_named = sorted(
            w
            for w in named - known_named
            if (w in _DAYS and source_named & set(_DAYS))
            or (w in _MONTHS and source_named & set(_MONTHS))
        )
        bad = bad_numbers + bad_named
        if bad:
            wrong.append((piece.strip(), ", ".join(bad)))
            continue
        kept.append(piece)
    if not wrong:
        return text, None
    sentence, values = wrong[0]
    return _trim_or_retry(
        text,
        kept,
        "contradiction",
        f"dropped a sentence whose {values} is not in the tool results: {sentence[:60]!r}",
        f"the answer says {values}, which the tool results do not say; "
        "answer with the values the results give",
    )


def _trim_or_retry(
    text: str, kept: list[str], check: str, trimmed: str, retry: str
) -> tuple[str, Finding]:
    """The answer without the dropped pieces (``kept`` joined) when words are left, else
    the answer as it was with a ``retry``."""
    rest = _join(kept)
    if _WORD.search(rest):
        return rest, Finding(check, "trimmed", trimmed)
    return text, Finding(check, "retry", retry)


def _check_result_left_out(text: str, ctx: AnswerContext) -> tuple[str, Finding | None]:
    """An answer that adds nothing to the question (its numbers and words all come from it)
    when the tool results computed a value the question does not hold leaves the result
    out: "Work out 2.5 * 40" answered "2.5", "17 * 23 + 4" after ``result: 395``. Asked for
    again. Only for short results (at most three new numbers: a computation, a count), not
    for a document that holds many; "Argentina won the 2022 cup" adds a name, and passes."""
    if not ctx.sources:
        return text, None
    numbers, _ = _values(text)
    question_numbers, _ = _values(ctx.question)
    computed = _values("\n".join(ctx.sources))[0] - question_numbers
    if not numbers or not computed or len(computed) > 3 or not numbers <= question_numbers:
        return text, None
    if {w for w in _content_words(text) - _content_words(ctx.question) if not w.isdigit()}:
        return text, None
    shown = ", ".join(sorted(computed))
    return text, Finding(
        "result_left_out",
        "retry",
        f"the answer repeats the question's numbers but not the result ({shown}); "
        "answer with the value the tool returned",
    )


def _computed(sources: Sequence[str]) -> str | None:
    """The value of the turn's last computation: a small JSON result with a numeric
    ``result`` (the calculator's ``{"expression": "7 + 20", "result": 27}``), as
    ``_values`` writes numbers; None when no result is one."""
    value = None
    for source in sources:
        with contextlib.suppress(ValueError, RecursionError):  # (a result nested too deep)
            record = json.loads(source)
            if not isinstance(record, dict):
                continue
            result = record.get("result")
            if (
                len(record) <= 4
                and isinstance(result, int | float)
                and not isinstance(result, bool)
            ):
                value = f"{float(result):g}"
    return value


def _check_computation_left_out(text: str, ctx: AnswerContext) -> tuple[str, Finding | None]:
    """An answer that does not state the value the turn's last computation returned, when
    the question asks to compute with a value it had to find first (``refers_back``): "Look
    at notes.txt for the number of rows, then add 7 to that number" computed ``7 + 20 = 27``
    and was answered with the notes file. Asked for again (an extracted answer then quotes
    the result). A request with other parts ("compute 2 + 2 and summarise three points")
    may be answered by its summary."""
    value = _computed(ctx.sources)
    if value is None or not refers_back(ctx.question):
        return text, None
    if value in _values(text)[0]:
        return text, None
    return text, Finding(
        "computation_left_out",
        "retry",
        f"the answer leaves out the computed result ({value}); answer with it",
    )


# a key that names a field (``truncated``, ``files_matched``), not a label the result reports
_FIELD_NAME = re.compile(r"[a-z_][a-z0-9_]*")


def _found_words(source: str) -> set[str]:
    """The words and numbers of what a tool result says: the values of a JSON result and
    the keys that are labels (``East``), not field names (``truncated``, ``line``); or the
    whole of a plain text one."""
    try:
        stack: list[Any] = [json.loads(source)]
    except (ValueError, RecursionError):
        stack = [source]
    texts: list[str] = []
    while stack:  # a loop, not recursion: a client may send JSON nested thousands deep
        node = stack.pop()
        if isinstance(node, dict):
            texts += [str(k) for k in node if not _FIELD_NAME.fullmatch(str(k))]  # {"East": 52}
            stack += node.values()
        elif isinstance(node, list):
            stack += node
        elif node is not None and not isinstance(node, bool):
            texts.append(str(node))
    return {w.rstrip("s") for t in texts for w in _WORD.findall(t.casefold())}


def _check_ungrounded(text: str, ctx: AnswerContext) -> tuple[str, Finding | None]:
    """An answer of several words that uses nothing the tool results say, beyond the
    question's own words: "Search the workspace for the word Gizmo" answered "It's truncated
    to just one line of text with no additional information left out." (the search's
    ``truncated: false`` told in words). Asked for again. Not for an answer in Chinese or
    Japanese (the results may be in English)."""
    if not ctx.sources or re.search(f"[{CJK}]", text):
        return text, None
    own = {w.rstrip("s") for w in _content_words(text) - _content_words(ctx.question)}
    if len(own) < _MIN_UNGROUNDED_WORDS:
        return text, None
    found = set().union(*(_found_words(source) for source in ctx.sources))
    if own & found:
        return text, None
    # a number the results hold ("6 * 7 is 42" after 42.0), however short
    numbers = _values(text)[0] - _values(ctx.question)[0]
    if numbers & set().union(*(_values(source)[0] for source in ctx.sources)):
        return text, None
    return text, Finding(
        "ungrounded",
        "retry",
        "the answer says nothing the tool results say; answer from the results",
    )


# a suggestion to the user, not a report of what ran: "You can use ...", "Please run ...",
# a sentence that opens with "Use" or "Try"; not "Using table_analyzer, I found ..."
_SENDS = (
    r"(?:\byou\s+(?:can|could|should|may|might|need\s+to|have\s+to|will\s+need\s+to)"
    r"\s+(?:also\s+)?|\bplease\s+|(?:^|(?<=[.!?:])\s*))(?:use|run|call|try)\b"
)


def _check_defers(text: str, ctx: AnswerContext) -> tuple[str, Finding | None]:
    """An answer that tells the user to use a tool the turn has run: "分析一下
    data/sales.csv 这个表格。" was answered "The data is available in CSV format. You can
    use the table_analyzer tool to extract the desired information." after table_analyzer
    had returned the summary. Asked for again, from the result."""
    for name in sorted(ctx.called):
        if re.search(rf"{_SENDS}[^.!?\n]{{0,30}}{re.escape(name)}", text, re.IGNORECASE):
            return text, Finding(
                "defers_to_tool",
                "retry",
                f"the answer tells the user to use {name}, which has run; answer from its result",
            )
    return text, None


# an answer that is a date or a clock time and nothing else: "2022-01-01 23:59:56.98388",
# "2023-01-01T00:00:00Z", "12/31/2023", "14:30"
_ONLY_A_TIME = re.compile(
    r"^\s*(?:\d{4}-\d{1,2}-\d{1,2}"
    r"(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
    r"|\d{1,2}/\d{1,2}/\d{2,4}|\d{1,2}:\d{2}(?::\d{2})?)\s*[.。]?\s*$"
)
# a question that asks for a date or a time: "when", "what day", "the date", "what time",
# "today", "now", "this year"; "How many days are in a week?" asks for a count
_ASKS_A_TIME = re.compile(
    r"\b(?:when|dates?|times?|today|tonight|tomorrow|yesterday|now|clock|o'clock|timestamp"
    r"|(?:what|which|this|current|that)\s+(?:day|week|month|year|hour)|deadline|since|until)\b"
    r"|几点|日期|时间|哪天|哪一天|哪年|哪一年|今天|明天|昨天|现在|几号|星期几|今年|何时|什么时候",
    re.IGNORECASE,
)


def _check_time_for_no_time(text: str, ctx: AnswerContext) -> tuple[str, Finding | None]:
    """An answer that is only a date or a time, to a question that asks for neither: "How
    many days are in a week?" answered "2022-01-01 23:59:56.98388" (the model's own words,
    no tool). Asked for again."""
    if not ctx.question or not _ONLY_A_TIME.match(text) or _ASKS_A_TIME.search(ctx.question):
        return text, None
    return text, Finding(
        "time_for_no_time",
        "retry",
        "the answer is only a date or a time, and the question asks for neither; "
        "answer the question",
    )


def _record_lists(source: str) -> list[list[dict[str, Any]]]:
    """The lists of 2 to 12 records (JSON objects) in a JSON tool result, in the order the
    result has them: a table's rows, a group-by's groups."""
    try:
        value = json.loads(source)
    except (ValueError, RecursionError):
        return []
    found: list[list[dict[str, Any]]] = []
    stack = [value]
    while stack:  # no recursion: a result nested too deep is walked all the same
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(reversed(list(node.values())))
        elif isinstance(node, list):
            if 1 < len(node) <= 12 and all(isinstance(item, dict) for item in node):
                found.append(node)
            stack.extend(reversed(node))
    return found


def _group_labels(source: str) -> list[list[str]]:
    """The labels of each list of records in a JSON tool result whose records are told
    apart by their first text field (the regions of a group-by): ``[["East", "North"...]]``."""
    found: list[list[str]] = []
    for records in _record_lists(source):
        labels = [next((v for v in r.values() if isinstance(v, str)), None) for r in records]
        if None not in labels and len(set(labels)) == len(labels):
            found.append([str(label) for label in labels])
    return found


def _mentioned_records(text: str, records: list[dict[str, Any]]) -> int:
    """How many of ``records`` the answer names: by a value no other record has (the
    "Gizmo" or the 21 units of one row)."""
    numbers, _ = _values(text)
    folded = text.casefold()

    def key(value: Any) -> str:
        return f"{value:g}" if isinstance(value, (int, float)) else str(value).casefold()

    counts: dict[str, int] = {}
    for record in records:
        for value in {key(v) for v in record.values() if isinstance(v, (str, int, float))}:
            counts[value] = counts.get(value, 0) + 1
    named = 0
    for record in records:
        own = [
            v
            for v in record.values()
            if isinstance(v, (str, int, float)) and not isinstance(v, bool) and counts[key(v)] == 1
        ]
        if any(key(v) in numbers if isinstance(v, (int, float)) else key(v) in folded for v in own):
            named += 1
    return named


def _check_part_of_each(text: str, ctx: AnswerContext) -> tuple[str, Finding | None]:
    """A question about each group ("units per region") answered with fewer than half of
    the groups the tool returned ("South sold 70") is asked for again, with every group;
    so is a question for a number of rows ("the three rows with the most units") answered
    with fewer of the rows the tool returned."""
    several = asks_for_several(ctx.question) if ctx.sources else 0
    if several:
        for source in ctx.sources:
            for records in _record_lists(source):
                wanted = min(several, len(records))
                if _mentioned_records(text, records) < wanted:
                    return text, Finding(
                        "part_of_each",
                        "retry",
                        f"the question asks for {several}; give each of the {wanted} "
                        "the tool results hold",
                    )
    if not ctx.sources or not asks_for_each(ctx.question):
        return text, None
    folded = text.casefold()
    for source in ctx.sources:
        for labels in _group_labels(source):
            named = [label for label in labels if label.casefold() in folded]
            if len(named) * 2 < len(labels):
                return text, Finding(
                    "part_of_each",
                    "retry",
                    "the question asks about each one; give all of them: " + ", ".join(labels),
                )
    return text, None


_PATH_FIELD = re.compile(r'"(?:path|file|filename|file_path)":\s*"([^"]+)"')


def _check_file_unnamed(text: str, ctx: AnswerContext) -> tuple[str, Finding | None]:
    """A question that asks which file holds something, answered without naming a file
    while the tool results name some ("Which file mentions the team outing?" answered with
    the outing's line and not the file), is asked for again."""
    if not ctx.sources or not asks_which_file(ctx.question):
        return text, None
    # the files the results are about (a hit's or a read's ``path``), not those their
    # contents mention in passing
    files = {f for source in ctx.sources for f in _PATH_FIELD.findall(source)}
    if not files:
        files = {f for source in ctx.sources for f in names_a_file(source)}
    named = names_a_file(text)
    if not files or any(f in n or n in f for f in files for n in named):
        return text, None
    return text, Finding(
        "file_unnamed",
        "retry",
        "the question asks which file; name the file the tool results give",
    )


def _check_question_echo(text: str, ctx: AnswerContext) -> tuple[str, Finding | None]:
    """Sentences that repeat the question are dropped ("中国的首都是哪里？" answered with
    itself); an answer that is nothing else is asked for again."""
    asked = _norm(ctx.question)
    # a greeting answered in kind ("Bye!" "Bye.") is not an echo: three words, or six
    # characters of Chinese or Japanese, before a repeat counts
    if not asked or (len(asked.split()) < 3 and (asked.isascii() or len(asked) < 6)):
        return text, None
    kept = [p for p in _pieces(text) if _norm(p) != asked]
    if len(kept) == len(_pieces(text)):
        return text, None
    return _trim_or_retry(
        text,
        kept,
        "question_echo",
        "dropped the question said back",
        "the answer repeats the question; answer it instead",
    )


def stutter(text: str, *, min_words: int = 3) -> str | None:
    """A phrase of ``min_words``+ words said twice within one sentence ("the most relevant
    data is the most relevant data"), or None."""
    for piece in _pieces(text):
        words = _WORD.findall(piece.casefold())
        n = len(words)
        for size in range(min(8, n // 2), min_words - 1, -1):
            seen: dict[tuple[str, ...], int] = {}
            for i in range(n - size + 1):
                gram = tuple(words[i : i + size])
                if all(w in _STOP for w in gram):
                    continue
                if gram in seen and i - seen[gram] >= size:
                    return " ".join(gram)
                seen.setdefault(gram, i)
    return None


def _segments(word: str, vocabulary: set[str]) -> int | None:
    """The fewest vocabulary words ``word`` splits into (None if it does not split)."""
    n = len(word)
    best: list[int | None] = [0] + [None] * n
    for end in range(1, n + 1):
        for start in range(max(0, end - 20), end):
            prev = best[start]
            current = best[end]
            if (
                prev is not None
                and word[start:end] in vocabulary
                and (current is None or prev + 1 < current)
            ):
                best[end] = prev + 1
    return best[n]


def glued_words(text: str, context_words: set[str] | None = None) -> str | None:
    """A run of letters that is three or more words written without spaces
    ("themostrelevantdata"), a run of six or more dot-joined pieces ("Ada.JR.1985.1.1.0"),
    or numbers run together ("144.000000000000000144.000"), or None. Words come from the
    answer's own context and a short list of common ones."""
    vocabulary = set(_COMMON) | set(context_words or ())
    vocabulary.update(_WORD.findall(text.casefold()))
    vocabulary = {w for w in vocabulary if len(w) >= 2}
    for token in re.findall(r"[A-Za-z]{12,}", text):
        lower = token.casefold()
        parts = _segments(lower, vocabulary - {lower})
        if parts is not None and parts >= 3:
            return token
    for token in re.findall(r"\S+", text):
        pieces = [p for p in token.strip(".,;:!?").split(".") if p]
        if len(pieces) >= 6 and not token.startswith(("http", "www")):
            return token
    # numbers run together: "144.000000000000000144.000000000000000144.000" (an address
    # or a version is shorter)
    for token in re.findall(r"\d[\d.]{15,}", text):
        if token.rstrip(".").count(".") >= 2:
            return token
    return None


def unfinished(text: str) -> bool:
    """Whether the answer stops mid-sentence: its last word is one a sentence does not end
    on ("The staging server is called"), or it ends in a comma or colon."""
    stripped = text.rstrip()
    if not stripped or stripped[-1] in _SENTENCE_END or stripped[-1] in ")]}\"'`*":
        return False
    if stripped[-1] in ",:;":
        return True
    last = _WORD.findall(stripped.casefold()[-40:])
    return bool(last) and last[-1] in _OPEN_ENDS and len(_WORD.findall(stripped)) > 2


def _check_stutter(text: str, ctx: AnswerContext) -> tuple[str, Finding | None]:
    phrase = stutter(text)
    if phrase is None:
        return text, None
    return text, Finding(
        "stutter", "retry", f"the answer says {phrase!r} twice in one sentence; say it once"
    )


# a number glued to the next one's digits, or run on: "15 + 27 = 42.0000000000000015 + 27 =
# 42." (development task m11), "23:59:56.9888888888888899" (d22): a digit eight times or
# more after the point, then another digit
_GLUED_NUMBER = re.compile(r"\d+\.\d*?(\d)\1{7,}(?!\1)\d+")


def _check_glued(text: str, ctx: AnswerContext) -> tuple[str, Finding | None]:
    for token in (m.group(0) for m in _GLUED_NUMBER.finditer(text)):
        if not any(token in source for source in [ctx.question, *ctx.sources]):
            # a result that is such a float itself (0.30000000000000004) is the context's
            return text, Finding(
                "glued_words",
                "retry",
                f"{token!r} runs a number into the digits of the next; write each number once",
            )
    context_words = set(_WORD.findall(" ".join([ctx.question, *ctx.sources]).casefold()))
    token = glued_words(text, context_words | set(ctx.extra_words))
    if token is None:
        return text, None
    return text, Finding(
        "glued_words", "retry", f"{token[:40]!r} is words run together; write them with spaces"
    )


def _check_unfinished(text: str, ctx: AnswerContext) -> tuple[str, Finding | None]:
    if not unfinished(text):
        return text, None
    return text, Finding(
        "unfinished", "retry", "the answer stops mid-sentence; write the whole sentence"
    )


def note_lines(system: str) -> list[str]:
    """The memory notes listed in a system prompt (the lines under ``NOTES_HEADING``),
    without their ``(source: ...)`` tags."""
    notes: list[str] = []
    inside = False
    for line in system.splitlines():
        if line.strip() == NOTES_HEADING:
            inside = True
            continue
        if inside and line.startswith("- "):
            notes.append(re.sub(r"\s*\(source: [^()]*\)\s*$", "", line[2:]).strip())
        elif inside and line.strip():
            inside = False
    return [n for n in notes if n]


_JSON_ESCAPE = re.compile(r"\\[nrt]")


def quoted_from(text: str, sources: Sequence[str]) -> bool:
    """Whether ``text`` copies the ``sources``: every sentence of three or more words in it
    is a passage of theirs (words compared, case and punctuation aside), and there is one."""
    # a result is JSON text: "\\n" between two lines must not glue "nThis" together
    folded = " " + " ".join(_norm(_JSON_ESCAPE.sub(" ", source)) for source in sources) + " "
    whole = _norm(text)
    if whole and len(whole.split()) < 3:  # a short answer: a value copied whole ("country: China")
        return f" {whole} " in folded and bool(re.search(r"\w+\s*[:=]", text))
    sentences = [_norm(p) for p in _pieces(text) if len(_WORD.findall(p)) >= 3]
    return bool(sentences) and all(f" {s} " in folded for s in sentences)


def quotes_any(text: str, passages: Sequence[str]) -> bool:
    """Whether ``text`` holds one of ``passages`` or a sentence of it is part of one (words
    compared, case and punctuation aside)."""
    whole = " " + _norm(text) + " "
    sentences = [_norm(p) for p in _pieces(text) if _WORD.search(p)]
    for passage in passages:
        folded = " " + _norm(passage) + " "
        if folded.strip() and folded in whole:
            return True
        if any(f" {s} " in folded for s in sentences if s):
            return True
    return False


Check = Callable[[str, AnswerContext], tuple[str, Finding | None]]

# in order: what can be trimmed first, then what needs another reply
CHECKS: tuple[tuple[str, Check], ...] = (
    ("labels", strip_labels),
    ("repeated_block", _check_repeats),
    ("restated", _check_restated),
    ("counting", _check_counting),
    ("echoed_context", _check_echo),
    ("question_echo", _check_question_echo),
    ("wrong_language", _check_language),
    ("contradiction", _check_contradiction),
    ("wrong_arithmetic", _check_arithmetic),
    ("result_left_out", _check_result_left_out),
    ("computation_left_out", _check_computation_left_out),
    ("file_unnamed", _check_file_unnamed),
    ("part_of_each", _check_part_of_each),
    ("ungrounded", _check_ungrounded),
    ("defers_to_tool", _check_defers),
    ("stutter", _check_stutter),
    ("glued_words", _check_glued),
    ("time_for_no_time", _check_time_for_no_time),
    ("unfinished", _check_unfinished),
    ("said_over", _check_said_over),
)


def check_answer(text: str, ctx: AnswerContext) -> tuple[str, list[Finding]]:
    """The answer after every trimming check, and every finding in order. A ``retry``
    finding ends the checks (the answer cannot be used as it is); an answer that trimming
    empties is a ``retry`` too."""
    findings: list[Finding] = []
    for name, check in CHECKS:
        text, finding = check(text, ctx)
        if finding is None:
            continue
        findings.append(finding)
        if finding.action == "retry":
            break
        if not _WORD.search(text):
            findings.append(Finding(name, "retry", "nothing is left of the answer once trimmed"))
            break
    return text, findings
