"""Text scanning: end-of-turn tokens, ``<think>`` blocks, fences, brackets and what is left.

Nothing here knows about JSON values or tool calls; it finds spans and tidies text.
"""

from __future__ import annotations

import json
import re
import unicodedata

from lokal.llm.parser.limits import MAX_FENCES, MAX_NESTING

__all__ = [
    "BRACE",
    "MARKERS",
    "bracket_walk",
    "fence_bodies",
    "is_json",
    "join",
    "leftover",
    "meaningful",
    "prose",
    "split_think",
    "strip_special_tokens",
    "tidy",
    "unfence",
]

_END_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|endoftext|>", "<|end|>", "</s>")
_END_TOKENS += ("<|python_end|>",)
# Explicit tool-call markers: Hermes/Qwen, Qwen XML, Llama 3.1, Mistral.
MARKERS = ("<tool_call>", "</tool_call>", "<function=", "<|python_tag|>", "[TOOL_CALLS]")
BRACE = re.compile(r"[\[{]")
_FENCE_MARK = re.compile(r"```[A-Za-z0-9_+-]{0,20}")
_NOT_ASCII_PUNCT = re.compile(r"[^\s!-/:-@\[-`{-~]")
_BRACKETS = re.compile(r'["\\\[\]{}]')


def strip_special_tokens(text: str) -> str:
    """Without end-of-turn tokens at the end; Llama 4's ``<|python_start|>`` read as a tag."""
    end = probe = len(text)
    while True:
        while probe and text[probe - 1].isspace():
            probe -= 1
        token = next((tok for tok in _END_TOKENS if text.endswith(tok, 0, probe)), None)
        if token is None:
            break
        end = probe = probe - len(token)
    text = text[:end]
    start = len(text) - len(text.lstrip())
    if text.startswith("<|python_start|>", start):
        text = text[:start] + "<|python_tag|>" + text[start + len("<|python_start|>") :]
    return text


def split_think(text: str) -> tuple[str, str]:
    """(text outside ``<think>`` blocks, reasoning inside them).

    Text before a lone ``</think>`` is reasoning (Qwen3 templates open the block in the
    prompt). An unclosed ``<think>`` runs to the end, or to a tool-call marker when one
    follows: the model started acting without closing its reasoning.
    """
    reasoning: list[str] = []
    outside: list[str] = []
    pos = 0
    first_close, first_open = text.find("</think>"), text.find("<think>")
    if first_close != -1 and (first_open == -1 or first_close < first_open):
        reasoning.append(text[:first_close])
        pos = first_close + len("</think>")
    while (start := text.find("<think>", pos)) != -1:
        outside.append(text[pos:start])
        body = start + len("<think>")
        end = text.find("</think>", body)
        if end == -1:
            rest = text[body:]
            cut = min([i for i in (rest.find(mark) for mark in MARKERS) if i != -1] or [len(rest)])
            reasoning.append(rest[:cut])
            pos = body + cut
            break
        reasoning.append(text[body:end])
        pos = end + len("</think>")
    outside.append(text[pos:])
    parts = [part.strip() for part in reasoning]
    return "".join(outside).replace("</think>", ""), "\n\n".join(p for p in parts if p)


def meaningful(text: str) -> bool:
    """True when ``text`` has a letter, digit or symbol, not only punctuation and spaces."""
    for match in _NOT_ASCII_PUNCT.finditer(text):
        char = match.group()
        if char.isalnum() or (ord(char) > 127 and unicodedata.category(char)[0] not in "PZC"):
            return True
    return False


def is_json(text: str) -> bool:
    """True when ``text`` is one strict JSON value."""
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def prose(text: str) -> str:
    """``text`` as a final answer: stripped, and a bare JSON string read as its text."""
    stripped = text.strip()
    if len(stripped) > 1 and stripped[0] == stripped[-1] == '"':  # a bare JSON string
        try:
            value = json.loads(stripped)
        except ValueError:
            return stripped
        if isinstance(value, str) and value.strip():
            return value.strip()
    return stripped


def tidy(text: str) -> str:
    """``text`` without fence marks and stray backticks at its ends."""
    return _FENCE_MARK.sub("", text).strip().strip("`").strip()


def join(*parts: str) -> str:
    """The non-blank ``parts``, stripped, as paragraphs."""
    return "\n\n".join(part.strip() for part in parts if part and part.strip())


def leftover(text: str, spans: list[tuple[int, int]], strip: str = "") -> str:
    """``text`` without ``spans`` and fence marks: what stood beside the calls."""
    parts, pos = [], 0
    for start, end in sorted(spans):
        parts.append(text[pos:start])
        pos = max(pos, end)
    parts.append(text[pos:])
    return tidy("\n".join(p.strip().strip(strip).strip() for p in parts if p.strip(strip + " \n")))


def unfence(text: str) -> str:
    """``text`` stripped of one enclosing markdown fence and of stray backticks."""
    body = text.strip()
    if body.startswith("```"):
        body = body[3:].split("\n", 1)[-1].strip().removesuffix("```")
    return body.strip().strip("`").strip()


def fence_bodies(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of markdown fence bodies (an unclosed fence runs to the end)."""
    bodies: list[tuple[int, int]] = []
    pos = 0
    while len(bodies) < MAX_FENCES and (start := text.find("```", pos)) != -1:
        line_end = text.find("\n", start + 3, start + 26)
        body = line_end + 1 if line_end != -1 else start + 3
        end = text.find("```", body)
        bodies.append((body, len(text) if end == -1 else end))
        pos = len(text) if end == -1 else end + 3
    return bodies


def bracket_walk(text: str, start: int, limit: int, *, stop_at_close: bool) -> tuple[int, bool]:
    """Walk ``[]{}`` outside double-quoted strings: (index after the close or -1, too deep)."""
    depth, in_string, skip = 0, False, -1
    for match in _BRACKETS.finditer(text, start, limit):
        index, char = match.start(), match.group()
        if index < skip:
            continue
        if in_string:
            skip = index + 2 if char == "\\" else skip
            in_string = char != '"'
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_NESTING:
                return -1, True
        elif char in "]}":
            depth -= 1
            if depth <= 0 and stop_at_close:
                return index + 1, False
    return -1, False
