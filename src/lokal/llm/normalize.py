"""Light normalisations of a question's values: candidates a parameter may want in another
form than the question writes them.

Each is a plain function of the question's text, returning the values it finds, in order of
appearance, each once. The staged decision offers them as candidates beside the values
copied verbatim, and the model's likelihood under the parameter picks among them:

- ``number_words``: "top three" → 3, "twenty-five" → 25, "a dozen" → 12;
- ``percentages``: "5%" → 5 and 0.05 (a rate is often asked as a fraction);
- ``iso_dates``: "March 10th, 2023", "10 March 2023", "2023/03/10" → "2023-03-10";
- ``unit_numbers``: "9.8 m/s^2", "$1,200", "15kg" → 9.8, 1200, 15 (units stripped);
- ``implied_numbers``: "dropped" / "from rest" → 0 (an initial velocity);
- ``boolean_cue``: "with tax" → True and "without tax" → False for ``include_tax`` (the
  value the question cues is chosen whatever the model prefers, as for an enum value).
"""

from __future__ import annotations

import re
from datetime import date

__all__ = [
    "boolean_cue",
    "implied_numbers",
    "iso_dates",
    "number_candidates",
    "number_words",
    "percentages",
    "unit_numbers",
]

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


def _iso(year: int, month: int, day: int) -> str | None:
    try:
        return date(year, month, day).isoformat()
    except ValueError:
        return None


def iso_dates(text: str) -> list[str]:
    """Dates in ISO form ("March 10th, 2023", "10 March 2023", "2023/03/10", "03/10/2023"
    read as month/day) → "2023-03-10"."""
    month = "|".join(sorted(_MONTHS, key=len, reverse=True))
    patterns = (
        (rf"\b({month})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", ("m", "d", "y")),
        (
            rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({month})\.?,?\s+(\d{{4}})\b",
            ("d", "m", "y"),
        ),
        (r"\b(\d{4})[/.-](\d{1,2})[/.-](\d{1,2})\b", ("y", "m", "d")),
        (r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b", ("m", "d", "y")),
    )
    found: list[tuple[int, str]] = []
    for pattern, order in patterns:
        for match in re.finditer(pattern, text, re.IGNORECASE):
            parts = dict(zip(order, match.groups(), strict=True))
            raw_month = parts["m"].casefold()
            number = _MONTHS.get(raw_month) or (int(raw_month) if raw_month.isdigit() else 0)
            value = _iso(int(parts["y"]), number, int(parts["d"]))
            if value:
                found.append((match.start(), value))
    return _once([value for _, value in sorted(found)])


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


_AT_REST = re.compile(
    r"\b(?:dropped|from rest|at rest|released|starts? from zero|starting from rest)\b", re.I
)


def implied_numbers(text: str) -> list[int]:
    """Numbers a question implies without writing them: "dropped" or "from rest" → 0 (an
    initial velocity)."""
    return [0] if _AT_REST.search(text) else []


def number_candidates(text: str) -> list[int | float]:
    """Every normalised number of ``text`` (after the numbers written as digits, which the
    caller finds): number words, percentages as fractions, numbers with units stripped, and
    implied zeros."""
    return _once(
        [*unit_numbers(text), *number_words(text), *percentages(text), *implied_numbers(text)]
    )


# words of a flag's name that say nothing about what it switches
_FLAG_WORDS = {"include", "includes", "including", "is", "has", "have", "use", "with", "enable",
               "enabled", "show", "add", "allow", "want", "need", "get", "return", "flag", "do",
               "should", "can", "to", "the", "a", "an", "of", "in", "and", "or"}  # fmt: skip
_WITH = r"(?:with|including|include|includes|plus|and\s+also)"
_WITHOUT = r"(?:without|excluding|exclude|excludes|no|not|minus|except)"


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def boolean_cue(name: str, text: str) -> bool | None:
    """True when ``text`` asks "with" the thing a boolean parameter ``name`` switches
    ("with tax" for ``include_tax``, "including images" for ``with_images``), False when it
    asks "without" it, None when it says neither. The thing is the name's words other than
    the switching verbs (``include``, ``is``, ``show``...)."""
    words = [w.lower() for w in re.split(r"[_\W]+|(?<=[a-z])(?=[A-Z])", name) if w]
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
