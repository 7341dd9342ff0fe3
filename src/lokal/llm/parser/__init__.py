"""Read a model's raw reply into an AIMessage, whatever tool-call format the model used.

Order of attempts: special tokens and ``<think>`` blocks are removed; explicit markers are read
(``<tool_call>`` with Hermes JSON or Qwen XML, bare ``<function=…>``, ``<|python_tag|>``,
``[TOOL_CALLS]``); then JSON candidates (the whole text, objects in fences or prose found with
``raw_decode``, and only where strict JSON failed a bounded ``json_repair`` of almost-JSON); then
a pythonic call list read with ``ast`` (literals only, never evaluated); what is left is a final
answer in prose. Every step is bounded so that hostile text stays cheap, and only ``ParseError``
leaves ``parse_model_output``.

One concern per module, each importing only those above it in this list:

- ``limits``: every size and count bound;
- ``text``: end tokens, ``<think>``, fences, brackets, leftover prose;
- ``values``: JSON values and their bounded repair, the argument decoder, type coercion;
- ``shapes``: which values are calls or an envelope, and which tool a name means;
- ``pythonic``: ``[f(a=1)]`` calls read with ``ast``;
- ``markers``: ``<tool_call>``/``<function=>`` tags, ``<|python_tag|>``, ``[TOOL_CALLS]``;
- ``read``: the order of attempts, policies, names and types checked once at the end.
"""

from __future__ import annotations

from lokal.llm.parser.read import ParseResult, parse_model_output
from lokal.llm.parser.shapes import resolve_tool_name
from lokal.llm.parser.values import coerce_args, extract_json_values
from lokal.llm.parser.values import decode_arguments as decode_arguments

__all__ = [
    "ParseResult",
    "coerce_args",
    "extract_json_values",
    "parse_model_output",
    "resolve_tool_name",
]
