"""The values a question offers, found in its text (for staged decisions).

Plain functions of text, no model: the candidate string values of a question (spans of up
to four words, quoted passages, arithmetic expressions; Chinese and Japanese text spaced
where it meets other scripts), its numbers, the parts of a request that may each need a
call, how many items an array argument may need, and the value shape (path, e-mail, date,
URL) a parameter wants. ``lokal.llm.staged`` scores these candidates with the model;
``lokal.llm.normalize`` adds values in another form than the question writes them.
"""

from __future__ import annotations

import re
from typing import Any

from lokal.llm.select import name_words

__all__ = [
    "FORMATS",
    "FORMAT_WORDS",
    "MAX_LIST_ITEMS",
    "QUOTED",
    "clauses",
    "inferred_format",
    "leaf_strings",
    "list_bound",
    "text_numbers",
    "text_spans",
    "value_kinds",
]

_EDGE = ".,;:!?。，；：！？()[]{}<>\"'“”‘’「」"
QUOTED = re.compile(
    r"'([^'\n]{1,120})'|\"([^\"\n]{1,120})\"|“([^”\n]{1,120})”|「([^」\n]{1,120})」"
)
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.]*\d)")
_MAX_SPAN_WORDS = 4
# an arithmetic expression: numbers (or a function call) joined by operators
_FORMULA = re.compile(
    r"[(\[]*(?:\d+(?:\.\d+)?|[a-z]\w*\()[)\]]*"
    r"(?:\s*(?:\*\*|//|[-+*/^%×÷])\s*[(\[]*(?:\d+(?:\.\d+)?|[a-z]\w*\()[\d.)\]]*)+"
)
# Words a value seldom starts or ends with (in lower case): "in mississippi", "the letter s"
# are not values, "Mississippi", "The Hague" are.
_EDGE_WORDS = frozenset(
    re.findall(
        r"\w+",
        """a an the in on at of to for from by with and or but is are was be do does did what
        which who how when where why me my you your it its this that there please can could
        would will tell show give find get about into than then""",
    )
)


_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
_CJK_PUNCT = re.compile(r"[，。？！、：；（）《》【】]")
_SCRIPT_BOUNDARY = re.compile(rf"(?<=[{_CJK}])(?=[^\s{_CJK}])|(?<=[^\s{_CJK}])(?=[{_CJK}])")


def _spaced(text: str) -> str:
    """Spaces where Chinese or Japanese text meets other text or its own punctuation, so that
    ``notes.txt，告诉我`` gives the words ``notes.txt`` and ``告诉我``."""
    return _SCRIPT_BOUNDARY.sub(" ", _CJK_PUNCT.sub(" ", text))


def _not_an_edge(word: str) -> bool:
    return not word or word in _EDGE_WORDS or not any(c.isalnum() for c in word)


def text_spans(text: str, *, max_words: int = _MAX_SPAN_WORDS) -> list[str]:
    """Candidate string values in ``text``: runs of up to ``max_words`` words (punctuation
    at their edges removed, not starting or ending with a lower-case function word), and
    quoted passages. In order of appearance, without repeats."""
    raw = _spaced(text).split()
    words = [w.strip(_EDGE) for w in raw]
    out: dict[str, None] = {}
    for match in QUOTED.finditer(text):
        out.setdefault(next(g for g in match.groups() if g), None)
    for i in range(len(words)):
        if raw[i] != words[i]:
            # the word with its inner punctuation kept ("r's", "bob@example.com.")
            kept = raw[i].rstrip(".,;:!?。，；：！？").strip("\"'“”‘’「」()[]")
            if kept and kept != words[i]:
                out.setdefault(kept, None)
        if len(words[i]) == 1:
            out.setdefault(words[i], None)  # a letter, a digit, an operator
        if words[i].lower().endswith(("'s", "’s")) and len(words[i]) > 2:
            out.setdefault(words[i][:-2], None)  # "r's" -> "r"
        if _not_an_edge(words[i]):
            continue
        for j in range(i + 1, min(len(words), i + max_words) + 1):
            if _not_an_edge(words[j - 1]):
                continue
            span = " ".join(w for w in words[i:j] if w)
            if span:
                out.setdefault(span, None)
    for match in _FORMULA.finditer(text):
        out.setdefault(match.group(0).strip(), None)
    return list(out)


MAX_LIST_ITEMS = 64  # the most items an array argument may get from a question


def list_bound(question: str, floor: int) -> int:
    """The most items an array argument may need for ``question`` (the schema's own
    ``maxItems`` still applies): its numbers, the items of a bracketed list, or its parts
    separated by commas and "and" — whichever is most — and at least ``floor``. "The average
    of [12, 15, 18, 20, 21, 26, 30]" allows 7, where a constant 4 cut the list."""
    numbers = len(_NUMBER.findall(question.replace(",", " ")))
    bracketed = max(
        (
            len(re.split(r"[,;，；、]", inner))
            for inner in re.findall(r"[\[(（]([^\])）]*)", question)
        ),
        default=0,
    )
    parts = len(re.split(r"[,;，；、]|\band\b|和", question))
    return max(floor, min(MAX_LIST_ITEMS, max(numbers, bracketed, parts)))


def text_numbers(text: str) -> list[int | float]:
    out: list[int | float] = []
    for token in _NUMBER.findall(text.replace(",", "")):
        value = float(token) if "." in token else int(token)
        if value not in out:
            out.append(value)
    return out


def leaf_strings(value: Any, limit: int = 80) -> list[str]:
    if isinstance(value, str):
        return [value] if 0 < len(value) <= limit else []
    if isinstance(value, dict):
        return [s for v in value.values() for s in leaf_strings(v, limit)]
    if isinstance(value, list):
        return [s for v in value[:20] for s in leaf_strings(v, limit)]
    return []


FORMATS = {
    "path": re.compile(r"^[^\s]*(?:/|\\|\w\.[A-Za-z0-9]{1,6}$)[^\s]*$"),
    "email": re.compile(r"^[^@\s]+@[^@\s]+\.\w+$"),
    "date": re.compile(r"^\d{4}-\d{1,2}-\d{1,2}$|^\d{1,2}/\d{1,2}/\d{2,4}$"),
    "uri": re.compile(r"^[a-z][a-z0-9+.-]*://\S+$"),
}
FORMAT_WORDS = (
    ("email", re.compile(r"e-?mail", re.I)),
    ("uri", re.compile(r"\b(?:url|uri|link)s?\b", re.I)),
    ("date", re.compile(r"\bdate\b|yyyy", re.I)),
    ("path", re.compile(r"\b(?:path|file ?name|file|directory|dir|folder)s?\b", re.I)),
)


def inferred_format(name: str, spec: dict[str, Any]) -> str | None:
    """The value shape a string parameter wants: its schema ``format`` when it names one of
    path / email / date / uri, else what its name and description say (``file_path`` and
    "Table file relative to the workspace" ask for a path)."""
    declared = spec.get("format")
    if declared in ("email", "date", "uri"):
        return str(declared)
    text = f"{name_words(name)} {spec.get('description') or ''}"
    for shape, words in FORMAT_WORDS:
        if words.search(name_words(name)):
            return shape
    for shape, words in FORMAT_WORDS:
        if words.search(text):
            return shape
    return None


def value_kinds(spec: dict[str, Any]) -> set[str]:
    kind = spec.get("type")
    if isinstance(kind, list):
        return set(kind)
    return {kind} if isinstance(kind, str) else set()


_CLAUSE_SPLIT = re.compile(
    r"\s*(?:[,;，；。]|\band then\b|\bthen\b|\band also\b|\balso\b|\bafter that\b|"
    r"\bfinally\b|\band\b|然后|最后|并且|再)\s*",
    re.IGNORECASE,
)


def clauses(question: str) -> list[str]:
    """The parts of a request that may each need a call ("read a.txt, then search for b"):
    the question split at commas, semicolons and sequence words (and, then, also, 然后…)."""
    parts = [p.strip(" .?!。？！") for p in _CLAUSE_SPLIT.split(question)]
    return [p for p in parts if any(c.isalnum() for c in p)]
