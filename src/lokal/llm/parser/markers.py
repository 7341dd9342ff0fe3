"""Explicit tool-call markers: ``<tool_call>`` tags (Hermes JSON or Qwen XML), bare
``<function=…>`` (Llama 3.1), ``<|python_tag|>`` (Llama) and ``[TOOL_CALLS]`` (Mistral)."""

from __future__ import annotations

import re
from typing import Any

from lokal.errors import ParseError
from lokal.llm.parser.limits import MAX_CALLS, MAX_NAME_CHARS, MAX_TAGS
from lokal.llm.parser.pythonic import pythonic_calls
from lokal.llm.parser.shapes import CallReader, Found, Reject, json_message, resolve_tool_name
from lokal.llm.parser.text import BRACE, leftover, tidy
from lokal.llm.parser.values import first_value, xml_value

__all__ = ["marker_calls"]

_TAG = re.compile(
    rf"</?tool_call>|<function=([^<>\n]{{1,{MAX_NAME_CHARS}}})>|</function>"
    rf"|<parameter=([^<>\n]{{1,{MAX_NAME_CHARS}}})>|</parameter>"
)


def marker_calls(text: str, reader: CallReader, problems: list[str]) -> Found | None:
    """Calls after the markers in ``text``; what went wrong is added to ``problems``."""
    found = None
    if "<tool_call>" in text or "</tool_call>" in text or "<function=" in text:
        found = _TagWalker(text, reader, problems).run()
    if found is None and "<|python_tag|>" in text:
        found = _split_marker(text, "<|python_tag|>", "python_tag", reader)
    if found is None and "[TOOL_CALLS]" in text:
        found = _split_marker(text, "[TOOL_CALLS]", "call_list", reader)
    return found


class _TagWalker:
    """One pass over ``<tool_call>``, ``<function=>`` and ``<parameter=>`` tags.

    Missing closing tags are tolerated: a parameter ends where the next tag begins, a call at
    the next call or the end of the text. Hermes JSON after ``<tool_call>`` is read with
    raw_decode, so a ``</tool_call>`` inside a JSON string does not cut the call short.
    """

    def __init__(self, text: str, reader: CallReader, problems: list[str]) -> None:
        self.text, self.reader, self.problems = text, reader, problems
        self.calls: list[dict] = []
        self.outside: list[str] = []
        self.formats: set[str] = set()
        self.repaired = False
        self.call: list | None = None  # [name, body start, [(parameter, raw value)]]
        self.param: list | None = None  # [name, value start]
        self.block: int | None = None  # body start of the open <tool_call> block
        self.block_read = False
        self.pos = 0

    def run(self) -> Found | None:
        tags = []
        for match in _TAG.finditer(self.text):
            tags.append(match)
            if len(tags) > MAX_TAGS:
                raise ParseError(
                    f"the reply has more than {MAX_TAGS} tool-call tags", kind="too_many"
                )
        skip_to = 0
        for match in tags:
            start, end = match.span()
            tag = match.group()
            if start < skip_to:
                continue
            if tag == "<tool_call>" or tag == "</tool_call>" or match.group(1) is not None:
                self._end_call(start)
            if tag == "<tool_call>":
                (self._end_block if self.block is not None else self._outside)(start)
                self.block, self.block_read, self.pos = end, False, end
                skip_to = self._hermes_json(end)
            elif tag == "</tool_call>":
                if self.block is not None:
                    self._end_block(start, closed=True)
                else:
                    self._lone(start)
                self.pos = end
            elif match.group(1) is not None:  # <function=NAME>
                if self.block is None:
                    self._outside(start)
                self.block_read = True
                self.call, self.pos = [match.group(1).strip().strip("\"'`"), end, []], end
            elif match.group(2) is not None and self.call is not None:  # <parameter=NAME>
                self._end_param(start, closed=False)
                self.param = [match.group(2).strip().strip("\"'`"), end]
            elif tag == "</parameter>":
                self._end_param(start, closed=True)
            elif tag == "</function>" and self.call is not None:
                self._end_call(start, closed=True)
                self.pos = end
        self._end_call(len(self.text))
        if self.block is not None:
            self._end_block(len(self.text))
        self._outside(len(self.text))
        if not self.calls:
            return None
        fmt = "qwen_xml" if "qwen_xml" in self.formats else "hermes"
        preamble = leftover("\n".join(self.outside), [])
        return Found(fmt, self.calls, preamble=preamble, repaired=self.repaired)

    def _add(self, calls: list[dict], fmt: str) -> None:
        self.calls.extend(calls)
        self.formats.add(fmt)
        if len(self.calls) > MAX_CALLS:
            raise ParseError(f"the reply has more than {MAX_CALLS} tool calls", kind="too_many")

    def _outside(self, at: int) -> None:
        if at > self.pos:
            self.outside.append(self.text[self.pos : at])
        self.pos = max(self.pos, at)

    def _hermes_json(self, body: int) -> int:
        calls, end, _ = self.reader.sequence(self.text, body, repair=False)
        if not calls:
            return 0  # read later from the block's own text, with repair
        self._add(calls, "hermes")
        self.block_read = True
        return end

    def _end_param(self, at: int, *, closed: bool) -> None:
        if self.param is not None and self.call is not None:
            self.call[2].append((self.param[0], self.text[self.param[1] : at]))
            self.param = None
            self.repaired = self.repaired or not closed

    def _end_call(self, at: int, *, closed: bool = False) -> None:
        if self.call is None:
            return
        self._end_param(at, closed=False)
        (name, body, params), self.call, self.pos = self.call, None, at
        self.repaired = self.repaired or not closed
        if not name:
            self.problems.append("a <function=> tag names no function")
            return
        name = resolve_tool_name(name, self.reader.tools)
        props = self.reader.properties(name)
        args: Any = {key: xml_value(raw, props.get(key)) for key, raw in params}
        repaired = False
        if not params and self.text[body:at].strip()[:1] == "{":  # Llama 3.1 <function=f>{…}
            args, repaired = first_value(self.text[body:at], self.reader.repairer)
        if isinstance(args, dict):
            self._add([{"id": None, "name": name, "args": args, "repaired": repaired}], "qwen_xml")
        else:
            self.problems.append(f"the body of <function={name}> is not an arguments object")

    def _end_block(self, at: int, *, closed: bool = False) -> None:
        start, self.block, self.pos = self.block, None, at
        self.repaired = self.repaired or not closed
        if self.block_read or start is None or not self.text[start:at].strip():
            return
        found, hard = json_message(self.text[start:at], self.reader)
        if found is not None and found.calls:
            self._add(found.calls, "hermes")
            self.repaired = self.repaired or found.repaired
        else:
            self.problems.append(
                hard.reason if hard else "a <tool_call> block holds no readable call"
            )

    def _lone(self, at: int) -> None:
        """A ``</tool_call>`` without its opener: the JSON before it may still be a call."""
        segment = self.text[self.pos : at]
        found = json_message(segment, self.reader)[0] if BRACE.search(segment) else None
        if found is not None and found.calls:
            self._add(found.calls, "hermes")
            segment = found.preamble
        self.outside.append(segment)
        self.pos = at


def _split_marker(text: str, marker: str, fmt: str, reader: CallReader) -> Found | None:
    """Calls after ``<|python_tag|>`` or ``[TOOL_CALLS]`` markers."""
    parts = text.split(marker)
    if len(parts) - 1 > MAX_CALLS:
        raise ParseError(f"the reply has more than {MAX_CALLS} {marker} markers", kind="too_many")
    outside, calls, repaired = [parts[0]], [], False
    for part in parts[1:]:
        got, end, fixed = reader.sequence(part, 0, repair=True)
        rest = part[end:]
        if not got:
            try:
                got, fixed = _named_call(part.strip(), marker, reader)
            except Reject:
                got = []
            rest = "" if got else part
        calls.extend(got)
        outside.append(rest)
        repaired = repaired or fixed
    if not calls:
        return None
    return Found(fmt, calls, preamble=tidy("\n".join(outside)), repaired=repaired)


def _named_call(segment: str, marker: str, reader: CallReader) -> tuple[list[dict], bool]:
    """Mistral ``name[ARGS]{...}`` / ``name{...}``, or Llama ``<|python_tag|>f(a=1)``."""
    if marker == "<|python_tag|>":
        calls = pythonic_calls(segment, reader.tools) or []
        for call in calls:  # Llama 3.1 built-in tools: brave_search.call(query="...")
            if call["name"].endswith(".call") and not reader.known(call["name"]):
                call["name"] = call["name"][: -len(".call")]
        return calls, False
    if "[ARGS]" in segment:
        head, _, tail = segment.partition("[ARGS]")
    else:
        brace = segment.find("{")
        head, tail = (segment[:brace], segment[brace:]) if brace > 0 else ("", "")
    name = head.split("[CALL_ID]")[0].strip()
    if not name or len(name) > MAX_NAME_CHARS or any(char.isspace() for char in name):
        return [], False
    value, fixed = first_value(tail, reader.repairer)
    if not isinstance(value, dict):
        return [], False
    args, repaired = reader.arguments(value, name)
    return [{"id": None, "name": name, "args": args}], fixed or repaired
