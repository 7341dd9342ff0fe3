"""The values a question offers, found in its text: the candidates of staged decisions.

Plain functions of text, no model. ``lokal.llm.staged.engine`` scores these candidates with
the model's likelihood under each parameter.

**Spans and shapes**: the candidate string values of a question (spans of up to four words,
quoted passages, arithmetic expressions; Chinese and Japanese text spaced where it meets
other scripts), its numbers, the parts of a request that may each need a call, how many
items an array argument may need, and the value shape (path, e-mail, date, URL) a parameter
wants.

**Light normalisations**: values a parameter may want in another form than the question
writes them, each a plain function returning the values it finds, in order of appearance,
each once, offered beside the values copied verbatim:

- ``number_words``: "top three" → 3, "twenty-five" → 25, "a dozen" → 12;
- ``percentages``: "5%" → 5 and 0.05 (a rate is often asked as a fraction);
- ``iso_dates``: "March 10th, 2023", "10 March 2023", "2023/03/10" → "2023-03-10";
- ``relative_dates``: "tomorrow", "the upcoming Saturday", "in 3 days" from the date the
  question says today is ("today is Tuesday April 25th 2023") → "2023-04-29";
- ``unit_numbers``: "9.8 m/s^2", "$1,200", "15kg" → 9.8, 1200, 15 (units stripped);
- ``scaled_numbers``: "213 million", "8.5 billion", "$2.5k" → 213000000, 8500000000, 2500;
- ``stated_options``: the options a parameter's description lists ("'gas' refers to a
  gasoline vehicle", "Options: 'single', 'double'", "e.g. king size, queen size") that the
  question states ("a gas-powered vehicle", "a single room", "with king size bed");
- ``implied_numbers``: "dropped" / "from rest" → 0 (an initial velocity);
- ``boolean_cue``: "with tax" → True and "without tax" → False for ``include_tax`` (the
  value the question cues is chosen whatever the model prefers, as for an enum value).
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Iterable
from datetime import date, timedelta
from typing import Any

from lokal.glosses import cjk_share, gloss_words
from lokal.llm.select import CJK, name_words

__all__ = [
    "EXPRESSION",
    "FORMATS",
    "FORMAT_WORDS",
    "MAX_LIST_ITEMS",
    "QUOTED",
    "asks_again",
    "bare_ordinals",
    "boolean_cue",
    "clauses",
    "compound_heads",
    "counted_items",
    "cued_again",
    "described_number",
    "described_switch",
    "flat_values",
    "follow_up_candidates",
    "formula_candidates",
    "implied_count",
    "implied_numbers",
    "inferred_format",
    "is_a_topic",
    "is_chinese",
    "is_expression",
    "iso_dates",
    "later_values",
    "leaf_strings",
    "list_bound",
    "mentioned_topic",
    "names_a_month",
    "names_a_person",
    "names_the_tool",
    "names_the_tool_in",
    "not_the_tool",
    "number_candidates",
    "number_words",
    "percentages",
    "refers_back",
    "relative_dates",
    "scaled_numbers",
    "singular_names",
    "stated_conditions",
    "stated_numbers",
    "stated_options",
    "states_a_period",
    "states_a_secret",
    "states_any",
    "takes_a_condition",
    "text_numbers",
    "text_spans",
    "unit_numbers",
    "value_kinds",
    "wants_a_number",
    "wants_a_period",
    "wants_a_person_name",
    "wants_a_place_name",
    "wants_a_query",
    "wants_a_secret",
    "wants_expression",
    "whole_names",
    "word_problem_candidates",
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


_CJK_PUNCT = re.compile(r"[，。？！、：；（）《》【】]")
_SCRIPT_BOUNDARY = re.compile(rf"(?<=[{CJK}])(?=[^\s{CJK}])|(?<=[^\s{CJK}])(?=[{CJK}])")


def _spaced(text: str) -> str:
    """Spaces where Chinese or Japanese text meets other text or its own punctuation, so that
    ``notes.txt，告诉我`` gives the words ``notes.txt`` and ``告诉我``."""
    return _SCRIPT_BOUNDARY.sub(" ", _CJK_PUNCT.sub(" ", text))


def _not_an_edge(word: str) -> bool:
    return not word or word in _EDGE_WORDS or not any(c.isalnum() for c in word)


# the passage after the last colon of a text, to its end: "...verbatim: no onions, extra
# cheese" (not the colon of "14:00" or "https://")
_AFTER_COLON = re.compile(r":\s+([^:\n]{3,120}?)[\s.?!]*$")


def _named(word: str) -> bool:
    return word[:1].isupper()


def _comma_name(raw: list[str], i: int) -> str | None:
    """A name written with its comma, starting at word ``i``: "Manhattan, New York", "San
    Francisco, CA" (the spans drop the comma). Each side is a run of up to three capitalised
    words; the right side ends at punctuation or at a word in lower case. A capitalised word
    before ``i`` starts a longer candidate of its own ("Visit Paris, London", "Paris,
    London"): the model's likelihood chooses."""
    left: list[str] = []
    k = i
    while k < len(raw) and len(left) < 3 and _named(raw[k]):
        left.append(raw[k])
        if raw[k][-1:] in _EDGE:
            break
        k += 1
    if not left or not left[-1].endswith(",") or left[-1].count(",") != 1 or k + 1 >= len(raw):
        return None
    right: list[str] = []
    for word in raw[k + 1 : k + 4]:
        if not _named(word):
            break
        right.append(word)
        if word[-1:] in _EDGE:
            break
    if not right:
        return None
    name = " ".join([*left, *right]).strip(_EDGE)
    return name if name.count(",") == 1 else None


def whole_names(values: list[Any], text: str, kinds: Iterable[str] = ()) -> list[Any]:
    """``values`` without the beginnings of a name ``text`` writes whole: "Boreal Forests"
    of "the Boreal Forests of Canada", "Apple" of "Apple Inc.", "New York" of "New York
    City" are no values while the whole name is one (a capitalised run, "of" inside it);
    a name's end stays ("Paris" of "Visit Paris"). A run that ends with a word of
    ``kinds`` (the parameter's and the tool's words) ends with what the value is, not with
    its name: "the Beef Lasagna Recipe" for a ``recipe`` keeps "Beef Lasagna"; one that ends
    with a number ends with a value of its own ("La Liga 2020-2021": a season)."""
    kind_words = {w.casefold() for w in kinds}
    whole = set()
    beginnings = set()
    ends: dict[str, set[str]] = {}
    for match in _NAME.finditer(text):
        words = match.group().strip(_EDGE).split()
        last = words[-1]
        if len(words) < 2 or any(c.isdigit() for c in last):
            continue
        if (
            words[-2] not in ("of", "de")
            and words[0].casefold() not in _NOT_NAMES
            and not _SENTENCE_START.search(text[: match.start()])
        ):
            # the last word of a name that does not open its sentence
            ends.setdefault(last.strip(_EDGE).casefold(), set()).add(" ".join(words).casefold())
        if last.casefold() in kind_words:
            continue
        whole.add(" ".join(words).casefold())
        for n in range(1, len(words)):
            if words[n - 1] not in ("of", "de"):
                beginnings.add(" ".join(words[:n]).strip(_EDGE).casefold())
    offered = {v.casefold() for v in values if isinstance(v, str)}
    alone = {
        end
        for end, names in ends.items()
        if names & offered and len(re.findall(rf"\b{re.escape(end)}\b", text, re.I)) <= len(names)
    }
    if not (whole | {n for names in ends.values() for n in names}) & offered:
        return values
    return [
        v
        for v in values
        if not (isinstance(v, str) and v.casefold() in alone)
        and (
            not (isinstance(v, str) and v.casefold() in beginnings - whole)
            or not any(w.startswith(v.casefold() + " ") and w in offered for w in whole)
        )
    ]


_COMPOUND = re.compile(r"(?<![\w-])([^\W\d_]{2,})-(?:[^\W\d_]+ed)(?![\w-])")


def compound_heads(text: str) -> list[str]:
    """The thing a hyphenated participle names: "gas" of "a gas-fueled car", "solar" of
    "solar-powered", "plant" of "plant-based" (a fuel or a source asked for alone)."""
    return list(dict.fromkeys(m.group(1) for m in _COMPOUND.finditer(text)))


_BARE_ORDINAL = re.compile(r"\d+(?:st|nd|rd|th)", re.IGNORECASE)


def bare_ordinals(values: list[Any]) -> list[Any]:
    """The string values without an ordinal that the question writes before a noun:
    "19th" of "the 19th century" is no value, "19th century" is; an ordinal the question
    ends on ("on the 5th") stays."""
    strings = [v for v in values if isinstance(v, str)]
    return [
        v
        for v in values
        if not (
            isinstance(v, str)
            and _BARE_ORDINAL.fullmatch(v)
            and any(w.startswith(f"{v} ") for w in strings)
        )
    ]


# the words of a snake_case, dotted or camelCase name: "fetch_DNA_sequence", "maxCalories"
_NAME_SPLIT = re.compile(r"[_\W\d]+|(?<=[a-z])(?=[A-Z])")


def _name_parts(name: str) -> set[str]:
    """The words of a tool's or parameter's name, lower-cased, without a plural "s"."""
    words = _NAME_SPLIT.split(name)
    return {w.lower().removesuffix("s") for w in words if w}


def not_the_tool(values: list[Any], tool: str, param: str) -> list[Any]:
    """The string values without those made only of the words of the tool's name (and
    none of the parameter's): the tool says what it serves, the value which one. "Safeway"
    is no location for ``safeway.order`` ("from Safeway in Palo Alto"), "Hotel" no room
    type for ``book_hotel``, "DNA" no format for ``fetch_DNA_sequence`` (BFCL development
    split: every such value was wrong). Unchanged when nothing else is left."""
    tool_words, own = _name_parts(tool), _name_parts(param)

    def the_tool(value: Any) -> bool:
        if not isinstance(value, str):
            return False
        words = _name_parts(value)
        return bool(words) and words <= tool_words and not words & own

    kept = [v for v in values if not the_tool(v)]
    return kept if any(isinstance(v, str) for v in kept) else values


_WHERE = re.compile(r"\s+(?:in|at|near|around|inside)\s+", re.IGNORECASE)


def names_the_tool(value: Any, tool: str, param: str) -> bool:
    """Whether a string ``value`` is the tool's thing and where it is: a word of the tool's
    name (none of the parameter's) before "in", "at", "near": "Safeway in Palo Alto" for
    the location of ``safeway.order`` is the store and its place, the place alone is the
    location. A place whose name holds the word stays ("the Boreal Forests of Canada"
    for ``forest_growth_forecast``, BFCL parallel_120)."""
    if not isinstance(value, str):
        return False
    head = _WHERE.split(value, maxsplit=1)
    if len(head) < 2:
        return False
    return bool(_name_parts(head[0]) & (_name_parts(tool) - _name_parts(param)))


def text_spans(text: str, *, max_words: int = _MAX_SPAN_WORDS) -> list[str]:
    """Candidate string values in ``text``: runs of up to ``max_words`` words (punctuation
    at their edges removed, not starting or ending with a lower-case function word), quoted
    passages, and the passage after a colon that ends the text. In order of appearance,
    without repeats."""
    raw = _spaced(text).split()
    words = [w.strip(_EDGE) for w in raw]
    out: dict[str, None] = {}
    for match in QUOTED.finditer(text):
        out.setdefault(next(g for g in match.groups() if g), None)
    closing = _AFTER_COLON.search(text)
    if closing is not None and " " in closing.group(1):
        # what follows a colon at the end, whole: "the following modification verbatim:
        # no onions, extra cheese" (a span of a few words cuts it at its comma)
        out.setdefault(closing.group(1), None)
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
        place = _comma_name(raw, i)
        if place is not None:
            out.setdefault(place, None)
        for j in range(i + 1, min(len(words), i + max_words) + 1):
            if _not_an_edge(words[j - 1]):
                continue
            span = " ".join(w for w in words[i:j] if w)
            if span:
                out.setdefault(span, None)
                if j - i > 1 and span.lower().endswith(("'s", "’s")):
                    out.setdefault(span[:-2], None)  # "The Weeknd's" -> "The Weeknd"
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
    "date": re.compile(r"^\d{4}-\d{1,2}-\d{1,2}$|^\d{1,2}[/-]\d{1,2}[/-]\d{2,4}$"),
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
    r"(\s*(?:(?<!\d),|,(?!\d{3}\b)|[;，；。]|\band then\b|\bthen\b|\band also\b|\balso\b|"
    r"\bafter that\b|\bfinally\b|\band\b|然后|最后|并且|再)\s*)",
    re.IGNORECASE,
)
# the separators that join the items of a list of numbers ("3, 4 and 5"), not two parts
_ITEM_JOINS = re.compile(r"(?:\s*(?:,|\band\b)\s*)+", re.IGNORECASE)
_ENDS_WITH_NUMBER = re.compile(r"(?<![\w.])-?\$?\d+(?:\.\d+)?%?$")
_OPENS_WITH_NUMBER = re.compile(r"^-?\$?\d")


def wants_a_number(spec: dict[str, Any]) -> bool:
    """Whether a parameter takes one number (not a list): a value the question states."""
    return wants_numbers(spec) and value_kinds(spec) - {"null"} != {"array"}


def stated_numbers(text: str) -> int:
    """How many numbers ``text`` states, each time it states one: in digits, in words
    ("three tickets"), or implied ("dropped": 0; "the largest": 1)."""
    return (
        len(_NUMBER.findall(text.replace(",", "")))
        + len(number_words(text))
        + len(implied_numbers(text))
        + len(implied_count(text))
    )


def wants_numbers(spec: dict[str, Any]) -> bool:
    """Whether a parameter takes only a number or a list of numbers (``null`` aside):
    a value the question has to state (an enum offers its own)."""
    if "enum" in spec or "const" in spec:
        return False
    kinds = value_kinds(spec) - {"null"}
    if kinds == {"array"}:
        items = spec.get("items")
        return (
            isinstance(items, dict)
            and bool(value_kinds(items))
            and (value_kinds(items) <= {"number", "integer"})
        )
    return bool(kinds) and kinds <= {"number", "integer"}


# "Can you help me with a few tasks? First, ...": a request for help before the request
_HELP_OPENING = re.compile(
    r"^\W*(?:can|could|would|will)\s+you\s+(?:please\s+)?(?:help|assist)\s+me\b[^?.!]*\?\s*",
    re.IGNORECASE,
)
# a sequence word that ends a part (the next part's opening) or is one: "..., First"
_SEQUENCE_TAIL = re.compile(
    r"(?:^|\s+)(?:first(?:ly)?|second(?:ly)?|third(?:ly)?|fourth(?:ly)?|next|lastly|finally)"
    r"\W*$",
    re.IGNORECASE,
)


def _without_help_opening(question: str) -> str:
    """``question`` without an opening request for help that names no value and is followed
    by the request ("Can you help me with a few tasks? First, ..."); "Can you help me find a
    property in San Francisco, CA ...?" is the request."""
    opening = _HELP_OPENING.match(question)
    if (
        opening
        and question[opening.end() :].strip()
        and not re.search(r"\d|['\"“]|(?<!^)\b[A-Z]", opening.group().strip(' "“'))
    ):
        return question[opening.end() :]
    return question


_SENTENCE_BREAK = re.compile(r"(?<=[.?!])\s+(?=[A-Z\"“'])")


def sentences(text: str) -> list[str]:
    """``text`` cut after each ".", "?" or "!" that a capital (or a quote) follows."""
    return [s for s in _SENTENCE_BREAK.split(text) if s.strip()]


def opening_part(question: str) -> str | None:
    """The first sentence of a request of several sentences (an opening request for help
    aside): the part its first call is about, as the first part is for the choice of the
    tool ("First, I need to calculate the power of 7 raised to 3. Then, ... 52 playing
    cards ..." gave the power a base of 5: BFCL parallel_multiple_155). None for a request
    of one sentence."""
    parts = sentences(_without_help_opening(question).strip())
    return parts[0] if len(parts) > 1 else None


def clauses(question: str) -> list[str]:
    """The parts of a request that may each need a call ("read a.txt, then search for b"):
    the question split at commas, semicolons and sequence words (and, then, also, 然后…),
    except inside brackets ("[1, 2, 3]") and between the numbers of a list ("the multiples
    of 3 and 5 between 1 and 1000", "data points 3,4,5,2,8,5"): split there, the part of
    the request that names a tool lost its values, and the next call was about the same
    part again (BFCL's parallel_multiple_0 and _20 never called the second tool). An
    opening request for help that names no value ("Could you help me with a few things?
    First, ...") is no part when others follow, nor is a lone sequence word ("First",
    "Lastly")."""
    pieces = _CLAUSE_SPLIT.split(_without_help_opening(question))
    parts = [pieces[0]]
    join = ""
    for separator, piece in zip(pieces[1::2], pieces[2::2], strict=True):
        join += separator
        if not piece.strip():  # ", and ": one separator
            continue
        last = parts[-1]
        inside = last.count("[") > last.count("]") or last.count("(") > last.count(")")
        listed = (
            _ITEM_JOINS.fullmatch(join)
            and _ENDS_WITH_NUMBER.search(last.rstrip())
            and _OPENS_WITH_NUMBER.match(piece)
        )
        if inside or listed:
            parts[-1] = last + join + piece
        else:
            parts.append(piece)
        join = ""
    parts = [_SEQUENCE_TAIL.sub("", p).strip(' .?!。？！"“”') for p in parts]
    return [p for p in parts if any(c.isalnum() for c in p)]


# A name the question states: a run of capitalised words ("Wells Fargo", "Boreal Forests of
# Canada"), or a quoted value
_GROUPED_NUMBER = re.compile(
    r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w.]*\d)|" + _NUMBER.pattern
)
_NAME = re.compile(r"\b[A-Z][\w'&-]*(?:\.\w+)*(?:\s+(?:of\s+|de\s+)?[A-Z0-9][\w'&-]*(?:\.\w+)*)*")
# capitalised words that are no value: a pronoun, a sentence's opening word after a comma
_NOT_NAMES = frozenset([
    "i", "also", "then", "lastly", "finally", "next", "please", "can", "could", "would", "will",
    "what", "which", "how", "who", "when", "where", "and", "or", "but", "if", "so", "plus",
    "additionally", "moreover", "furthermore", "besides",
])  # fmt: skip
_SENTENCE_START = re.compile(r"(?:^|[.?!:]\s+|[\"“(]\s*)$")


def flat_values(value: Any) -> list[Any]:
    """The scalar values inside ``value`` (nested objects and lists opened), in order."""
    if isinstance(value, dict):
        return [v for item in value.values() for v in flat_values(item)]
    if isinstance(value, list):
        return [v for item in value for v in flat_values(item)]
    return [value]


def later_values(question: str, args: list[dict[str, Any]], tools: Iterable[str] = ()) -> list[Any]:
    """The values the question states after the last one these calls used, of a kind the
    calls took, that no call has used: "the factorial of 5, the factorial of 7" after
    ``{"number": 5}`` → [7]; "HSBC … and for Wells Fargo" after ``{"financial_institution":
    "HSBC", …}`` → ["Wells Fargo"]. Numbers as digits, names as capitalised runs or quotes; a
    capitalised word that only opens a sentence ("Also, …") is no name, nor is a name made
    of the words of one of ``tools`` (the names of the tools offered: "on Spotify" names
    ``spotify.play``, not a value for it). The evidence for another call of the same tool
    (issue 21: the ``parallel`` questions)."""
    used = [v for a in args for v in flat_values(a)]
    numbers = {float(v) for v in used if isinstance(v, int | float) and not isinstance(v, bool)}
    numbers |= {round(n * 100, 9) for n in numbers}  # "5%" given as 0.05
    for match in _SCALED.finditer(question):  # "8.5 million" given as 8500000
        scaled = float(match.group(1)) * _SCALE_WORDS[match.group(2).casefold()]
        if round(scaled, 6) in numbers:
            numbers.add(float(match.group(1)))
    strings = [v.casefold() for v in used if isinstance(v, str) and v.strip()]
    # a value normalised from the question's words: "2023-03-10" used "March 10th, 2023"
    numbers |= {float(d) for text in strings for d in re.findall(r"\d+", text)}
    dated = any(re.search(r"\d{4}", text) for text in strings)
    folded = question.casefold()
    stated = [
        (m.start(), m.end(), float(m.group().replace(",", "")))
        for m in _GROUPED_NUMBER.finditer(question)
    ]
    end = 0
    for text in strings:
        at = folded.find(text)
        if at >= 0:
            end = max(end, at + len(text))
    for n in numbers:
        end = max(end, next((stop for _, stop, v in stated if v == n), 0))
    if not end:
        return []
    later: list[Any] = []
    if numbers:
        for start, stop, v in stated:
            # an exponent is no value of its own: the 2 of "m/s^2", of "x^2"
            if start >= end and v not in numbers and not question[:start].endswith("^"):
                later.append(v)
                if _PERCENT_AFTER.match(question, stop):  # "1.5%", given as 0.015
                    later.append(round(v / 100, 9))
    if strings:
        names = [
            g
            for m in QUOTED.finditer(question)
            if m.start() >= end
            for g in m.groups()
            if g and len(g.split()) <= _MAX_SPAN_WORDS
        ]
        names += [
            m.group().strip(_EDGE)
            for m in _NAME.finditer(question)
            if m.start() >= end
            and m.group().casefold() not in _NOT_NAMES
            and not (" " not in m.group() and _SENTENCE_START.search(question[: m.start()]))
            # a unit after a number ("25 MPG") is part of that value, no value of its own
            and not re.search(r"\d\s*$", question[: m.start()])
            # so is the state after a used city ("Los Angeles, California")
            and not any(question[: m.start()].rstrip(", ").casefold().endswith(u) for u in strings)
        ]
        # in letters and digits only: "D.C" is part of a used "Washington, DC"
        bare = [re.sub(r"\W+", "", u) for u in strings]
        later += [
            n
            for n in names
            if not any(n.casefold() in u or u in n.casefold() for u in strings)
            and not any(b and b in u for b in [re.sub(r"\W+", "", n.casefold())] for u in bare)
            and not (dated and n.split()[0].casefold() in _MONTHS)
        ]
    named = {w.casefold() for t in tools for w in name_words(t).split()}
    names = {t.casefold() for t in tools}  # "using the 'chess.rating' function"
    later = [
        v
        for v in later
        if not isinstance(v, str)
        or not (set(v.casefold().split()) <= named or v.casefold() in names)
    ]
    other = aliases(question, strings)
    return list(
        dict.fromkeys(v for v in later if not (isinstance(v, str) and v.casefold() in other))
    )


def aliases(question: str, used: Iterable[str]) -> set[str]:
    """The other names the question gives ``used`` strings in parentheses, casefolded: in
    "Amazon.com Inc. (AMZN)", "Amazon.com" → {"amzn"} and "AMZN" → {"amazon.com inc"} (the
    capitalised name just before the parenthesis). One thing written twice is no value for
    another call."""
    out: set[str] = set()
    for value in used:
        if not value.strip():
            continue
        v = re.escape(value)
        for m in re.finditer(
            rf"(?i)(?<!\w){v}[^()\n]{{0,12}}\(\s*([^()\n]{{1,40}}?)\s*\)", question
        ):
            out.add(m.group(1).casefold())
        for m in re.finditer(rf"(?i)\(\s*{v}\s*\)", question):
            before = question[: m.start()].rstrip(" .")
            names = [n for n in _NAME.finditer(before) if n.end() == len(before)]
            if names:
                out.add(names[-1].group().strip(_EDGE).casefold())
    return out


_CUE_STOP = frozenset([
    "of", "the", "a", "an", "to", "is", "at", "for", "in", "with", "and", "by", "on", "from",
    "be", "was", "are", "its", "their", "his", "her", "as", "than", "then", "also",
])  # fmt: skip


def _cue(question: str, start: int) -> str | None:
    """The content word just before ``start`` in ``question`` ("factorial" in "the
    factorial of 7"), or None."""
    words = [w for w in re.findall(r"[a-z]+", question[:start].casefold()) if w not in _CUE_STOP]
    return words[-1] if words else None


def _statement(question: str, value: Any) -> int | None:
    """Where ``question`` first states ``value`` (a number as written, a name ignoring case,
    as whole words: "CA" is not stated by "calculate")."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return next(
            (
                m.start()
                for m in _GROUPED_NUMBER.finditer(question)
                if float(m.group().replace(",", "")) == float(value)
            ),
            None,
        )
    if isinstance(value, str) and value.strip():
        written = re.search(
            r"(?<!\w)" + re.escape(value.casefold()) + r"(?!\w)", question.casefold()
        )
        return written.start() if written else None
    return None


def cued_again(question: str, args: list[dict[str, Any]], later: list[Any]) -> bool:
    """Whether a value stated later follows the same word as a value the calls used: "the
    factorial of 5, the factorial of 7" (both after "factorial"), "stage 7 in easy mode and
    stage 3" (after "stage"). The question repeating what it asks for with a new value: on
    BFCL's development split it held for half the questions that expect several calls of
    one tool and for none that expect one call."""
    used = [_span(question, v) for a in args for v in flat_values(a)]
    used = [span for span in used if span is not None]
    cues = {_cue(question, span[0]) for span in used} - {None}
    # or the same form of number: a year after a year, a percentage after a percentage
    shapes = {_shape(question, span) for span in used} - {None}
    return any(
        _cue(question, span[0]) in cues or _shape(question, span) in shapes
        for span in (_span(question, v) for v in later)
        if span is not None
    )


# words that ask for a request again: "and another flight from Tokyo", "then do the same
# for", "filed in 2019, also list cases filed in 2018", "10 and 20 years, respectively"
_AGAIN = re.compile(
    r"\b(?:another|also|as well|the same|again|respectively|followed by|both)\b|另|再|分别|同样",
    re.IGNORECASE,
)


def asks_again(question: str) -> bool:
    """Whether ``question`` has a word that asks for a request again ("another", "also",
    "the same", "respectively", "both"). On BFCL's development split it held for 48 of the
    80 questions that expect several calls and 4 of the 172 that expect one."""
    return bool(_AGAIN.search(question))


def _span(question: str, value: Any) -> tuple[int, int] | None:
    """Where ``question`` first states ``value``: its start and end (a fraction where the
    question writes it as a percentage: 0.015 at "1.5%"; a list where it writes the list
    out in brackets)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        numbers = [
            (m, float(m.group().replace(",", ""))) for m in _GROUPED_NUMBER.finditer(question)
        ]
        return next(
            ((m.start(), m.end()) for m, n in numbers if n == float(value)),
            next(
                (
                    (m.start(), m.end())
                    for m, n in numbers
                    if _PERCENT_AFTER.match(question, m.end())
                    and round(n / 100, 9) == round(float(value), 9)
                ),
                None,
            ),
        )
    if isinstance(value, str) and value.strip():
        at = question.casefold().find(value.casefold())
        return (at, at + len(value)) if at >= 0 else None
    if isinstance(value, list) and value:
        # a list where the question writes it out in brackets: "the interval [0, 3]"
        return next(
            (
                (m.start(), m.end())
                for m in _BRACKETED.finditer(question)
                if _list_items(re.split(r"[,;，；、]", m.group(1))) == value
            ),
            None,
        )
    return None


_PERCENT_AFTER = re.compile(r"\s?(?:%|percent\b|per cent\b)", re.IGNORECASE)
_YEAR = re.compile(r"(?:1[5-9]|20)\d\d")
_DATING = frozenset(["in", "year", "since", "until", "till", "during", "before", "after", "of"])


def _shape(question: str, span: tuple[int, int]) -> str | None:
    """What a stated number is by its own form: a percentage ("2%", "1.5 percent"), or a
    year (four digits from 1500 to 2099 after a word that dates, or followed by no word but
    a function word: "filed in 2019, also ... in the year 2018 against"; not "2000
    calories"). None for other values."""
    text = question[span[0] : span[1]]
    if not _GROUPED_NUMBER.fullmatch(text):  # a name ("Rock") has no such form
        return None
    if _PERCENT_AFTER.match(question, span[1]):
        return "percent"
    if not _YEAR.fullmatch(text):
        return None
    after = re.match(r"\s*([a-z]+)", question[span[1] :].casefold())
    before = re.search(r"([a-z]+)\W*$", question[: span[0]].casefold())
    if (before is not None and before.group(1) in _DATING) or (
        after is None or after.group(1) in _CUE_STOP
    ):
        return "year"
    return None


def _cues(question: str, span: tuple[int, int]) -> set[str]:
    """The words that mark what a stated value is: the content word before it ("income" in
    "annual income of $120,000") and a word right after it ("Kelvin" in "350 Kelvin", "song"
    in "Rock song"); words of three letters or more ("x" in "x^2 from 1" marks nothing). A
    number's own form marks it too (``_shape``: a percentage, a year), whatever words stand
    around it: "filed in 2019, ... the year 2018"; "a growth rate of 2% ... 1.5% ... 2.5%"."""
    before = _cue(question, span[0])
    after = re.match(r"\s*([a-z]+)", question[span[1] :].casefold())
    cues = {("before", before)} if before and len(before) > 2 else set()
    if after and after.group(1) not in _CUE_STOP and len(after.group(1)) > 2:
        cues.add(("after", after.group(1)))
    shape = _shape(question, span)
    if shape is not None:
        cues.add(("shape", shape))
    return cues


def _marks(question: str, values: list[Any]) -> list[tuple[tuple[int, int], set] | None]:
    """Where the question states each of ``values`` and the words that mark it (``_cues``);
    None for a value it does not state as a whole: a string counts only as a whole name or
    quote ("Wells Fargo", not the spans "Wells" or "HSBC with annual" around it)."""
    names = {m.group().strip(_EDGE).casefold() for m in _NAME.finditer(question)}
    names |= {g.casefold() for m in QUOTED.finditer(question) for g in m.groups() if g}
    marks: list[tuple[tuple[int, int], set] | None] = []
    for value in values:
        span = None
        if not isinstance(value, str) or (
            value.casefold() in names and not re.search(r"\d", value)
        ):
            span = _span(question, value)
        cues = _cues(question, span) if span is not None else set()
        marks.append((span, cues) if span is not None and cues else None)
    return marks


def _alike(values: list[Any], marks: list, i: int, j: int) -> bool:
    """Two stated values of one type, apart, marked by a same word."""
    a, b = marks[i], marks[j]
    return (
        a is not None
        and b is not None
        and i != j
        and isinstance(values[i], str) == isinstance(values[j], str)
        and (a[0][1] <= b[0][0] or b[0][1] <= a[0][0])
        and bool(a[1] & b[1])
    )


def waiting_values(question: str, values: list[Any], taken: list[Any]) -> set[int]:
    """The positions in ``values`` of those that wait for a later call: the question states
    another of ``values`` of its type, not ``taken`` yet, before it and marked by the same
    word before or after (``_cues``): "annual income $100,000 ... annual income of
    $120,000": 120000 waits while 100000 is not taken; "the most played Pop song and ...
    the most played Rock song": "Rock" waits. A request repeated with new values takes them
    in the order it states them; a value that opens its own kind ("from 1 to 3") waits for
    nothing once the earlier one is taken."""
    marks = _marks(question, values)
    open_ = [i for i, v in enumerate(values) if marks[i] is not None and v not in taken]
    return {
        i
        for i in open_
        if any(
            _alike(values, marks, i, j) and marks[j][0][0] < marks[i][0][0]  # type: ignore[index]
            for j in open_
        )
    }


def sibling_values(question: str, args: list[dict[str, Any]]) -> list[Any]:
    """The values the question states, marked like one these calls used (``_cues``), that no
    call has used, wherever they stand: "the most played Pop song and ... the most played
    Rock song in Australia" after ``{"genre": "Pop", "region": "Australia"}`` → ["Rock"]
    (``later_values`` finds nothing after "Australia"). Numbers as digits, names as
    capitalised runs or quotes."""
    used = [v for a in args for v in flat_values(a) if isinstance(v, str | int | float)]
    used = [v for v in used if not isinstance(v, bool)]
    folded = question.casefold()
    inside = [  # where a used name stands: "Maroon 5" holds no number of its own
        (at, at + len(v))
        for v in used
        if isinstance(v, str) and v.strip() and (at := folded.find(v.casefold())) >= 0
    ]
    stated: list[Any] = [
        float(m.group().replace(",", ""))
        for m in _GROUPED_NUMBER.finditer(question)
        if not any(a <= m.start() < b for a, b in inside)
    ]
    stated += [m.group().strip(_EDGE) for m in _NAME.finditer(question)]
    stated += [g for m in QUOTED.finditer(question) for g in m.groups() if g]
    folded_used = {str(v).casefold() for v in used}
    numbers_used = {float(v) for v in used if not isinstance(v, str)}
    numbers_used |= {round(n * 100, 9) for n in numbers_used}  # "3%" given as 0.03
    fresh = [
        v
        for v in dict.fromkeys(stated)
        if not (isinstance(v, str) and (v.casefold() in folded_used or v.casefold() in _NOT_NAMES))
        and not (isinstance(v, float) and v in numbers_used)
    ]
    other = aliases(question, [v for v in used if isinstance(v, str)])
    fresh = [v for v in fresh if not (isinstance(v, str) and v.casefold() in other)]
    values = [*used, *fresh]
    marks = _marks(question, values)
    return [
        values[i]
        for i in range(len(used), len(values))
        if any(_alike(values, marks, i, j) for j in range(len(used)))
    ]


def states_any(text: str, values: list[Any]) -> bool:
    """Whether ``text`` states one of ``values`` (a number as written, a name ignoring case)."""
    return any(_statement(text, v) is not None for v in values)


# --- direction: where from, where to -------------------------------------------------

# the words of a parameter's name that make it the origin or the destination of a pair
_ORIGIN_WORDS = frozenset(
    ["from", "source", "src", "origin", "start", "starting", "departure", "initial", "begin"]
)
_DESTINATION_WORDS = frozenset(
    ["to", "target", "dest", "destination", "end", "ending", "arrival", "final"]
)
# the words of a question that mark the origin and the destination of what follows them; a
# "to" after a word that wants a verb ("want to", "how to") marks nothing
_FROM_MARK = re.compile(r"\bfrom\s+", re.I)
_TO_MARK = re.compile(
    r"(?<!\bwant\s)(?<!\bwants\s)(?<!\bneed\s)(?<!\bneeds\s)(?<!\blike\s)(?<!\bhow\s)"
    r"(?<!\bable\s)(?<!\bgoing\s)(?<!\bhave\s)(?<!\bplan\s)(?<!\bwish\s)(?<!\bhope\s)"
    r"(?<!\btry\s)(?<!\bhas\s)"
    r"\b(?:to|into|towards|until|till)\s+",
    re.I,
)
_MARKED_END = re.compile(r"[,.;:?!()]|\b(?:from|to|into|towards|until|till|and|then)\b", re.I)


def _direction(name: str) -> str | None:
    words = {w.lower() for w in _NAME_SPLIT.split(name) if w}
    origin, destination = bool(words & _ORIGIN_WORDS), bool(words & _DESTINATION_WORDS)
    if origin == destination:
        return None
    return "origin" if origin else "destination"


def _first_marked(text: str, mark: re.Pattern[str]) -> str | None:
    """What follows the first of ``mark``'s words, up to the next mark or punctuation (a
    date's own comma, "April 5th, 2023", does not end it)."""
    match = mark.search(text)
    if match is None:
        return None
    rest = text[match.end() :]
    end = next((m for m in _MARKED_END.finditer(rest) if not _in_date(rest, m.start())), None)
    return rest[: end.start()] if end else rest


def _in_date(text: str, at: int) -> bool:
    return text[at] == "," and bool(re.match(r",\s*\d{4}\b", text[at:]))


def _opens(part: str, value: Any) -> bool:
    """Whether ``part`` opens with ``value`` ("the" allowed before it): "Canadian dollars"
    opens with "Canadian"; "a 150 meter building" does not open with 150."""
    head = re.sub(r"^\s*(?:the\s+)?", "", part, flags=re.I)
    if isinstance(value, str):
        if re.fullmatch(r"\d{4}-\d\d-\d\d", value):
            # "from April 3rd to April 5th 2023": the year is written once, after the last
            return value in iso_dates(head) or value in iso_dates(f"{head.strip()}, {value[:4]}")
        return bool(re.match(rf"{re.escape(value)}\b", head, re.I))
    start = len(head) - len(head.lstrip("$€£"))
    return any(at == start and number == float(value) for at, number in _numbers_in(head))


def _numbers_in(text: str) -> list[tuple[int, float]]:
    """Where ``text`` writes each number, and its value ("1,200" is 1200.0)."""
    return [(m.start(), float(m.group().replace(",", ""))) for m in _GROUPED_NUMBER.finditer(text)]


def direction_cue(name: str, value: Any, text: str) -> int:
    """Whether ``text`` marks ``value`` as the side of a pair that parameter ``name`` is
    (+1) or as the other side (-1), or neither (0): "Convert 150 Euros to Canadian dollars"
    marks "Canadian dollars" (and "Canadian") as a destination, so not a ``from_currency``;
    "from April 3rd to April 5th 2023" marks 2023-04-03 as a ``start_date``, 2023-04-05 as
    an ``end_date``; "heated to 100°C" marks 100 as a ``final_temperature``. A value marks
    its side when it opens what follows the first "from" (an origin) or the first "to",
    "into", "towards" or "until" (a destination; not the "to" of "want to", "how to"), and
    the other side when it is anywhere in that part ("dollars" of "to Canadian dollars"); a
    request repeated ("from San Francisco to Tokyo ... and another from Tokyo to Sydney") is
    read part by part."""
    side = _direction(name)
    if side is None or isinstance(value, bool) or not isinstance(value, str | int | float):
        return 0
    origin, destination = (_first_marked(text, mark) for mark in (_FROM_MARK, _TO_MARK))
    own, other = (origin, destination) if side == "origin" else (destination, origin)
    opens_own = own is not None and _opens(own, value)
    # the other side's part states it anywhere: "to Canadian dollars" is no from_currency
    # "dollars" either
    in_other = other is not None and (_opens(other, value) or states_any(other, [value]))
    if opens_own == in_other:
        return 0
    return 1 if opens_own else -1


def taken_number(value: Any, taken: list[Any], text: str) -> bool:
    """Whether ``value`` is a number another parameter of the call took (``taken``) that
    ``text`` writes at most once: "a king size bed in Los Angeles for 2 nights" gives
    ``no_of_nights`` 2, and no second parameter the same 2 (simple_python_385 had
    ``no_of_rooms: 2``). Written twice ("2 adults for 2 nights"), both may take it."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    numbers = [t for t in taken if isinstance(t, int | float) and not isinstance(t, bool)]
    if value not in numbers:
        return False
    return sum(number == float(value) for _, number in _numbers_in(text)) <= 1


# --- light normalisations ------------------------------------------------------------

_UNITS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19,
}  # fmt: skip
_TENS = {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
    "eighty": 80, "ninety": 90,
}  # fmt: skip
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_SPECIAL = {"a dozen": 12, "dozen": 12, "a couple of": 2, "a pair of": 2, "half a dozen": 6}
_ORDINALS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
    "eighth": 8, "ninth": 9, "tenth": 10,
}  # fmt: skip
_MONTHS = {
    name: n
    for n, names in enumerate(
        [
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
            ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
            ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}  # fmt: skip
_NUMBER_WORD = "|".join([*_UNITS, *_TENS, *_SCALES, "and"])
_RUN = re.compile(rf"\b(?:{_NUMBER_WORD})(?:[\s-]+(?:{_NUMBER_WORD}))*\b", re.IGNORECASE)


def _once(values: list) -> list:
    out: list = []
    for value in values:
        if value not in out:
            out.append(value)
    return out


def _words_value(words: list[str]) -> int | None:
    total, current, seen = 0, 0, False
    for word in words:
        if word in _UNITS:
            current += _UNITS[word]
        elif word in _TENS:
            current += _TENS[word]
        elif word in _SCALES:
            current = max(current, 1) * _SCALES[word]
            if _SCALES[word] >= 1000:
                total, current = total + current, 0
        elif word == "and":
            continue
        else:
            return None
        seen = True
    return total + current if seen else None


_ITEM_WORD = re.compile(r"[^\W_][\w'’&.-]*|[,;:?!()]")
# words that end an item's name: "two Big Macs from McDonald's", "three pumpkins at Walmart"
_ITEM_END = frozenset(
    re.findall(r"\w+", "and or from at in on for to with by near into each per please then but via")
)
_MAX_ITEM_WORDS = 5


def _count(word: str) -> int | None:
    word = word.casefold()
    if word in ("a", "an"):
        return 1
    if word.isdecimal() and word.isascii():  # not "²"
        return int(word)
    return _UNITS.get(word)


def _counted_item(words: list[str], i: int) -> tuple[int, str, int] | None:
    """The item counted at ``words[i]`` ("three bottles of olive oil": 3, "olive oil"), with
    the index after it; None where no count and name stand there."""
    count = _count(words[i]) if i < len(words) else None
    if count is None:
        return None
    j = i + 1
    if j < len(words) and words[j].casefold() == "dozen":  # "two dozen eggs": 24
        count, j = count * 12, j + 1
    name: list[str] = []
    while j < len(words) and len(name) < _MAX_ITEM_WORDS:
        word = words[j]
        if not word[0].isalnum() or word.casefold() in _ITEM_END:
            break
        name.append(word.rstrip("."))
        j += 1
    after = words[j].casefold() if j < len(words) else ""
    if not name or (after[:1].isalnum() and after not in _ITEM_END):
        return None  # no name, or a clause rather than a name
    # what a container or a measure holds: "bottles of olive oil", "a five pound bag of rice"
    if "of" in name[:-1]:
        name = name[len(name) - name[::-1].index("of") :]
    return count, " ".join(name), j


def counted_items(text: str) -> list[tuple[int, str]]:
    """The items a question counts in a list of two or more: "two Big Macs and one
    McFlurry" → [(2, "Big Macs"), (1, "McFlurry")]; "three bottles of olive oil and a five
    pound bag of rice" → [(3, "olive oil"), (1, "rice")]; "two dozen eggs" counts 24. For an
    order's items and their quantities, two lists of one length. The first such list."""
    words = _ITEM_WORD.findall(text)
    i = 0
    while i < len(words):
        found: list[tuple[int, str]] = []
        j = i
        while (item := _counted_item(words, j)) is not None:
            found.append(item[:2])
            j = item[2]
            # the next item after ",", "and" or ", and"
            while j < len(words) and words[j].casefold() in (",", "and"):
                j += 1
        if len(found) >= 2:
            return found
        i += 1
    return []


def singular_names(names: list[str]) -> list[str]:
    """``names`` with the last word of each in the singular ("Big Macs" → "Big Mac"), by
    the ``inflect`` library's rules; a word it finds no plural in stays."""
    engine = _inflection()
    out = []
    for name in names:
        head, _, last = name.rpartition(" ")
        one = engine.singular_noun(last) if last[:1].isalpha() and len(last) > 3 else False
        out.append(f"{head} {one}".strip() if one else name)
    return out


@functools.cache
def _inflection() -> Any:
    import inflect

    return inflect.engine()


def number_words(text: str) -> list[int]:
    """Numbers written as words ("top three" → 3, "twenty-five" → 25, "a dozen" → 12,
    "the third" → 3)."""
    found: list[tuple[int, int]] = []
    lowered = text.casefold()
    for phrase, value in _SPECIAL.items():
        for match in re.finditer(rf"\b{re.escape(phrase)}\b", lowered):
            found.append((match.start(), value))
    for match in _RUN.finditer(lowered):
        words = [w for w in re.split(r"[\s-]+", match.group(0)) if w]
        while words and words[-1] == "and":
            words.pop()
        while words and words[0] == "and":
            words.pop(0)
        value = _words_value(words)
        if value is not None:
            found.append((match.start(), value))
    for match in re.finditer(rf"\b({'|'.join(_ORDINALS)})\b", lowered):
        found.append((match.start(), _ORDINALS[match.group(1)]))
    return _once([value for _, value in sorted(found)])


def percentages(text: str) -> list[float]:
    """Each percentage as given and as a fraction ("5%" → 5, 0.05; "12.5 percent" → 12.5,
    0.125)."""
    out: list[float] = []
    for match in re.finditer(r"(-?\d+(?:\.\d+)?)\s*(?:%|percent\b|per cent\b)", text, re.I):
        value = float(match.group(1))
        out += [int(value) if value.is_integer() else value, round(value / 100, 10)]
    return _once(out)


# a parameter that is a rate takes a percentage as a fraction: "interest_rate" 5% → 0.05
_RATE = re.compile(r"rate|return|interest|yield|growth|discount|inflation", re.IGNORECASE)
_IN_PERCENT = re.compile(r"\bpercent(?:age)?s?\b|%", re.IGNORECASE)
# a description that asks for the fraction: "as a decimal", "in decimal form", "5% = 0.05"
_AS_FRACTION = re.compile(
    r"\b(?:as|in)\s+(?:a\s+)?(?:decimal|fraction)|\bdecimal\s+form|\d\s*%\s*(?:is|=|->|→)\s*0?\.\d",
    re.IGNORECASE,
)


def percent_form(name: str, spec: dict[str, Any], values: list[Any], text: str) -> list[Any]:
    """``values`` for a number parameter, with the form of the question's percentages that
    the parameter takes: a rate (``interest_rate``, ``discount_rate``,
    ``expected_annual_return``) the fraction, 0.05 for "5%", unless its description asks for
    a percentage, which then takes 5 (one that asks for a decimal, "5% is 0.05", takes the
    fraction). On BFCL's development split, 11 of 11 rate parameters
    given as a percentage expected the fraction; the ``lightness`` of a colour, 70 for
    "70%". Other parameters keep both forms for the model's likelihood to choose from."""
    description = str(spec.get("description") or "")
    if _AS_FRACTION.search(description):
        keep = "fraction"  # "Enter as a decimal. E.g, 5% is 0.05" names a percentage too
    elif _IN_PERCENT.search(description):
        keep = "given"
    elif _RATE.search(name) or _RATE.search(description.split(".")[0]):
        keep = "fraction"
    else:
        return values
    given = {
        float(m.group(1))
        for m in re.finditer(r"(-?\d+(?:\.\d+)?)\s*(?:%|percent\b|per cent\b)", text, re.I)
    }
    fractions = {round(g / 100, 10) for g in given}
    drop = given - fractions if keep == "fraction" else fractions - given

    def dropped(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value in drop

    return [v for v in values if not dropped(v)] or values


# a list the question writes out: "[3, 4, 5, 6, 4]", "(1, 2)", "8♥, 10♥, J♥, Q♥, K♥"
_BRACKETED = re.compile(r"[\[(（]([^\[\]()（）]{1,400})[\])）]")
_TOKEN_RUN = re.compile(r"(?<![^\s(\[:])[^\s,;:()\[\]]+(?:\s*,\s*(?:and\s+)?[^\s,;:()\[\]]+){2,}")
# numbers with "and" before the last, with or without a comma: "12, 15, 18 and 20"
_N = r"-?\$?\d+(?:\.\d+)?"
_NUMBER_RUN = re.compile(rf"(?<![\w.]){_N}(?:\s*,\s*{_N})+\s*,?\s+and\s+{_N}(?![\w.]*\d)")
# two numbers joined by "and": "the multiples of 3 and 5" (not a range: "between 4 and 8")
_NUMBER_PAIR = re.compile(
    rf"(?<![\w.])(?<!between )(?<!from ){_N}\s+and\s+{_N}(?![\w.]*\d)", re.IGNORECASE
)
_ITEM_NUMBER = re.compile(r"[-+]?\$?\d+(?:\.\d+)?")


def _list_items(parts: list[str]) -> list[Any] | None:
    items = [p.strip().strip("'\"`").strip() for p in parts]
    items = [i for i in items if i]
    if len(items) < 2 or any(len(i) > 40 for i in items):
        return None
    if all(_ITEM_NUMBER.fullmatch(i) for i in items):
        numbers = [float(i.replace("$", "")) for i in items]
        return [
            int(n) if n.is_integer() and "." not in i else n
            for n, i in zip(numbers, items, strict=True)
        ]
    return items


def list_candidates(text: str) -> list[list[Any]]:
    """The lists ``text`` writes out, whole: the items of each bracketed list, each run of
    numbers with "and" before the last ("12, 15, 18 and 20"), each pair of numbers joined by
    "and" outside those runs and ranges ("the multiples of 3 and 5", not "between 4 and
    8"), and each run of three or more
    one-word items separated by commas ("a Hand of 8♥, 10♥, J♥, Q♥, K♥ and Mike having ..."
    gives the five cards; the run ends where a space, not a comma, follows an item).
    Numbers as numbers. An array argument generated by the model stopped early:
    "[3, 4, 5, 6, 4]" became ``[3, 4, 5]``."""
    found: list[list[Any]] = []
    for match in _BRACKETED.finditer(text):
        items = _list_items(re.split(r"[,;，；、]", match.group(1)))
        if items is not None and items not in found:
            found.append(items)
    runs = list(_NUMBER_RUN.finditer(text))
    pairs = [
        m
        for m in _NUMBER_PAIR.finditer(text)
        if not any(r.start() <= m.start() < r.end() for r in runs)
    ]
    for match in [*runs, *pairs]:
        items = _list_items(re.split(r"\s*,\s*(?:and\s+)?|\s+and\s+", match.group(0)))
        if items is not None and items not in found:
            found.append(items)
    for match in _TOKEN_RUN.finditer(text):
        run = match.group(0).rstrip(".!?")
        items = _list_items(re.split(r"\s*,\s*(?:and\s+)?", run))
        # not the head of a longer list found: [12, 15, 18] of "12, 15, 18 and 20"
        longer = any(len(f) > len(items or []) and f[: len(items or [])] == items for f in found)
        if items is not None and items not in found and not longer:
            found.append(items)
    return found


def _iso(year: int, month: int, day: int) -> str | None:
    try:
        return date(year, month, day).isoformat()
    except ValueError:
        return None


def iso_dates(text: str) -> list[str]:
    """Dates in ISO form ("March 10th, 2023", "10 March 2023", "15th October,2023",
    "2023/03/10", "03/10/2023" read as month/day) → "2023-03-10"; the first date of a range
    with the year the range writes once ("April 3rd to April 5th 2023")."""
    month = "|".join(sorted(_MONTHS, key=len, reverse=True))
    patterns = (
        (rf"\b({month})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?(?:,\s*|\s+)(\d{{4}})\b", ("m", "d", "y")),
        (
            rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({month})\.?(?:,\s*|\s+)(\d{{4}})\b",
            ("d", "m", "y"),
        ),
        (r"\b(\d{4})[/.-](\d{1,2})[/.-](\d{1,2})\b", ("y", "m", "d")),
        (r"\b((?:19|20)\d\d)(0[1-9]|1[0-2])([0-3]\d)\b", ("y", "m", "d")),  # 20230929
        (r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b", ("m", "d", "y")),
    )
    found: list[tuple[int, str]] = []
    # the first date of a range takes the year written once, after the last: "from April 3rd
    # to April 5th 2023" (live_simple_120-76-0), "March 3rd to 5th, 2023"
    day = r"(\d{1,2})(?:st|nd|rd|th)?"
    ranged = (
        rf"\b({month})\.?\s+{day}\s*(?:to|through|until|till|and|-|–)\s*"
        rf"(?:(?:{month})\.?\s+)?\d{{1,2}}(?:st|nd|rd|th)?(?:,\s*|\s+)(\d{{4}})\b"
    )
    for match in re.finditer(ranged, text, re.IGNORECASE):
        raw_month, raw_day, year = match.groups()
        value = _iso(int(year), _MONTHS.get(raw_month.casefold(), 0), int(raw_day))
        if value:
            found.append((match.start(), value))
    for pattern, order in patterns:
        for match in re.finditer(pattern, text, re.IGNORECASE):
            parts = dict(zip(order, match.groups(), strict=True))
            raw_month = parts["m"].casefold()
            number = _MONTHS.get(raw_month) or (int(raw_month) if raw_month.isdigit() else 0)
            value = _iso(int(parts["y"]), number, int(parts["d"]))
            if value:
                found.append((match.start(), value))
    return _once([value for _, value in sorted(found)])


_TODAY = re.compile(
    r"\b(?:today(?:'s date)?|the current date|the date today)\s+is\b[^.;\n]{0,40}", re.I
)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_RELATIVE = re.compile(
    r"\b(?P<after>(?:the\s+)?day\s+after\s+tomorrow)\b|\b(?P<tomorrow>tomorrow)\b"
    r"|\b(?P<yesterday>yesterday)\b|\bin\s+(?P<days>\d{1,3})\s+days?\b"
    r"|\b(?P<next>next|upcoming|coming|this)\s+(?P<weekday>" + "|".join(_WEEKDAYS) + r")\b"
    r"|\bon\s+(?P<on>" + "|".join(_WEEKDAYS) + r")\b",
    re.I,
)


def relative_dates(text: str) -> tuple[list[str], str | None]:
    """The dates ``text`` states relative to the date it says today is ("today is Tuesday
    April 25th 2023", "today is 20230929"), in ISO form: "tomorrow" the day after, "the day
    after tomorrow" two days after, "yesterday", "in 3 days", "the upcoming Saturday" /
    "next Saturday" / "on Saturday" the first Saturday after today (BFCL live_simple_205:
    "the upcoming Saturday? Today is Tuesday April 25th 2023" → "2023-04-29"). With the
    date of today, None when the text states none: no date is taken from the clock."""
    said = _TODAY.search(text)
    today_iso = iso_dates(said.group(0))[:1] if said else []
    if not today_iso:
        return [], None
    today = date.fromisoformat(today_iso[0])
    found = []
    for match in _RELATIVE.finditer(text):
        if match["after"]:
            day = today + timedelta(days=2)
        elif match["tomorrow"]:
            day = today + timedelta(days=1)
        elif match["yesterday"]:
            day = today - timedelta(days=1)
        elif match["days"]:
            day = today + timedelta(days=int(match["days"]))
        else:
            weekday = _WEEKDAYS.index((match["weekday"] or match["on"]).casefold())
            day = today + timedelta(days=(weekday - today.weekday() - 1) % 7 + 1)
        found.append(day.isoformat())
    return _once(found), today_iso[0]


# a date's form a description states: "in the format 'DD/MM/YYYY'", "(MM-DD-YYYY)"
_DATE_FORM = re.compile(r"\b(dd|mm|yyyy)([-/.])(dd|mm)\2(yyyy|yy|dd)\b", re.IGNORECASE)
_ISO_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")


def date_form(description: str) -> str | None:
    """The form of a date a parameter's description asks for, when it is not ISO's:
    "The date of departure, in the format DD/MM/YYYY" → "DD/MM/YYYY"; None for
    "YYYY-MM-DD" or no form."""
    match = _DATE_FORM.search(description)
    if match is None:
        return None
    form = match.group(0).upper()
    return None if form.startswith("YYYY") else form


def in_date_form(iso: str, form: str) -> str:
    """An ISO date ("2024-03-16") written in ``form`` ("DD/MM/YYYY" → "16/03/2024");
    anything that is no ISO date as it is."""
    match = _ISO_DATE.fullmatch(iso)
    if match is None:
        return iso
    year, month, day = match.groups()
    parts = {"YYYY": year, "YY": year[2:], "MM": month, "DD": day}
    return re.sub(r"YYYY|YY|MM|DD", lambda m: parts[m.group(0)], form)


# a time of day with a 12-hour mark: "11 PM", "5:30 pm", "7 a.m."
_CLOCK = re.compile(r"\b(\d{1,2})(?:[:.](\d{2}))?\s*([ap])\.?\s?m\b\.?", re.IGNORECASE)
_TIME_PARAM = re.compile(r"\btime\b|\bhours?\b|hh:mm|24[- ]hour", re.IGNORECASE)


def clock_times(name: str, spec: dict[str, Any], text: str) -> list[Any]:
    """The times of day ``text`` writes with am/pm, in the form a time parameter takes: a
    string "HH:MM" ("HH:MM:SS" when its description says so: "5:30 pm" → "17:30"), an
    integer hour when its description counts in 24 hours ("opens until at least 11 PM" →
    23). Nothing for a parameter that is no time (by its name or description)."""
    description = str(spec.get("description") or "")
    if not _TIME_PARAM.search(f"{name_words(name)} {description}"):
        return []
    kinds = value_kinds(spec) - {"null"}
    found: list[Any] = []
    for match in _CLOCK.finditer(text):
        hour, minute = int(match.group(1)), int(match.group(2) or 0)
        if not (1 <= hour <= 12 and minute < 60):
            continue
        hour = hour % 12 + (12 if match.group(3).casefold() == "p" else 0)
        if kinds == {"string"}:
            seconds = ":00" if "HH:MM:SS" in description.upper() else ""
            found.append(f"{hour:02d}:{minute:02d}{seconds}")
        elif kinds <= {"integer", "number"} and re.search(r"24[- ]hour", description, re.I):
            found.append(hour)
    return _once(found)


def unit_numbers(text: str) -> list[int | float]:
    """Numbers with their units, currency signs or thousands separators stripped ("9.8
    m/s^2" → 9.8, "$1,200" → 1200, "15kg" → 15)."""
    out: list[int | float] = []
    for match in re.finditer(
        r"(?<![\w^./])[$€£¥]?\s?(-?\d{1,3}(?:,\d{3})+|-?\d+(?:\.\d+)?)(?=[a-zA-Z%°/^\s,;)]|\.(?!\d)|$)",
        text,
    ):
        raw = match.group(1).replace(",", "")
        value = float(raw)
        out.append(int(value) if value.is_integer() and "." not in raw else value)
    return _once(out)


_SCALE_WORDS = {
    "k": 1_000, "thousand": 1_000, "m": 1_000_000, "mn": 1_000_000, "million": 1_000_000,
    "bn": 1_000_000_000, "billion": 1_000_000_000, "trillion": 1_000_000_000_000,
}  # fmt: skip
_SCALED = re.compile(
    r"(?<![\w.])[$€£¥]?(\d+(?:\.\d+)?)\s?(k|mn|m|bn|thousand|million|billion|trillion)\b",
    re.IGNORECASE,
)


def _scales(match: re.Match[str]) -> bool:
    """Whether a number and the word after it are a scaled number: a bare "m" or "k" only
    after a currency sign ("5 m" is five metres, "298K" is Kelvin, "$2.5k" is 2500)."""
    return match.group(2).casefold() not in ("m", "k") or match.group(0)[0] in "$€£¥"


def scaled_numbers(text: str) -> list[int | float]:
    """Numbers written with a scale word ("213 million" → 213000000, "8.5 million" →
    8500000, "$2.5k" → 2500). A bare "m" or "k" scales only after a currency sign: "5 m" is
    five metres, "298K" is Kelvin."""
    out: list[int | float] = []
    for match in _SCALED.finditer(text):
        word = match.group(2).casefold()
        if not _scales(match):
            continue
        value = round(float(match.group(1)) * _SCALE_WORDS[word], 6)
        out.append(int(value) if value.is_integer() else value)
    return _once(out)


def scaled_away(text: str) -> list[int | float]:
    """The numbers ``text`` writes only with a scale word: 213 of "213 million" (which is
    213000000, ``scaled_numbers``), not 213 when "213 people" is written too."""
    scaled = [match.group(1) for match in _SCALED.finditer(text) if _scales(match)]
    out: list[int | float] = []
    for written in _once(scaled):
        every = re.findall(rf"(?<![\d.,]){re.escape(written)}(?!\.?\d)", text)
        if len(every) == scaled.count(written):
            value = float(written)
            out.append(int(value) if value.is_integer() else value)
    return out


# the options a description lists: quoted ("'gas' refers to ...") or after a cue ("e.g.
# king size, queen size, deluxe, suite etc."), up to the end of the sentence or bracket
_LISTED = re.compile(
    r"(?:\be\.\s?g\.?|\bi\.\s?e\.|\bfor example\b|\bsuch as\b|\boptions?(?:\s+(?:are|include))?"
    r"\s*:|\bone of\b|\bpossible values?(?:\s+(?:are|include))?\s*:?|\bcan be\b)"
    r"[\s:,]*([^.;()]*(?:\.(?!\s|$)[^.;()]*)*)",
    re.IGNORECASE,
)
_OPTION_SPLIT = re.compile(r"\s*(?:,|\bor\b|\band\b|\betc\b\.?)\s*", re.IGNORECASE)
# "csv/json", "Celsius/Fahrenheit" are two options; "data/sales.csv" is one path
_ALTERNATIVES = re.compile(r"[^\W\d_]+(?:/[^\W\d_]+)+")


def _described_options(description: str) -> list[str]:
    found = [g for m in QUOTED.finditer(description) for g in m.groups() if g]
    for match in _LISTED.finditer(description):
        for part in _OPTION_SPLIT.split(match.group(1)):
            part = part.strip(_EDGE + " ")
            if _ALTERNATIVES.fullmatch(part):
                found += part.split("/")
            elif part and len(part.split()) <= _MAX_SPAN_WORDS:
                found.append(part)
    return _once([f.strip() for f in found if len(f.strip()) >= 2])


def stated_options(
    description: str, question: str, *, exact_case: bool = False, least: int = 1
) -> list[str]:
    """The options ``description`` lists (quoted, or after "e.g.", "such as", "Options:",
    "one of") that ``question`` states as whole words, in the description's spelling: "a
    gas-powered vehicle" states 'gas' of "'gas' refers to a gasoline vehicle". ``least``:
    the fewest options the description must list (2: a single example, "e.g. HSBC", shows a
    form and closes no set). Options of one letter are left out ("a" is a word of most
    questions), and an option stated only inside a path or name counts for nothing
    ("sales.csv" in "data/sales.csv"). A plural option is stated by its singular too ("in
    mile" states 'miles'). ``exact_case``: stated as the description writes them ("my bot"
    does not state 'Bot')."""
    options = _described_options(description)
    if len(options) < least:
        return []
    text = question if exact_case else question.casefold()

    def stated(option: str) -> bool:
        # in the singular too: "in mile" states 'miles'
        for form in dict.fromkeys([option, *singular_names([option])]):
            written = form if exact_case else form.casefold()
            if re.search(rf"(?<![\w/\\.]){re.escape(written)}(?![\w/\\])", text):
                return True
        return False

    return [option for option in options if stated(option)]


_AT_REST = re.compile(
    r"\b(?:dropped|from rest|at rest|released|starts? from zero|starting from rest)\b", re.I
)


def implied_numbers(text: str) -> list[int]:
    """Numbers a question implies without writing them: "dropped" or "from rest" → 0 (an
    initial velocity)."""
    return [0] if _AT_REST.search(text) else []


# "the largest", "the most", "which ... has the highest": one thing is asked for
_ONE_SUPERLATIVE = re.compile(
    r"\b(?:the|which\s+\w+\s+(?:has|had|is|was|sold|got))\s+(?:single\s+)?"
    r"(?:most|least|fewest|largest|biggest|highest|greatest|smallest|lowest|best|worst|top)\b"
    r"|最(?:多|少|大|小|高|低)",
    re.IGNORECASE,
)


def implied_count(text: str) -> list[int]:
    """A count the question implies: one thing asked for by a superlative ("which product
    has the largest units value" → 1 row), only when the question writes no number."""
    if re.search(r"\d", text) or number_words(text):
        return []
    return [1] if _ONE_SUPERLATIVE.search(text) else []


def number_candidates(text: str) -> list[int | float]:
    """Every normalised number of ``text`` (after the numbers written as digits, which the
    caller finds): number words, percentages as fractions, numbers with units stripped,
    implied zeros, and the one a superlative implies."""
    return _once(
        [
            *unit_numbers(text),
            *scaled_numbers(text),
            *number_words(text),
            *percentages(text),
            *implied_numbers(text),
            *implied_count(text),
        ]
    )


# words of a flag's name that say nothing about what it switches
_FLAG_WORDS = {"include", "includes", "including", "is", "has", "have", "use", "with", "enable",
               "enabled", "show", "add", "allow", "want", "need", "get", "return", "flag", "do",
               "should", "can", "to", "the", "a", "an", "of", "in", "and", "or"}  # fmt: skip
_WITH = r"(?:with|including|include|includes|plus|and\s+also)"
_WITHOUT = r"(?:without|excluding|exclude|excludes|no|not|minus|except)"


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


_SMALL_FIRST = re.compile(
    r"\b(?:smallest|lowest|least|fewest|cheapest|minimum|bottom|ascending)\b|最(?:少|小|低)", re.I
)
_LARGE_FIRST = re.compile(
    r"\b(?:largest|biggest|highest|most|greatest|maximum|top|best|descending)\b|最(?:多|大|高)",
    re.I,
)


def _order_cue(words: list[str], text: str) -> bool | None:
    """An order flag (``ascending``, ``descending``, ``reverse``) from the superlative the
    question uses: "the largest" ranks from the top (``ascending=False``), "the lowest" from
    the bottom. None for other flags, or when the question says neither (or both)."""
    if "ascending" in words or "asc" in words:
        small_first = True
    elif {"descending", "desc", "reverse"} & set(words):
        small_first = False
    else:
        return None
    small, large = bool(_SMALL_FIRST.search(text)), bool(_LARGE_FIRST.search(text))
    if small == large:
        return None
    return small if small_first else large


def boolean_cue(name: str, text: str) -> bool | None:
    """True when ``text`` asks "with" the thing a boolean parameter ``name`` switches
    ("with tax" for ``include_tax``, "including images" for ``with_images``), False when it
    asks "without" it, None when it says neither. The thing is the name's words other than
    the switching verbs (``include``, ``is``, ``show``...)."""
    words = [w.lower() for w in re.split(r"[_\W]+|(?<=[a-z])(?=[A-Z])", name) if w]
    order = _order_cue(words, text)
    if order is not None:
        return order
    things = [_stem(w) for w in words if w.lower() not in _FLAG_WORDS]
    if not things:
        return None
    thing = r"\W+(?:\w+\W+){0,2}?" + r"\W+".join(rf"{re.escape(t)}s?" for t in things) + r"\b"
    folded = text.lower()
    if re.search(rf"\b{_WITHOUT}{thing}", folded):
        return False
    if re.search(rf"\b{_WITH}{thing}", folded):
        return True
    return None


# units of measure a number may carry ("5cm", "10 units", "20 miles"); the one-letter ones
# only attached ("5m": "5 m" and "10 in the box" are too often something else)
_SHORT_UNITS = r"m|g|l"
_UNITS_OF_MEASURE = (
    r"mm|cm|km|ft|yd|mi|miles?|meters?|metres?|kilometers?|centimeters?|millimeters?|"
    r"inch(?:es)?|feet|foot|yards?|kg|mg|lbs?|pounds?|ounces?|oz|grams?|kilograms?|units?|"
    r"liters?|litres?|ml|seconds?|minutes?|hours?|days?|celsius|fahrenheit|kelvin|°[CF]?"
)
_MEASURE = re.compile(
    rf"(?<![\w.])\d+(?:\.\d+)?(?:({_SHORT_UNITS})|\s*({_UNITS_OF_MEASURE}))(?![\w°])",
    re.IGNORECASE,
)
_UNIT_WORD = re.compile(rf"(?:{_SHORT_UNITS}|{_UNITS_OF_MEASURE})", re.IGNORECASE)
UNIT_NAME = re.compile(r"(?:^|_)units?$", re.IGNORECASE)


def is_unit(text: str) -> bool:
    """Whether ``text`` is a unit of measure on its own ("meters", "cm", "units")."""
    return bool(_UNIT_WORD.fullmatch(text.strip()))


_IN_UNITS = re.compile(rf"\b(?:in|into|to)\s+({_UNITS_OF_MEASURE})(?![\w°])", re.IGNORECASE)


def stated_units(text: str) -> list[str]:
    """The units of measure the numbers of ``text`` carry, as written, and those it asks its
    answer in: "a radius of 5cm" → ["cm"], "a base of 10 units" → ["units"], "the distance
    in kilometers" → ["kilometers"]. The values a ``unit`` parameter may take."""
    carried = [m.group(1) or m.group(2) for m in _MEASURE.finditer(text)]
    return _once([*carried, *(m.group(1) for m in _IN_UNITS.finditer(text))])


def names_a_month(name: str, spec: dict[str, Any], text: str) -> bool:
    """Whether ``text`` writes a month's name ("in December") for a parameter that is a
    month by its name (``month``, ``start_month``)."""
    if "month" not in _parameter_words(name) or value_kinds(spec) - {"null"} != {"string"}:
        return False
    return any(w in _MONTHS and len(w) > 3 for w in re.findall(r"[a-z]+", text.casefold()))


# words a description opens with before the thing it names: "The total solar panel area"
# names an area ("a total of 100 wind turbines" is no area: BFCL parallel_multiple_70)
_DESCRIPTION_OPENING = frozenset(
    re.findall(
        r"\w+",
        """optional required the a an this desired given specified expected total estimated
        approximate overall average""",
    )
)


def described_number(spec: dict[str, Any], text: str) -> int | float | None:
    """The number ``text`` writes right beside the thing a number parameter's description
    opens with: "a 0.3 probability of winning" or "a probability of 0.3" for "The
    probability of success on any given trial" → 0.3; None when it writes none there."""
    kinds = value_kinds(spec) - {"null"}
    if not kinds or not kinds <= {"number", "integer"}:
        return None
    words = re.findall(r"[a-z]+", str(spec.get("description") or "").casefold())
    head = next((w for w in words if w not in _DESCRIPTION_OPENING), None)
    if head is None or len(head) < 4 or head in _EDGE_WORDS:
        return None
    number = r"(-?\d+(?:\.\d+)?)"
    found = re.search(
        rf"(?<![\w.]){number}\s+{head}\b|\b{head}\s+(?:of|is|=|:)\s+{number}(?![\w.]*\d)",
        text.casefold(),
    )
    if found is None:
        return None
    written = found.group(1) or found.group(2)
    value = float(written)
    if "integer" in kinds and "number" not in kinds:
        return int(value) if value.is_integer() else None
    return int(value) if "." not in written else value


def described_switch(spec: dict[str, Any], text: str) -> bool | None:
    """A boolean parameter whose description ``text`` echoes: two content words written
    together in both ("Option to get additional information like Director, Cast" in
    "retrieve additional information like Director", "use the latest exchange rate" in
    "using current exchange rate"): True, False after a negation ("without the additional
    information"); None when no such pair is shared."""
    if value_kinds(spec) - {"null"} != {"boolean"}:
        return None
    described = re.findall(r"[a-z]+", str(spec.get("description") or "").casefold())
    pairs = {
        (_stem(a), _stem(b))
        for a, b in itertools.pairwise(described)
        if a not in _EDGE_WORDS and b not in _EDGE_WORDS and len(a) > 2 and len(b) > 2
    }
    words = re.findall(r"[a-z]+", text.casefold())
    for i, (a, b) in enumerate(itertools.pairwise(words)):
        if (_stem(a), _stem(b)) in pairs:
            before = words[max(0, i - 3) : i]
            return not any(re.fullmatch(_WITHOUT, w) for w in before)
    return None


# verbs a parameter's name may open with that say nothing of what it is about
_NAME_VERBS = frozenset(["calculate", "compute", "find", "fetch", "list", "display"])


def _parameter_words(name: str) -> list[str]:
    """The words of a parameter's name that say what it is about: not its switching verbs,
    none under three letters (``include_human_impact`` → human, impact)."""
    words = [w.lower() for w in _NAME_SPLIT.split(name) if w]
    return [w for w in words if len(w) > 2 and w not in _FLAG_WORDS and w not in _NAME_VERBS]


def _starts_alike(word: str, other: str) -> bool:
    """Whether ``other`` (a word of the question) has the stem of ``word`` (a word of a
    parameter's name): "detail" and "detailed", "influences" and "influence",
    "precipitation" and "precipitations"; not a shorter word that only begins it ("time" is
    no "timezone")."""
    a = word if len(word) <= 4 else word[: max(4, len(word) - 3)]
    b = other if len(other) <= 4 else other[: max(4, len(other) - 3)]
    return other.startswith(a) or (len(other) >= max(4, len(word) - 3) and word.startswith(b))


# a bound a parameter's name states ("maxCalories", "min_rating") and the words that state it
# in a question ("less than 500 calories", "rated at least 4")
_UPPER_BOUND = re.compile(
    r"\b(?:less|fewer|lower|cheaper|shorter|smaller)\s+than\b|\b(?:under|below|within"
    r"|up\s+to|at\s+most|no\s+more\s+than|not\s+more\s+than|not\s+exceeding)\b"
    r"|\bor\s+(?:less|fewer|under|below)\b",
    re.I,
)
_LOWER_BOUND = re.compile(
    r"\b(?:more|greater|higher|larger|longer|bigger)\s+than\b|\b(?:over|above|at\s+least"
    r"|no\s+less\s+than|not\s+less\s+than)\b|\bor\s+(?:more|over|above|higher)\b",
    re.I,
)
_BOUND_WORDS = {"max": _UPPER_BOUND, "maximum": _UPPER_BOUND, "min": _LOWER_BOUND,
                "minimum": _LOWER_BOUND}  # fmt: skip


def names_parameter(name: str, text: str) -> bool:
    """Whether ``text`` names a parameter in its own words, loosely: each word of the name
    that says what it is about (``_parameter_words``) shares a stem with a word of the text
    ("with detailed description" names ``detail``, "how many years ago" names
    ``calculate_years_ago``, "with their religious history and influences" names
    ``include_influences``); a bound in the name is named by the words of a bound ("less
    than 500 calories" names ``maxCalories``, "at least 4 stars" ``min_stars``). An
    optional parameter the question names is filled: on BFCL's development split
    (simple_python, multiple, parallel, parallel_multiple, live_simple), of the 24 named
    only this way 14 had to be given, 9 could be given or left out, 1 had to be left out."""
    things = _parameter_words(name)
    words = re.findall(r"[a-z]+", text.lower())

    def named(thing: str) -> bool:
        bound = _BOUND_WORDS.get(thing)
        return any(_starts_alike(thing, w) for w in words) or bool(bound and bound.search(text))

    return bool(things) and all(named(t) for t in things)


def named_switch(name: str, text: str) -> bool | None:
    """A boolean parameter that ``text`` names (``names_parameter``): True, False when a
    negation comes just before its words ("if we do not include the impact of human
    activities" for ``include_human_impact``); None when the text does not name it."""
    if not names_parameter(name, text):
        return None
    things = _parameter_words(name)
    folded = text.lower()
    for match in re.finditer(rf"\b{_WITHOUT}\b((?:\W+\w+){{1,4}})", folded):
        if any(_starts_alike(t, w) for t in things for w in re.findall(r"[a-z]+", match.group(1))):
            return False
    return True


# --- table columns ------------------------------------------------------------------------------

# a parameter that names a column to group by, and one that names the column to measure
_GROUP_PARAM = re.compile(r"(?:^|_)(?:group|groupby|group_by|partition|per)(?:_|$)", re.I)
_MEASURE_PARAM = re.compile(
    r"^(?:column|col|field|metric|value_column|sort_by|order_by|rank_by)$", re.I
)
_GROUP_CUE = re.compile(r"\b(?:per|each|every|by|broken\s+down\s+by)\s+", re.I)
_MEASURE_CUE = re.compile(
    r"\b(?:most|highest|largest|biggest|greatest|lowest|smallest|least|fewest|top(?:\s+\d+)?"
    r"|total|sum|add\s+up|average|mean|median|maximum|minimum|max|min)\s+",
    re.I,
)
# words between a cue and the column: "the sum of the units", "the largest units value"
_COLUMN_FILLER = frozenset(
    re.findall(r"\w+", "the a an of all total number amount value values sold in for")
)


def _word_after(cue: re.Pattern[str], text: str) -> str | None:
    for match in cue.finditer(text):
        for word in re.findall(r"[^\W\d]\w*", text[match.end() :])[:3]:
            if word.lower() not in _COLUMN_FILLER:
                return word
    return None


def column_cue(name: str, text: str) -> str | None:
    """The column a question names for a table parameter, in its own words: the word after
    "per", "each" or "by" for a group parameter ("units for each product" → ``product``),
    the word after a superlative or an aggregate for the measured one ("sold the most
    units", "add up the units" → ``units``). None for other parameters, or no such word."""
    if _GROUP_PARAM.search(name):
        return _word_after(_GROUP_CUE, text)
    if _MEASURE_PARAM.search(name):
        return _word_after(_MEASURE_CUE, text)
    return None


# --- search queries ----------------------------------------------------------------------------

# a parameter that takes what to look for
_QUERY_PARAM = re.compile(
    r"^(?:q|query|queries|keywords?|search(?:_term|_query|_text)?|term|pattern|needle)$", re.I
)
# words that ask for a search rather than say what to look for
_ASKING = frozenset(
    re.findall(
        r"\w+",
        "which what where who find search look show tell me the a an in on for of that about "
        "any all mention mentions mentioned mentioning talk talks talking say says said "
        "contain contains containing is are does do named called word words read open then "
        "and with from",
    )
)


_PLACE_WORDS = frozenset(
    re.findall(
        r"\w+",
        """city location loc place destination origin address town country region venue""",
    )
)
# no place: an amount ("$300"), a number, a date ("2022-12-25"), a clock time
_NOT_A_PLACE = re.compile(r"^[\W\d_]*$|[$€£¥]|^\d{4}-\d{2}-\d{2}$|^\d{1,2}:\d{2}")


def wants_a_place(name: str) -> bool:
    """Whether a parameter takes a place by its name (``city``, ``loc``,
    ``departure_location``)."""
    return bool(set(name_words(name).casefold().split()) & _PLACE_WORDS)


# an address may be an e-mail, IP or wallet address, a region "us-east-1": no place name
_NAMED_PLACE_WORDS = _PLACE_WORDS - {"address", "region"}


def wants_a_place_name(name: str) -> bool:
    """Whether a parameter takes a place a question names (``city``, ``location``,
    ``from_city``; not ``ip_address`` or ``region``)."""
    return bool(set(name_words(name).casefold().split()) & _NAMED_PLACE_WORDS)


# a secret a parameter takes: password, api_key, auth_token, pin_code, client_secret (not
# a count of a model's tokens: token_count)
_SECRET_PARAM = re.compile(
    r"\b(?:password|passwd|passcode|passphrase|pin|secret|otp|api\s*key|apikey|access\s*key"
    r"|token(?!\s+(?:count|limit|usage|budget|number|type)))\b",
    re.IGNORECASE,
)
# a secret named in a question ("the password", "API key", "YOUR_API_KEY"), a value that
# can be one (quoted, or with a digit or a sign), and words that say it is not in hand
_SECRET_NAME = re.compile(
    r"(?<![A-Za-z])(?:password|passwd|passcode|passphrase|pin|secret|token|otp"
    r"|api[\s_-]*key|access[\s_-]*key)(?![A-Za-z])|密码|口令|令牌|密钥",
    re.IGNORECASE,
)
_SECRET_VALUE = re.compile(r"[\"'`‘“][^\"'`’”]+[\"'`’”]|\S*[\d#@$%!&*_\-]\S*")
_SECRET_MISSING = re.compile(
    r"\b(?:forgot|forgotten|forget|lost|(?:don'?t|do\s+not|can'?t|cannot)\s+"
    r"(?:have|know|remember|find))\b|忘",
    re.IGNORECASE,
)


def wants_a_secret(name: str) -> bool:
    """Whether a parameter takes a secret (``password``, ``api_key``, ``auth_token``): a
    value nobody may invent."""
    return bool(_SECRET_PARAM.search(name_words(name)))


def states_a_secret(text: str) -> bool:
    """Whether ``text`` states a secret: it names one and holds a value that can be one
    ("the password is 'jDoe#456'", "'secure*pass123' as the password", "API key is
    12344"), and does not say it is not in hand ("I've forgotten my password. Could you
    log me in with my username 'john_doe'?")."""
    return (
        bool(_SECRET_NAME.search(text))
        and bool(_SECRET_VALUE.search(text))
        and not _SECRET_MISSING.search(text)
    )


# a person a parameter names: player, author, artist_name, person_name (not a handle or an
# identifier: username, user_id, employee_id; not a recipient, who may be an address)
_PERSON_WORDS = frozenset(
    re.findall(
        r"\w+",
        """player athlete author artist actor actress singer musician composer director
        painter writer poet inventor scientist celebrity person""",
    )
)
_NOT_A_PERSON_NAME = frozenset({"id", "ids", "handle", "username", "email", "count", "type"})
# a word of two letters or more, a proper name when it opens with a capital (accents too:
# "Käärijä", "Édith")
_CAPITALISED = re.compile(r"\b[^\W\d_]{2,}")
# a person named in lower case after the word that says who made it: "songs by kesha"
_BY_SOMEONE = re.compile(r"\bby\s+[^\W\d_]{2,}", re.IGNORECASE)
_ANY_CJK = re.compile(f"[{CJK}]")
# an opener whose "'s" is a contraction, no possessive: "What's", "Let's", "It's"
_NO_NAME_OPENERS = frozenset(
    re.findall(r"\w+", "what who where when why how which it that there here let he she this")
)
# a quoted name: the quote opens after no letter ("What's the player's score" quotes none)
_QUOTED_NAME = re.compile(r"(?<![^\W\d_])[\"'`‘“][^\"'`’”\d]{2,}[\"'`’”](?![^\W\d_])")


def wants_a_person_name(name: str) -> bool:
    """Whether a parameter takes a person's name (``player``, ``author``, ``artist_name``,
    ``person_name``; not ``user_id``, ``username`` or ``player_count``)."""
    words = set(name_words(name).casefold().split())
    return bool(words & _PERSON_WORDS) and not words & _NOT_A_PERSON_NAME


def names_a_person(text: str) -> bool:
    """Whether ``text`` can name a person: a proper name inside a sentence ("the assist
    average of LeBron James"), one that opens it when another or a possessive follows
    ("LeBron James scored", "Messi's goals"), a quoted name ("'Adriel'"), a name after
    "by" ("songs by kesha"), or Chinese text. "Who won the chess tournament in 2015?"
    names none: a ``player`` parameter would take "2015" or "chess"."""
    if _ANY_CJK.search(text) or _QUOTED_NAME.search(text) or _BY_SOMEONE.search(text):
        return True
    for match in _CAPITALISED.finditer(text):
        if not match.group()[0].isupper():
            continue
        before = text[: match.start()].rstrip()
        if before and before[-1] not in ".!?\"'“‘":
            return True
        after = text[match.end() :]
        if match.group().casefold() in _NO_NAME_OPENERS:
            continue  # "What's", "Let's", "It's": no possessive
        following = re.match(r"\s+([^\W\d_]{2,})", after)
        if re.match(r"['’]s\b", after) or (following and following.group(1)[0].isupper()):
            return True
    return False


# a season or a year written as text: "2020-2021", "the 2022 season", "this season",
# "in spring"
_PERIOD_PARAM = frozenset({"season", "year"})
_STATES_A_PERIOD = re.compile(
    r"\d|\b(?:spring|summer|autumn|fall|winter)\b|"
    r"\b(?:this|current|last|next|previous|upcoming|coming)\s+(?:season|year)\b|今年|去年|明年|赛季",
    re.IGNORECASE,
)


def wants_a_period(name: str, spec: dict[str, Any]) -> bool:
    """Whether a string parameter takes a season or a year (``season``, ``season_year``):
    "2020-2021", "2022", "spring"."""
    return "string" in value_kinds(spec) and bool(
        set(name_words(name).casefold().split()) & _PERIOD_PARAM
    )


def states_a_period(text: str) -> bool:
    """Whether ``text`` states a season or a year: a number, a season of the year, or one
    counted from now ("this season", "last year"). "What is the assist average of LeBron
    James?" states none: a ``season`` would take "basketball"."""
    return bool(_STATES_A_PERIOD.search(text))


def is_no_place(value: Any) -> bool:
    """Whether ``value`` cannot be a place: not a string, or an amount, a number, a date or a
    time ("$300" was the lawyer's city in BFCL's parallel_multiple_145, development split)."""
    return not isinstance(value, str) or bool(_NOT_A_PLACE.search(value.strip()))


def wants_a_query(name: str) -> bool:
    """Whether a parameter takes the text to look for (``query``, ``keyword``, ``q``)."""
    return bool(_QUERY_PARAM.match(name))


# what a file is asked after: "the file that mentions the quarterly review and ...",
# "files that talk about the weather?", "a document containing the word 'budget'"
_MENTIONED = re.compile(
    r"\b(?:mentions?|mentioning|mentioned|contains?|containing|talks?\s+about|talking\s+about"
    r"|refers?\s+to|referring\s+to|discuss(?:es|ing)?|is\s+about|are\s+about)\s+"
    r"(?:the\s+(?:words?|phrase|term)\s+)?(?:the\s+|a\s+|an\s+)?"
    r"[\"'“‘]?(?P<topic>[^\"'”’?.!,;:]+?)[\"'”’]?"
    r"(?=\s+(?:and|then|so|to|in|inside|within|from)\b|\s*[?.!,;:]|\s*$)",
    re.IGNORECASE,
)


# a condition on a column, stated in words: "where the region is West", "with units above
# 10", "whose price is at least 5", "region equal to East"
_COMPARISONS = (
    (r"(?:is\s+|are\s+|of\s+)?(?:(?:greater|more|larger|higher|bigger)\s+than|above|over)", ">"),
    (r"(?:is\s+|are\s+|of\s+)?(?:(?:less|fewer|smaller|lower)\s+than|below|under)", "<"),
    (r"(?:is\s+|are\s+|of\s+)?(?:at\s+least|no\s+less\s+than)", ">="),
    (r"(?:is\s+|are\s+|of\s+)?(?:at\s+most|no\s+more\s+than)", "<="),
    (r"is\s+not|are\s+not|isn't|aren't|not\s+equal\s+to", "!="),
    (r"is\s+equal\s+to|equal\s+to|equals?|is|are|==|=", "=="),
)
_CONDITION = re.compile(
    r"\b(?:where|with|whose|when|for\s+which|that\s+have|having|if)\s+"
    r"(?:the\s+|a\s+|an\s+|its\s+)?(?P<column>[A-Za-z_]\w*)\s+(?P<op>{ops})\s+"
    r"(?:the\s+|a\s+|an\s+)?[\"'“‘]?(?P<value>-?\d+(?:\.\d+)?(?![\w.]\w)"
    r"|[A-Za-z][\w-]*(?:\s+(?-i:[A-Z])[\w-]*)*)[\"'”’]?".format(
        ops="|".join(f"(?:{pattern})" for pattern, _ in _COMPARISONS)
    ),
    re.IGNORECASE,
)
_CONDITION_PARAM = re.compile(
    r"^(?:filters?|where|where_clause|conditions?|predicate|filter_expr(?:ession)?)$", re.I
)


def takes_a_condition(name: str, spec: dict[str, Any]) -> bool:
    """Whether a parameter takes a condition on a column: named for one (``filter``,
    ``where``, ``condition``) or described with a comparison written out (``==``)."""
    return bool(_CONDITION_PARAM.match(name)) or "==" in str(spec.get("description") or "")


def stated_conditions(question: str) -> list[str]:
    """The conditions the question states in words, written ``column op value`` as a
    filter parameter takes them: "Show the rows where the region is West" →
    ``region == "West"``, "rows with units above 10" → ``units > 10``."""
    out = []
    for match in _CONDITION.finditer(question):
        said = match.group("op")
        op = next(o for pattern, o in _COMPARISONS if re.fullmatch(pattern, said, re.I))
        value = match.group("value")
        number = re.fullmatch(r"-?\d+(?:\.\d+)?", value) is not None
        if not number and op not in ("==", "!="):
            continue  # "above West" compares nothing
        written = value if number else json.dumps(value, ensure_ascii=False)
        condition = f"{match.group('column')} {op} {written}"
        if condition not in out:
            out.append(condition)
    return out


def mentioned_topic(question: str) -> str | None:
    """What the question asks a file to mention ("Find the file that mentions the quarterly
    review and tell me what time it starts": "quarterly review"), at most six words."""
    match = _MENTIONED.search(question)
    if match is None:
        return None
    topic = match.group("topic").strip()
    return topic if topic and len(topic.split()) <= 6 else None


def is_a_topic(value: str, tool_words: set[str]) -> bool:
    """Whether ``value`` can be what a search looks for: it starts and ends with a word that
    neither asks for the search ("which", "mentions") nor names what the tool already
    searches ("file", "workspace" for a workspace file search). "Which file in the workspace
    mentions the team outing?" gave ``query="file"``; its topic is "team outing"."""
    words = [w.lower() for w in re.findall(r"[^\W_]+", value)]
    if not words:
        return False

    def plain(word: str) -> bool:
        return word in _ASKING or word in tool_words or word.rstrip("s") in tool_words

    return not plain(words[0]) and not plain(words[-1])


def is_chinese(value: Any) -> bool:
    """Whether ``value`` is text written mostly in Chinese characters."""
    return isinstance(value, str) and cjk_share(value) > 0.5


def names_the_tool_in(words: str, tool_words: set[str]) -> bool:
    """Whether a run of Chinese ``words`` only says what the tool works on: each word has an
    English sense among ``tool_words`` (文件 "file" for a file search; 团队出游 says what
    to look for)."""
    glossed = gloss_words(words)
    return bool(glossed) and all(
        any(
            w in tool_words or f"{w}s" in tool_words
            for sense in senses
            for w in re.findall(r"[a-z]+", sense.lower())
            if len(w) >= 3
        )
        for _, senses in glossed
    )


# --- arithmetic expressions --------------------------------------------------------------------

# a whole value that is an arithmetic expression ("2.5 * 40", "144 / 12 - 3")
EXPRESSION = re.compile(rf"^(?:{_FORMULA.pattern})$")
_EXPRESSION_WORDS = re.compile(r"\bexpression|\bformula\b", re.IGNORECASE)
_N = r"(-?\d+(?:\.\d+)?)"
# a number of a word problem, not part of a name ("notes2.txt") or a date ("2026-12-05")
_NUMBER_IN_TEXT = re.compile(r"(?<![A-Za-z0-9_.\-/:])\d+(?:\.\d+)?(?![A-Za-z0-9_\-/:]|\.\d)")
# requests worded as verbs: "add 1234 and 4321", "subtract 3 from 10"
_VERB_FORMS = (
    (rf"\badd\s+{_N}\s+(?:and|to)\s+{_N}", r"\1 + \2"),
    (rf"\b(?:sum|total)\s+of\s+{_N}\s+and\s+{_N}", r"\1 + \2"),
    (rf"\bmultiply\s+{_N}\s+(?:by|and|with)\s+{_N}", r"\1 * \2"),
    (rf"\bproduct\s+of\s+{_N}\s+and\s+{_N}", r"\1 * \2"),
    (rf"\bdivide\s+{_N}\s+by\s+{_N}", r"\1 / \2"),
    (rf"\bsubtract\s+{_N}\s+from\s+{_N}", r"\2 - \1"),
)
# operators in words, English and Chinese
_OPERATOR_WORDS = (
    (r"\bto\s+the\s+power\s+of\b|\braised\s+to\b", " ** "),
    (r"\b(?:times|multiplied\s+by)\b|乘以|乘", " * "),
    (r"\bdivided\s+by\b|除以", " / "),
    (r"\bplus\b|加上", " + "),
    (r"\bminus\b|减去", " - "),
)


def wants_expression(name: str, spec: dict[str, Any]) -> bool:
    """Whether a string parameter asks for an arithmetic expression (``expression``, "The
    arithmetic expression to evaluate", "formula")."""
    return bool(_EXPRESSION_WORDS.search(f"{name_words(name)} {spec.get('description') or ''}"))


def formula_candidates(text: str) -> list[str]:
    """The arithmetic expressions ``text`` states, with operators in words written as
    symbols: "2.5 times 40" → ``2.5 * 40``, "144 divided by 12, minus 3" → ``144 / 12 - 3``,
    "add 1234 and 4321" → ``1234 + 4321``, "36 除以 4" → ``36 / 4``."""
    rewritten = text
    for pattern, replacement in _VERB_FORMS:
        rewritten = re.sub(pattern, replacement, rewritten, flags=re.IGNORECASE)
    for pattern, symbol in _OPERATOR_WORDS:
        rewritten = re.sub(pattern, symbol, rewritten, flags=re.IGNORECASE)
    rewritten = re.sub(r"\s*[,，]\s*(?=(?:\*\*|[-+*/])\s)", " ", rewritten)
    out: list[str] = []
    for match in _FORMULA.finditer(rewritten):
        formula = " ".join(match.group(0).split()).rstrip(".")
        if is_expression(formula) and formula not in out:
            out.append(formula)
    return out


# the operation a word problem with two numbers asks for, by its cue words: "split among"
# divides, "how many are left" subtracts, "each" / "per" multiplies, "altogether" adds
_PROBLEM_CUES = (
    (r"\b(?:split|shared?|divided|among|equally)\b|平分|平均分|分给", "/"),
    (
        r"\b(?:left|remains?|remaining|fewer|less|spent|spends?|gave|gives?|lost|loses|ate|eats?)\b"
        r"|剩|还有多少|用掉|吃了",
        "-",
    ),
    # "each", "per", or a price of one ("a ticket costs 12 dollars")
    (
        r"\b(?:each|per|every|apiece|times)\b|每"
        r"|\b(?:a|an|one)\s+\w+\s+(?:costs?|weighs?|holds?|takes?|lasts?)\b",
        "*",
    ),
    (r"\b(?:altogether|in\s+all|in\s+total|combined|together|more)\b|一共|总共|再", "+"),
)


# "it", "that number", "the result" in a request that computes with an earlier step's value
_PRONOUN = re.compile(
    r"\b(?:(?:that|this|the)\s+(?:number|value|result|count|amount|total)|it|that|this)\b"
    r"|(?:这个|那个)(?:数|数字|结果)?|它",
    re.IGNORECASE,
)
_NEAR = 3  # words either side of a number that tie it to the question


def _referring_formulas(question: str) -> list[str]:
    """The question's formulas with "that number" / "it" as a stand-in (7919), when it states
    no whole formula of its own."""
    if formula_candidates(question):
        return []
    marked = _PRONOUN.sub(" 7919 ", question)  # a stand-in no question holds
    return [f for f in formula_candidates(marked) if "7919" in f]


def refers_back(question: str) -> bool:
    """Whether the question computes with a value an earlier step gives ("then multiply that
    number by 3", "add 5 to it") and states no whole formula of its own."""
    return bool(_referring_formulas(question))


def follow_up_candidates(question: str, results: list[str]) -> list[str]:
    """Expressions for the second step of a two-step request ("read notes.txt to find how
    many rows the table has, then multiply that number by 3"): the question's formula with
    "that number" / "it" replaced by a number of the tool results. Numbers written next to
    one of the question's words ("20 rows") come first; only they are offered when there
    are some."""
    formulas = _referring_formulas(question)
    if not formulas:
        return []
    asked = {w.lower() for w in re.findall(r"[^\W\d_]{3,}", question)}
    near: list[str] = []
    rest: list[str] = []
    for text in results:
        words = re.findall(r"\S+", text)
        for i, word in enumerate(words):
            number = _NUMBER_IN_TEXT.fullmatch(word.strip("(),;.!?"))
            if number is None:
                continue
            around = " ".join(words[max(0, i - _NEAR) : i] + words[i + 1 : i + 1 + _NEAR])
            close = {w.lower() for w in re.findall(r"[^\W\d_]{3,}", around)}
            target = near if close & asked or close & {a.rstrip("s") for a in asked} else rest
            if number.group(0) not in near + rest:
                target.append(number.group(0))
    numbers = near or rest
    return [f.replace("7919", n) for f in formulas for n in numbers]


def word_problem_candidates(text: str) -> list[str]:
    """Expressions for a word problem that states two numbers and no operator: "7 boxes
    with 13 pens each" → ``7 * 13``. The cue words choose the operation (a division or
    subtraction takes the larger number first); with no cue, each of the four operations is
    a candidate for the model's likelihood to choose from. Empty unless there are exactly
    two numbers and the text states no formula of its own ("36 除以 4" is ``36 / 4``)."""
    numbers = _NUMBER_IN_TEXT.findall(text)
    if len(numbers) != 2 or formula_candidates(text):
        return []
    a, b = numbers
    first, second = sorted(numbers, key=float, reverse=True)
    for cue, op in _PROBLEM_CUES:
        if re.search(cue, text, re.IGNORECASE):
            return [f"{first} {op} {second}" if op in "-/" else f"{a} {op} {b}"]
    return [f"{a} * {b}", f"{a} + {b}", f"{first} - {second}", f"{first} / {second}"]


def is_expression(value: str) -> bool:
    """Whether ``value`` is a whole arithmetic expression with balanced brackets."""
    return bool(EXPRESSION.match(value)) and all(
        value.count(a) == value.count(b) for a, b in ("()", "[]")
    )
