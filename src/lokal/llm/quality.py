"""Is a reply garbage? Loops, echoes of lokal's own prompt, copied placeholders.

A tiny model that runs until ``max_new_tokens`` usually repeats itself ("la Chatelet" forty
times, an endless numbered list); one that is lost copies the prompt back (its reminder text,
the ``<your answer>`` of an answer form). Such replies parse, so the parser cannot refuse
them: these checks do, and the decision retries with the reason quoted.

``loop_period`` works on token ids while decoding (a backend stops the loop at once);
``reply_problem`` judges a finished reply's text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["loop_period", "reply_problem", "text_loop", "trim_loop"]

MIN_LOOP_TOKENS = 24  # a loop must cover at least this many tokens
MIN_LOOP_REPEATS = 3  # ... and repeat its period at least this often
MAX_LOOP_PERIOD = 48

_PLACEHOLDER = re.compile(
    r"^\s*(?:<[^<>\n]{1,40}>|\.\.\.|…|your answer|answer|<answer>|\{answer\}|\[answer\])\s*$",
    re.IGNORECASE,
)
_ANGLE_PLACEHOLDER = re.compile(r"<(?:your|the|tool|answer)[ _a-z]{0,30}>", re.IGNORECASE)
# a template's slot left unfilled, outside code: "{{weather_forecast_24}}", "at [location]
# with [days]" (one lower-case name in brackets after a space; not a link's "[text](url)",
# a "[1]", an "[x]" or code's "items[index]")
_TEMPLATE_SLOT = re.compile(
    r"\{\{\s*[A-Za-z_][\w.]{0,40}\s*\}\}|(?<![^\s(])\[(?!sic\])[a-z_][a-z0-9_]{1,30}\](?![(\[:])"
)
_CODE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`", re.DOTALL)
_SENTENCE = re.compile(r"[^.!?。！？\n]{30,}[.!?。！？]?")


def loop_period(tokens: Sequence[int]) -> int | None:
    """The period of a loop at the end of ``tokens`` (a block of 1..48 tokens repeated at
    least three times, covering at least 24 tokens), or None."""
    n = len(tokens)
    if n < MIN_LOOP_TOKENS:
        return None
    tail = list(tokens[-(MAX_LOOP_PERIOD * MIN_LOOP_REPEATS) :])
    size = len(tail)
    for period in range(1, MAX_LOOP_PERIOD + 1):
        repeats = max(MIN_LOOP_REPEATS, -(-MIN_LOOP_TOKENS // period))
        span = period * repeats
        if span > size:
            break
        block = tail[size - period :]
        if all(tail[size - span + i] == block[i % period] for i in range(span)):
            return period
    return None


def text_loop(text: str, *, min_chars: int = 60, min_repeats: int = 3) -> str | None:
    """The repeated unit when ``text`` ends in a loop (for backends that cannot stop one while
    decoding), or None. Works on characters; a unit is 2..200 characters long."""
    stripped = text.rstrip()
    n = len(stripped)
    if n < min_chars:
        return None
    for period in range(2, 201):
        repeats = max(min_repeats, -(-min_chars // period))
        span = period * repeats
        if span > n:
            break
        unit = stripped[n - period :]
        if stripped[n - span :] == unit * repeats:
            return unit
    return None


def trim_loop(text: str, *, min_keep: int = 20) -> str | None:
    """``text`` without its looping tail: the repeated unit is kept once, where the loop
    began. None when no loop is found at the end or too little text (< ``min_keep``
    characters) is left."""
    stripped = text.rstrip()
    n = len(stripped)
    for period in range(2, 201):
        if 3 * period > n:
            break
        # a loop cut mid-unit: the text ends in a prefix of the unit
        for cut in range(period):
            tail = stripped[: n - cut] if cut else stripped
            m = len(tail)
            if m < 3 * period:
                continue
            block = tail[m - period :]
            if tail[m - 3 * period :] != block * 3:
                continue
            start = m - 3 * period
            while start >= period and tail[start - period : start] == block:
                start -= period
            # keep the first repetition up to its last sentence end (the loop may have been
            # caught mid-sentence), else the whole of it: one clause said once
            first = tail[start : start + period]
            end = max(first.rfind(mark) for mark in ".!?。！？\n")
            kept = (tail[:start] + (first[: end + 1] if end >= 0 else first)).rstrip(" ,;:-")
            return kept if len(kept.strip()) >= min_keep else None
    return None


def _sentences(text: str) -> list[list[str]]:
    """The sentences of ``text`` (30+ characters) as lists of lower-case words."""
    return [re.findall(r"\w+", m.group(0).casefold()) for m in _SENTENCE.finditer(text)]


def _copied(content: str, instructions: Sequence[str]) -> str | None:
    """A sentence of ``content`` whose words are mostly those of one sentence of the
    instructions (70% overlap: "The tool results are below" copies "…are above" too)."""
    own = [set(words) for text in instructions for words in _sentences(text) if len(words) >= 5]
    for words in _sentences(content):
        if len(words) < 5:
            continue
        seen = set(words)
        for sentence in own:
            if len(seen & sentence) / len(seen | sentence) >= 0.7:
                return " ".join(words)
    return None


def reply_problem(
    content: str,
    *,
    finish_reason: str | None,
    instructions: Sequence[str] = (),
) -> str | None:
    """Why a final answer cannot be used, or None.

    - cut off by the token limit or stopped in a loop;
    - a placeholder (``<your answer>``, ``...``) instead of an answer, or a template's slot
      left unfilled (``{{weather_forecast_24}}``, ``[location]``);
    - a sentence of lokal's own ``instructions`` (its prompt templates and reminders, not the
      user's words or the tool results) copied back.
    """
    if finish_reason == "repetition":
        return "the reply repeated itself in a loop; answer briefly, without repeating"
    if finish_reason == "length":
        return "the reply was cut off at the token limit; answer briefly"
    short_form = len(content) < 60 and re.search(r"\byour answer\b", content, re.IGNORECASE)
    if _PLACEHOLDER.match(content) or _ANGLE_PLACEHOLDER.search(content) or short_form:
        return (
            "the reply is a placeholder from the instructions, not an answer; "
            "write the answer itself"
        )
    slot = _TEMPLATE_SLOT.search(_CODE.sub(" ", content))
    if slot:
        return (
            f"the reply leaves a template's slot unfilled ({slot.group(0)!r}); "
            "write the value itself, or say what is not known"
        )
    loop = text_loop(content)
    if loop is not None:
        return f"the reply repeats {loop.strip()[:40]!r} over and over; answer briefly"
    copied = _copied(content, instructions)
    if copied:
        return (
            f"the reply copies the instructions ({copied[:60]!r}) instead of answering; "
            "answer the user's request in your own words"
        )
    return None
