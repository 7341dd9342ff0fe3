"""The tool layer: ``ToolSpec`` (one tool type), ``@tool``, function → JSON schema, and the
``ToolRegistry`` that validates and runs calls."""

from lokal.tools.registry import EventCallback, Tool, ToolRegistry, to_jsonable, tool
from lokal.tools.schema import ToolSpec, openai_tools, tool_specs
from lokal.tools.signature import annotation_to_schema, function_to_schema, parse_docstring

__all__ = [
    "EventCallback",
    "Tool",
    "ToolRegistry",
    "ToolSpec",
    "annotation_to_schema",
    "function_to_schema",
    "openai_tools",
    "parse_docstring",
    "to_jsonable",
    "tool",
    "tool_specs",
]
