"""A tool that does the opposite of what the question asks: "log out" beside ``login``.

A question and a tool can share most of their words and still ask for different things:
"What is the freezing point of water at 10 kPa?" beside ``calculate_boiling_point``,
"multiply 8.5 and 3.2" beside ``calculate_sum``, "Compute the derivative of 2x" beside
``compute_definite_integral``, "I need to log out" beside ``user_authentication.login``.
The embedding and BM25 features see them as close (the same substance, the same numbers,
the same account), and the 135M model's opening margin carries almost no weight; a call
would run the wrong computation with the question's values.

This module holds groups of words that name things of one kind which exclude each other
(the four operations of arithmetic, derivative and integral, freezing and boiling, the two
ends of a session, of a transfer or of a cipher...): a general table of contrasts, as a
thesaurus lists antonyms, not words taken from any benchmark question. A tool contradicts
a question when the question names one member of a group and no other, and the tool's name
names another member and not the question's: the name says what the tool computes, and it
is not what was asked. A tool whose name names the asked member too, or none, is no
contradiction.
"""

from __future__ import annotations

import re
from typing import Any

from lokal.llm.select import name_words

__all__ = ["contradiction"]

# each group: members that exclude each other; each member: the words (regex) that name it
_GROUPS: tuple[tuple[tuple[str, str], ...], ...] = (
    (  # "add" and "times" only before a number: "add a user", "three times a day"
        ("addition", r"sum|sums|summation|addition|plus|add(?:ing)?(?=\s+-?\d)"),
        ("multiplication", r"multiply|multiplies|multiplied|multiplication|product\s+of"),
        ("division", r"divide|divides|divided|division|quotient"),
        ("subtraction", r"subtract|subtracts|subtracted|subtraction|minus"),
    ),
    (
        ("derivative", r"derivatives?|differentiate|differentiation"),
        ("integral", r"integrals?|integrate|integration|antiderivative"),
    ),
    (("freezing", r"freezing|melting"), ("boiling", r"boiling")),
    (
        ("log in", r"log\s*in|login|logging\s+in|sign\s*in|signing\s+in"),
        ("log out", r"log\s*out|logout|logging\s+out|sign\s*out|signing\s+out"),
    ),
    (("encrypt", r"encrypt|encrypts|encryption"), ("decrypt", r"decrypt|decrypts|decryption")),
    (("upload", r"upload|uploads|uploading"), ("download", r"download|downloads|downloading")),
    (("enable", r"enable|enables|enabling"), ("disable", r"disable|disables|disabling")),
    (("deposit", r"deposit|deposits|depositing"), ("withdraw", r"withdraw|withdrawal|withdrawing")),
    (("sunrise", r"sunrise"), ("sunset", r"sunset")),
    (
        ("greatest common", r"gcd|hcf|greatest\s+common|highest\s+common"),
        ("least common", r"lcm|least\s+common\s+multiple|lowest\s+common\s+multiple"),
    ),
    (
        ("area", r"area"),
        ("perimeter", r"perimeter|circumference"),
        ("volume", r"volume"),
    ),
    (("average", r"average|arithmetic\s+mean"), ("median", r"median")),
)
_MEMBERS = tuple(
    tuple((name, re.compile(rf"\b(?:{words})\b", re.IGNORECASE)) for name, words in group)
    for group in _GROUPS
)


def _named(text: str, group: tuple[tuple[str, re.Pattern[str]], ...]) -> set[str]:
    return {name for name, pattern in group if pattern.search(text)}


def contradiction(question: str, tool: Any) -> tuple[str, str] | None:
    """``(asked, offered)`` when the question names one member of a group of contrasts and
    the tool's name another, without the question's ("multiply" beside ``calculate_sum``:
    ``("multiplication", "addition")``); ``None`` otherwise. Only the name: it says what
    the tool does, where a description may list what else it can do (lokal's calculator
    computes "sums, products, powers"). ``tool`` has a ``name``."""
    tool_name = name_words(str(getattr(tool, "name", "")))
    for group in _MEMBERS:
        asked = _named(question, group)
        if len(asked) != 1:
            continue
        offered = _named(tool_name, group)
        if offered and not offered & asked:
            return next(iter(asked)), sorted(offered)[0]
    return None
