"""The tool layer: ``@tool``, function → JSON schema, and the ``ToolRegistry``."""

from lokal.tools.registry import EventCallback, Tool, ToolRegistry, to_jsonable, tool
from lokal.tools.schema import annotation_to_schema, function_to_schema, parse_docstring

__all__ = [
    "EventCallback",
    "Tool",
    "ToolRegistry",
    "annotation_to_schema",
    "function_to_schema",
    "parse_docstring",
    "to_jsonable",
    "tool",
]
