"""Read a model's raw reply into an AIMessage, whatever tool-call format the model used.

Order of attempts: special tokens and ``<think>`` blocks are removed; explicit markers are read
(``<tool_call>`` with Hermes JSON or Qwen XML, bare ``<function=…>``, ``<|python_tag|>``,
``[TOOL_CALLS]``); then JSON candidates (the whole text, objects in fences or prose found with
``raw_decode``, and only where strict JSON failed a bounded ``json_repair`` of almost-JSON); then
a pythonic call list read with ``ast`` (literals only, never evaluated); what is left is a final
answer in prose. Every step is bounded so that hostile text stays cheap, and only ``ParseError``
leaves ``parse_model_output``.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from lokal.errors import ConfigError, ParseError
from lokal.llm.coercion import (
    CallReader,
    Found,
    Reject,
    bracket_walk,
    coerce_args,
    embedded_pythonic,
    pythonic_calls,
    resolve_tool_name,
    xml_value,
)
from lokal.messages import assign_call_ids, make_ai_message
from lokal.schema import tools_by_name

__all__ = [
    "ParseResult",
    "coerce_args",
    "extract_json_values",
    "parse_model_output",
    "resolve_tool_name",
]

_MAX_CALLS = 64  # tool calls read from one reply
_MAX_TAGS = 2048  # <tool_call>/<function=>/<parameter=> tags read from one reply
_MAX_DECODE_STARTS = 64  # raw_decode start positions tried per text
_MAX_REPAIR_CHARS = 50_000  # the longest span handed to json_repair
_MAX_FENCES = 32

_POLICIES = ("tool_calls", "content", "error")
_END_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|endoftext|>", "<|end|>", "</s>")
_END_TOKENS += ("<|python_end|>",)
# Explicit tool-call markers: Hermes/Qwen, Qwen XML, Llama 3.1, Mistral.
_MARKERS = ("<tool_call>", "</tool_call>", "<function=", "<|python_tag|>", "[TOOL_CALLS]")
_TAG = re.compile(
    r"</?tool_call>|<function=([^<>\n]{1,200})>|</function>|<parameter=([^<>\n]{1,200})>"
    r"|</parameter>"
)
_BRACE = re.compile(r"[\[{]")
_FENCE_MARK = re.compile(r"```[A-Za-z0-9_+-]{0,20}")
_NOT_ASCII_PUNCT = re.compile(r"[^\s!-/:-@\[-`{-~]")
_DECODER = json.JSONDecoder()


@dataclass
class ParseResult:
    """A parsed reply: the AIMessage and a record of how it was read."""

    message: dict
    format: str
    repaired: bool
    preamble: str = ""
    reasoning: str = ""
    conflict: bool = False
    dropped_calls: list = field(default_factory=list)


@dataclass
class _Cand:
    value: Any
    repaired: bool
    start: int
    end: int
    nested: bool = False  # a strict value inside a repaired one


# --- public entry points --------------------------------------------------------------------


def parse_model_output(
    text: str,
    tools_schema: list | None = None,
    *,
    conflict_policy: str = "tool_calls",
    calls_in_think: bool = False,
) -> ParseResult:
    """Read ``text`` into a ParseResult; raise ParseError when it holds nothing usable.

    ``tools_schema`` (OpenAI or flat form) turns on tool-name checking and argument coercion.
    ``conflict_policy`` decides a JSON envelope with both content and calls: ``"tool_calls"``
    keeps the calls (the content goes to ``preamble``), ``"content"`` keeps the content (the
    calls go to ``dropped_calls``), ``"error"`` raises. ``calls_in_think`` accepts calls written
    inside ``<think>`` when nothing outside it has one.
    """
    if conflict_policy not in _POLICIES:
        raise ConfigError(f"conflict_policy must be one of {_POLICIES}, got {conflict_policy!r}")
    tools = tools_by_name(tools_schema) if tools_schema else {}
    if not isinstance(text, str):
        raise ParseError(f"the model's reply must be text, got {type(text).__name__}")
    try:
        return _parse(text, CallReader(tools), conflict_policy, calls_in_think)
    except ParseError as exc:
        exc.text = text if exc.text is None else exc.text
        raise
    except Exception as exc:  # a parser bug must surface as ParseError, never as a crash
        raise ParseError(f"the reply could not be read ({type(exc).__name__})", text=text) from exc


def extract_json_values(text: str) -> list[tuple[object, bool]]:
    """Every JSON object or array in ``text``, in order of appearance, with a repaired flag.

    Looks at the whole text, markdown fences, objects embedded in prose (also followed by stray
    backticks) and, where strict JSON fails, a bounded repair of almost-JSON.
    """
    if not isinstance(text, str):
        return []
    try:
        return [(cand.value, cand.repaired) for cand in _find_json(text, CallReader({}))]
    except (RecursionError, MemoryError):
        return []


# --- the pipeline ---------------------------------------------------------------------------


def _parse(text: str, ctx: CallReader, policy: str, calls_in_think: bool) -> ParseResult:
    if not text.strip():
        raise ParseError("the reply is empty")
    outside, reasoning = _split_think(_strip_special_tokens(text))
    has_words = _meaningful(outside)
    found = _find_calls(outside, ctx) if has_words else None
    think_problem = ""
    if calls_in_think and reasoning and (found is None or not found.calls):
        try:
            inside = _find_calls(reasoning, ctx)
        except ParseError as exc:
            inside, think_problem = None, f" (inside <think>: {exc.reason})"
        if inside is not None and inside.calls:
            beside = (found.content if found else outside) if has_words else ""
            inside.preamble = beside.strip()  # its own leftover is reasoning, already recorded
            found = inside
    if found is None and not has_words:
        reason = f"the reply holds no answer, only punctuation: {outside.strip()[:40]!r}"
        if not outside.strip():
            hint = "" if calls_in_think else "; calls inside <think> are ignored"
            reason = f"the reply holds only reasoning (<think>), nothing outside it{hint}"
            reason = reason if reasoning else "the reply is empty once special tokens are removed"
        raise ParseError(reason + think_problem)
    if found is None:
        found = Found("prose", [], content=_prose(outside))
    return _build(found, ctx, policy, reasoning)


def _build(found: Found, ctx: CallReader, policy: str, reasoning: str) -> ParseResult:
    content, preamble, calls = found.content.strip(), found.preamble, found.calls
    conflict = bool(content) and bool(calls)
    dropped: list = []
    if conflict and policy == "error":
        raise ParseError(
            "the model gave both content and tool_calls (conflict_policy='error'); "
            f"content was {content[:80]!r}"
        )
    if conflict and policy == "content":
        dropped, calls = list(assign_call_ids(_finalize(calls, ctx, lenient=True))), []
    elif conflict:
        preamble, content = _join(preamble, content), ""
    repaired = found.repaired or any(call.get("repaired") for call in found.calls)
    message = dict(make_ai_message(content, _finalize(calls, ctx)))
    return ParseResult(message, found.format, repaired, preamble, reasoning, conflict, dropped)


def _finalize(calls: list[dict], ctx: CallReader, *, lenient: bool = False) -> list[dict]:
    """Tool names resolved against the schema and arguments coerced to its types."""
    if len(calls) > _MAX_CALLS:
        raise ParseError(f"the reply has {len(calls)} tool calls; at most {_MAX_CALLS} are read")
    result = []
    for call in calls:
        name = call["name"]
        try:
            name = resolve_tool_name(name, ctx.tools)
        except ParseError:
            if not lenient:
                raise
        args = call["args"]
        if name in ctx.tools:
            args = coerce_args(args, ctx.tools[name].get("parameters") or {})
        item = {"name": name, "args": args}
        if isinstance(call.get("id"), str) and call["id"].strip():
            item["id"] = call["id"]
        result.append(item)
    return result


def _find_calls(text: str, ctx: CallReader) -> Found | None:
    """Calls (or an envelope's content) in ``text``; None when it holds no call format."""
    problems: list[str] = []
    marker = next((mark for mark in _MARKERS if mark in text), None)
    if marker and text.strip()[:1] in ("{", "[") and _is_json(text.strip()):
        marker = None  # the markers are inside the strings of one JSON value
    found = _marker_calls(text, ctx, problems) if marker else None
    hard_reason = None
    if found is None:
        found, hard_reason = _json_message(text, ctx)
    if found is None:
        found = _pythonic(text, ctx)
    if found is not None:
        return found
    if marker:
        detail = f": {problems[0]}" if problems else ""
        raise ParseError(f"the reply has a {marker} marker but no readable tool call{detail}")
    if hard_reason:
        raise ParseError(hard_reason)
    return None


def _strip_special_tokens(text: str) -> str:
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


def _split_think(text: str) -> tuple[str, str]:
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
            cut = min([i for i in (rest.find(mark) for mark in _MARKERS) if i != -1] or [len(rest)])
            reasoning.append(rest[:cut])
            pos = body + cut
            break
        reasoning.append(text[body:end])
        pos = end + len("</think>")
    outside.append(text[pos:])
    parts = [part.strip() for part in reasoning]
    return "".join(outside).replace("</think>", ""), "\n\n".join(p for p in parts if p)


def _meaningful(text: str) -> bool:
    """True when ``text`` has a letter, digit or symbol, not only punctuation and spaces."""
    for match in _NOT_ASCII_PUNCT.finditer(text):
        char = match.group()
        if char.isalnum() or (ord(char) > 127 and unicodedata.category(char)[0] not in "PZC"):
            return True
    return False


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _prose(text: str) -> str:
    stripped = text.strip()
    if len(stripped) > 1 and stripped[0] == stripped[-1] == '"':  # a bare JSON string
        try:
            value = json.loads(stripped)
        except ValueError:
            return stripped
        if isinstance(value, str) and value.strip():
            return value.strip()
    return stripped


def _tidy(text: str) -> str:
    return _FENCE_MARK.sub("", text).strip().strip("`").strip()


def _join(*parts: str) -> str:
    return "\n\n".join(part.strip() for part in parts if part and part.strip())


def _leftover(text: str, spans: list[tuple[int, int]], strip: str = "") -> str:
    """``text`` without ``spans`` and fence marks: what stood beside the calls."""
    parts, pos = [], 0
    for start, end in sorted(spans):
        parts.append(text[pos:start])
        pos = max(pos, end)
    parts.append(text[pos:])
    return _tidy("\n".join(p.strip().strip(strip).strip() for p in parts if p.strip(strip + " \n")))


def _fence_bodies(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of markdown fence bodies (an unclosed fence runs to the end)."""
    bodies: list[tuple[int, int]] = []
    pos = 0
    while len(bodies) < _MAX_FENCES and (start := text.find("```", pos)) != -1:
        line_end = text.find("\n", start + 3, start + 26)
        body = line_end + 1 if line_end != -1 else start + 3
        end = text.find("```", body)
        bodies.append((body, len(text) if end == -1 else end))
        pos = len(text) if end == -1 else end + 3
    return bodies


# --- JSON candidates ------------------------------------------------------------------------


def _find_json(text: str, ctx: CallReader) -> list[_Cand]:
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            value = json.loads(stripped)
        except (ValueError, RecursionError):
            pass
        else:
            if isinstance(value, dict | list):
                start = text.find(stripped[0])
                return [_Cand(value, False, start, start + len(stripped))]
    found: list[_Cand] = []
    failed: list[int] = []
    pos = 0
    for _ in range(_MAX_DECODE_STARTS):
        match = _BRACE.search(text, pos)
        if match is None:
            break
        try:
            value, end = _DECODER.raw_decode(text, match.start())
        except (ValueError, RecursionError):
            failed.append(match.start())
            pos = match.start() + 1
            continue
        found.append(_Cand(value, False, match.start(), end))
        pos = end
    fences = _fence_bodies(text) if failed else []
    repaired_until = -1
    for start in failed:
        if start < repaired_until or ctx.repairs_left <= 0:
            continue
        fence_end = next((end for begin, end in fences if begin <= start < end), len(text))
        limit = min(fence_end, start + _MAX_REPAIR_CHARS)
        end, too_deep = bracket_walk(text, start, limit, stop_at_close=True)
        if too_deep or (end == -1 and limit < fence_end):
            continue  # too deep for json_repair, or longer than the span it may be given
        end = limit if end == -1 else end
        value = ctx.repair(text[start:end])
        if value is None:
            continue
        found.append(_Cand(value, True, start, end))
        repaired_until = end
        for cand in found:
            cand.nested = cand.nested or (not cand.repaired and start < cand.start < end)
    return sorted(found, key=lambda cand: cand.start)


def _json_message(text: str, ctx: CallReader) -> tuple[Found | None, str | None]:
    """The first envelope, or else all calls, among the JSON candidates; strict ones first."""
    cands = _find_json(text, ctx)
    hard_reason = None
    strict = [c for c in cands if not c.repaired and not c.nested]
    for tier in (strict, [c for c in cands if c.repaired or c.nested]):
        picked: list[tuple[_Cand, Found]] = []
        for cand in tier:
            if any(p.start <= cand.start and cand.end <= p.end for p, _ in picked):
                continue  # a part of a value already read
            try:
                shape = ctx.shape(cand.value, cand.repaired)
            except Reject as exc:
                if hard_reason is None and not _leftover(text, [(cand.start, cand.end)]):
                    hard_reason = exc.reason  # the whole reply is this broken value
                continue
            if shape is not None and shape.format == "json_envelope" and not picked:
                shape.preamble = _leftover(text, [(cand.start, cand.end)])
                return shape, None
            if shape is not None and shape.format != "json_envelope":
                picked.append((cand, shape))
        if picked:
            fmt = picked[0][1].format if len(picked) == 1 else "call_list"
            calls = [call for _, shape in picked for call in shape.calls]
            found = Found(fmt, calls, repaired=any(c.repaired or f.repaired for c, f in picked))
            found.preamble = _leftover(text, [(cand.start, cand.end) for cand, _ in picked])
            return found, None
    return None, hard_reason


# --- explicit markers -----------------------------------------------------------------------


def _marker_calls(text: str, ctx: CallReader, problems: list[str]) -> Found | None:
    found = None
    if "<tool_call>" in text or "</tool_call>" in text or "<function=" in text:
        found = _TagWalker(text, ctx, problems).run()
    if found is None and "<|python_tag|>" in text:
        found = _split_marker(text, "<|python_tag|>", "python_tag", ctx)
    if found is None and "[TOOL_CALLS]" in text:
        found = _split_marker(text, "[TOOL_CALLS]", "call_list", ctx)
    return found


class _TagWalker:
    """One pass over ``<tool_call>``, ``<function=>`` and ``<parameter=>`` tags.

    Missing closing tags are tolerated: a parameter ends where the next tag begins, a call at
    the next call or the end of the text. Hermes JSON after ``<tool_call>`` is read with
    raw_decode, so a ``</tool_call>`` inside a JSON string does not cut the call short.
    """

    def __init__(self, text: str, ctx: CallReader, problems: list[str]) -> None:
        self.text, self.ctx, self.problems = text, ctx, problems
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
            if len(tags) > _MAX_TAGS:
                raise ParseError(f"the reply has more than {_MAX_TAGS} tool-call tags")
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
        preamble = _leftover("\n".join(self.outside), [])
        return Found(fmt, self.calls, preamble=preamble, repaired=self.repaired)

    def _add(self, calls: list[dict], fmt: str) -> None:
        self.calls.extend(calls)
        self.formats.add(fmt)
        if len(self.calls) > _MAX_CALLS:
            raise ParseError(f"the reply has more than {_MAX_CALLS} tool calls")

    def _outside(self, at: int) -> None:
        if at > self.pos:
            self.outside.append(self.text[self.pos : at])
        self.pos = max(self.pos, at)

    def _hermes_json(self, body: int) -> int:
        calls, end, _ = self.ctx.sequence(self.text, body, repair=False)
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
        name = resolve_tool_name(name, self.ctx.tools)
        props = self.ctx.properties(name)
        args: Any = {key: xml_value(raw, props.get(key)) for key, raw in params}
        repaired = False
        if not params and self.text[body:at].strip()[:1] == "{":  # Llama 3.1 <function=f>{…}
            args, repaired = self.ctx.first_value(self.text[body:at])
        if isinstance(args, dict):
            self._add([{"id": None, "name": name, "args": args, "repaired": repaired}], "qwen_xml")
        else:
            self.problems.append(f"the body of <function={name}> is not an arguments object")

    def _end_block(self, at: int, *, closed: bool = False) -> None:
        start, self.block, self.pos = self.block, None, at
        self.repaired = self.repaired or not closed
        if self.block_read or start is None or not self.text[start:at].strip():
            return
        found, reason = _json_message(self.text[start:at], self.ctx)
        if found is not None and found.calls:
            self._add(found.calls, "hermes")
            self.repaired = self.repaired or found.repaired
        else:
            self.problems.append(reason or "a <tool_call> block holds no readable call")

    def _lone(self, at: int) -> None:
        """A ``</tool_call>`` without its opener: the JSON before it may still be a call."""
        segment = self.text[self.pos : at]
        found = _json_message(segment, self.ctx)[0] if _BRACE.search(segment) else None
        if found is not None and found.calls:
            self._add(found.calls, "hermes")
            segment = found.preamble
        self.outside.append(segment)
        self.pos = at


def _split_marker(text: str, marker: str, fmt: str, ctx: CallReader) -> Found | None:
    """Calls after ``<|python_tag|>`` or ``[TOOL_CALLS]`` markers."""
    parts = text.split(marker)
    if len(parts) - 1 > _MAX_CALLS:
        raise ParseError(f"the reply has more than {_MAX_CALLS} {marker} markers")
    outside, calls, repaired = [parts[0]], [], False
    for part in parts[1:]:
        got, end, fixed = ctx.sequence(part, 0, repair=True)
        rest = part[end:]
        if not got:
            try:
                got, fixed = ctx.named_call(part.strip(), marker)
            except Reject:
                got = []
            rest = "" if got else part
        calls.extend(got)
        outside.append(rest)
        repaired = repaired or fixed
    if not calls:
        return None
    return Found(fmt, calls, preamble=_tidy("\n".join(outside)), repaired=repaired)


# --- pythonic calls -------------------------------------------------------------------------


def _pythonic(text: str, ctx: CallReader) -> Found | None:
    """The whole (fence-stripped) text as a call list, or known tools called inside prose."""
    body = text.strip()
    if body.startswith("```"):
        body = body[3:].split("\n", 1)[-1].strip().removesuffix("```")
    body = body.strip().strip("`").strip()
    calls = pythonic_calls(body, ctx.tools) if "(" in body else None
    if calls:
        return Found("pythonic", calls)
    spans = embedded_pythonic(text, ctx.tools) if ctx.tools else []
    if not spans:
        return None
    preamble = _leftover(text, [(start, end) for start, end, _ in spans], strip="[],")
    return Found("pythonic", [call for _, _, call in spans], preamble=preamble)
