"""Lists the question writes out, and the calls they ask for together.

"The boiling and melting points of water and iron", "'Open', 'Close', 'High', and 'Low'
prices for Microsoft and Apple": a value the question writes inside a list of its kind asks
for the same call with each item of the list, and two such lists for every pair of their
items. The staged engine decides calls one at a time and often stops after the first few
(issue 21: the ``parallel`` questions); once it has, the items of each list a call took a
value from give the calls it left out (``cross_product``).

Plain functions over the question's text; nothing here scores with the model.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Any

from lokal.llm.staged.candidates import flat_values, sentences

__all__ = ["MAX_PRODUCT_CALLS", "chained", "coordinated", "cross_product", "legs"]

# The most calls a written-out product may give one reply: the profile's own ceiling for
# ``max_calls`` (which bounds the calls the model decides one by one; a product's size is
# stated by the question, not guessed)
MAX_PRODUCT_CALLS = 16

_ARTICLE = r"(?:both\s+)?(?:(?:the|a|an)\s+)?"
# items joined by commas and a last "and"/"or" ("'Open', 'Close', and 'Low'", "5, 10 and 15")
_COMMA_JOIN = r"(?:,\s+(?:and\s+|or\s+)?|\s+(?:and|or|&)\s+)" + _ARTICLE
# names and words joined by "and"/"or" only: "Los Angeles, California" is one place
_WORD_JOIN = r"\s+(?:and|or|&)\s+" + _ARTICLE
_CONJUNCTION = re.compile(r"\b(?:and|or)\b|&")
_RESPECTIVELY = re.compile(r"\brespectively\b", re.IGNORECASE)
_NUMBER_ITEM = r"(?<![\w.])\$?-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w.]*\d)"
_QUOTED_ITEM = r"['\"“][^'\"”\n]{1,80}['\"”]"
_NAME_ITEM = r"[A-Z][\w'&-]*(?:\.\w+)*(?:\s+[A-Z0-9][\w'&-]*(?:\.\w+)*)*"
_WORD_ITEM = r"[a-z][\w-]*"
# words that follow a verb, not a noun: "the review and read it" lists no "read"
_OBJECTS = frozenset(
    re.findall(
        r"\w+",
        """it them this that these those the a an its their his her my your our me us him
        to""",
    )
)
# words that join or open clauses, no item of a list ("by popularity and then ...")
_NO_ITEMS = frozenset(
    re.findall(
        r"\w+",
        """a an the in on at of to for from by with and or but is are was be do does did what
        which who how my me i it its their this that these those both each per all then also
        later next finally lastly after before""",
    )
)


def _items(value: Any, question: str) -> list[tuple[str, str, tuple[int, int]]]:
    """How ``value``'s list would be written, wherever the question writes it: the pattern
    of one item, the join between items, and where the value stands ("the shortest driving
    distance ... both the shortest and scenic routes" writes "shortest" twice)."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        found = []
        for written in re.finditer(_NUMBER_ITEM, question):
            if float(written.group().lstrip("$").replace(",", "")) != value:
                continue
            # the unit after it may follow each item: "0 meters and 1000 meters"
            unit = re.match(r"\s*([A-Za-z%]+)", question[written.end() :])
            item = _NUMBER_ITEM
            if unit and unit.group(1).casefold() not in _NO_ITEMS:
                item += r"(?:\s*" + re.escape(unit.group(1)) + ")?"
            found.append((item, _COMMA_JOIN, written.span()))
        return found
    if not isinstance(value, str) or not value.strip():
        return []
    found = []
    pattern = r"(?<!\w)" + re.escape(value.casefold()) + r"(?!\w)"
    for written in re.finditer(pattern, question.casefold()):
        start, end = written.span()
        words = question[start:end]
        if start > 0 and question[start - 1] in "'\"“":
            found.append((_QUOTED_ITEM, _COMMA_JOIN, (start - 1, end + 1)))
        elif value[0].isupper() and question[start].isupper():
            found.append((_NAME_ITEM, _WORD_JOIN, (start, end)))
        elif re.fullmatch(_WORD_ITEM, words) and words.casefold() not in _NO_ITEMS:
            found.append((_WORD_ITEM, _WORD_JOIN, (start, end)))
    return found


def _item_value(text: str, like: Any) -> Any:
    text = text.strip().strip("'\"“”").strip()
    if isinstance(like, int | float):
        number = re.match(r"\$?(-?[\d,]+(?:\.\d+)?)", text)
        if number is None:
            return None
        found = float(number.group(1).replace(",", ""))
        return int(found) if isinstance(like, int) and found.is_integer() else found
    return None if text.casefold() in _NO_ITEMS else text


def coordinated(question: str, value: Any) -> list[Any]:
    """The items of the list the question writes ``value`` in, in its order, ``value``
    among them; [] when it stands in none. "water and iron" for "iron" → ["water", "iron"];
    "at sea levels of 0 meters and 1000 meters" for 0 → [0, 1000]; "'Open', 'Close',
    'High', and 'Low'" for "Open" → the four. A list's items have one shape: numbers (with
    the value's unit word or none), quoted texts, capitalised names, single lower-case
    words; names and words are joined by "and"/"or" only ("Los Angeles, California" is one
    place), and every list has an "and"/"or" ("December 13, 2019" is no list); a word
    followed by its object is a verb ("the review and read it" lists no "read"). A question
    that pairs its lists item by item ("respectively") writes no list of alternatives. The
    first place the value stands in a list counts."""
    if _RESPECTIVELY.search(question):
        return []
    for item, join, (start, end) in _items(value, question):
        for match in re.finditer(rf"(?:{item})(?:{join}(?:{item}))+", question):
            if match.start() <= start and end <= match.end():
                if not _CONJUNCTION.search(match.group()):
                    return []
                after = re.match(r"\s+(\w+)", question[match.end() :])
                if item == _WORD_ITEM and after and after.group(1).casefold() in _OBJECTS:
                    return []  # "... the review and read it": a verb, not a second review
                items = [_item_value(part, value) for part in re.split(join, match.group())]
                return [] if None in items else items
    return []


def _fits(item: Any, spec: Any) -> tuple[bool, Any]:
    """Whether a list's ``item`` fits the parameter ``spec``, and the value it is then (an
    enum's own spelling: "shortest" → "Shortest")."""
    if not isinstance(spec, dict):
        return False, None
    if isinstance(spec.get("enum"), list):
        for option in spec["enum"]:
            if str(option).casefold() == str(item).casefold():
                return True, option
        return False, None
    kind = spec.get("type")
    if kind == "integer":
        return isinstance(item, int), item
    if kind == "number":
        return isinstance(item, int | float), item
    if kind == "string":
        return isinstance(item, str), item
    return False, None


def _listed(
    question: str,
    name: str,
    calls: list[dict[str, Any]],
    parameters: dict[str, Any],
    taken: Sequence[set[str]] = (),
) -> list[Any] | None:
    """The values of parameter ``name`` across ``calls`` (one tool's) when each is an item
    of one list the question writes: that list's items as the parameter takes them; None
    otherwise. No list holds another parameter's value ("between a human and a chimpanzee"
    is two arguments of one call) or the word of a parameter ("10 units and height of 5"),
    nor is a list one a call took whole (``taken``: the items of each list value of the
    reply's calls; "the multiples of 3 and 5" went to ``multiples=[3, 5]``, and "the first
    five primes" is no call for 3)."""
    values = [call[name] for call in calls]
    first = coordinated(question, values[0])
    if len(first) < 2:
        return None
    folded = [str(item).casefold() for item in first]
    for value in values[1:]:
        if [str(item).casefold() for item in coordinated(question, value)] != folded:
            return None
    others = {
        str(leaf).casefold()
        for call in calls
        for key, value in call.items()
        if key != name
        for leaf in flat_values(value)
    }
    properties = parameters.get("properties") or {}
    words = {w.casefold() for key in properties for w in re.findall(r"[^\W_]+", key)}
    if any(item in others or item in words for item in folded):
        return None
    if any(set(folded) <= whole for whole in taken):
        return None
    items = []
    for item in first:
        fits, taken = _fits(item, properties.get(name))
        if not fits:
            return None
        # the spelling a call used for it, where one did
        used = [v for v in values if str(v).casefold() == str(taken).casefold()]
        items.append(used[0] if used else taken)
    return items


def cross_product(
    calls: list[dict[str, Any]],
    question: str,
    parameters: dict[str, dict[str, Any]],
    limit: int = MAX_PRODUCT_CALLS,
) -> list[dict[str, Any]]:
    """``calls`` (``{"name", "args"}``, in order) with the ones the question's lists ask for
    added: for each tool, the parameters whose values are items of one written list vary
    over every item, for each combination of the other parameters' values the calls used.
    "The boiling and melting points of water and iron at 0 meters and 1000 meters" after
    (water, 0) and (iron, 1000) gives the four pairs; "'Open', 'Close', 'High', and 'Low'
    ... for Microsoft and Apple" after one call gives eight. ``parameters``: each tool's
    JSON Schema. A tool's calls stay where its first one stood; ``calls`` unchanged when no
    list adds a call or the reply would exceed ``limit`` calls."""
    tools: dict[str, list[dict[str, Any]]] = {}
    for call in calls:
        if isinstance(call.get("args"), dict):
            tools.setdefault(call["name"], []).append(call["args"])
    taken = [
        {str(leaf).casefold() for leaf in flat_values(value)}
        for args in tools.values()
        for a in args
        for value in a.values()
        if isinstance(value, list)
    ]
    made: dict[str, list[dict[str, Any]]] = {}
    for name, args in tools.items():
        shared = [key for key in args[0] if all(key in a for a in args)]
        lists: dict[str, list[Any]] = {}
        for key in shared:
            if all(isinstance(a[key], str | int | float) for a in args):
                items = _listed(question, key, args, parameters.get(name) or {}, taken)
                if items is not None:
                    lists[key] = items
        if not lists:
            continue
        groups: list[dict[str, Any]] = []
        for a in args:
            group = {key: value for key, value in a.items() if key not in lists}
            if group not in groups:
                groups.append(group)
        product = []
        for group in groups:
            for values in itertools.product(*lists.values()):
                combined = {**group, **dict(zip(lists, values, strict=True))}
                product.append({key: combined[key] for key in args[0] if key in combined})
        if len(product) > len(args):
            made[name] = product
    added = sum(len(made[n]) - len(tools[n]) for n in made)
    if not made or len(calls) + added > limit:
        return calls
    out: list[dict[str, Any]] = []
    for call in calls:
        name = call["name"]
        if name not in made:
            out.append(call)
        elif made[name]:
            out += [{"name": name, "args": args} for args in made[name]]
            made[name] = []
    return out


# "from New York to Los Angeles, then from Los Angeles to Miami": the places of a journey
_LEG_MARK = re.compile(rf"\b(from|to)\s+(?:the\s+)?({_NAME_ITEM})")


def legs(question: str) -> list[tuple[str, str]]:
    """The legs of a journey one sentence of the question writes, in order: each "to
    <Name>" goes from the last place named by "from" or reached by "to". "from New York,
    travel to Los Angeles, then from Los Angeles to Miami, and finally from Miami back to
    New York" → (New York, Los Angeles), (Los Angeles, Miami), (Miami, New York). Places
    are capitalised names. Sentences with one leg each are separate requests ("the distance
    from New York to London ... Finally, the distance from London to Paris": BFCL's
    parallel_multiple_105 asks for flights to London only), so give none."""
    out: list[tuple[str, str]] = []
    for sentence in sentences(question):
        found: list[tuple[str, str]] = []
        here: str | None = None
        for match in _LEG_MARK.finditer(sentence):
            kind, name = match.group(1), match.group(2)
            if kind == "from":
                here = name
            elif here is not None and name.casefold() != here.casefold():
                if (here, name) not in found:
                    found.append((here, name))
                here = name
        if len(found) > 1:
            out += [leg for leg in found if leg not in out]
    return out


def chained(
    calls: list[dict[str, Any]], question: str, limit: int = MAX_PRODUCT_CALLS
) -> list[dict[str, Any]]:
    """``calls`` with one call for each leg of a journey the question writes (``legs``)
    that no call has taken: a call whose two parameters hold the two ends of a leg, in
    order, is the pattern for the others (its other arguments kept). "The distance from New
    York City to Los Angeles, and then from Los Angeles to Miami" after the call for the
    first leg adds the second (BFCL's parallel_135 and _190, development split, stopped
    after the first). ``calls`` unchanged with fewer than two legs, or beyond ``limit``."""
    journey = legs(question)
    if len(journey) < 2:
        return calls

    def ends(args: dict[str, Any]) -> tuple[str, str, tuple[str, str]] | None:
        for leg in journey:
            start = [k for k, v in args.items() if isinstance(v, str) and _same(v, leg[0])]
            end = [k for k, v in args.items() if isinstance(v, str) and _same(v, leg[1])]
            if len(start) == 1 and len(end) == 1 and start != end:
                return start[0], end[0], leg
        return None

    out = list(calls)
    for call in calls:
        args = call.get("args")
        found = ends(args) if isinstance(args, dict) else None
        if found is None:
            continue
        start, end, _ = found
        at = max(i for i, c in enumerate(out) if c["name"] == call["name"]) + 1
        for leg in journey:
            if any(
                c["name"] == call["name"]
                and isinstance(c.get("args"), dict)
                and _same(str(c["args"].get(start)), leg[0])
                and _same(str(c["args"].get(end)), leg[1])
                for c in out
            ):
                continue
            made = {"name": call["name"], "args": {**args, start: leg[0], end: leg[1]}}
            out.insert(at, made)
            at += 1
    return out if len(out) <= limit else calls


def _same(value: str, place: str) -> bool:
    """Whether a call's ``value`` is ``place`` ("New York, NY" is New York)."""
    folded, name = value.casefold(), place.casefold()
    return folded == name or folded.split(",")[0].strip() == name
