"""lokal: a local-first agent runtime for small language models.

The main objects are importable from the top level::

    from lokal import Agent, AgentSettings, load_profile, tool, ToolRegistry

Names are resolved lazily (PEP 562 ``__getattr__``): ``import lokal`` loads only the
exception classes; ``lokal.Agent`` imports the agent loop on first use. Nothing here loads
llama.cpp, NumPy or the RAG modules.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from lokal.errors import (
    BackendError,
    ConfigError,
    LokalError,
    MessageError,
    ParseError,
)

if TYPE_CHECKING:  # for type checkers and IDEs; at run time the names come from __getattr__
    from lokal.config import Profile, load_profile
    from lokal.llm.backends import register_backend
    from lokal.llm.backends.scripted import ScriptedBackend
    from lokal.llm.decide import generate_ai_message
    from lokal.llm.parser import ParseResult, parse_model_output
    from lokal.records import Decision
    from lokal.runtime import Agent, AgentSettings, RunResult
    from lokal.tools.registry import ToolRegistry, tool
    from lokal.tools.schema import ToolSpec

# public name -> "module:attribute", imported on first access
_LAZY: dict[str, str] = {
    "Agent": "lokal.runtime:Agent",
    "AgentSettings": "lokal.runtime:AgentSettings",
    "RunResult": "lokal.runtime:RunResult",
    "tool": "lokal.tools.registry:tool",
    # a tool as the model sees it; ``@tool`` returns a Tool, which is a ToolSpec with a function
    "ToolSpec": "lokal.tools.schema:ToolSpec",
    # what generate_ai_message returns (``to_dict()`` gives the JSON of result.json)
    "Decision": "lokal.records:Decision",
    "ToolRegistry": "lokal.tools.registry:ToolRegistry",
    "load_profile": "lokal.config:load_profile",
    "Profile": "lokal.config:Profile",
    "generate_ai_message": "lokal.llm.decide:generate_ai_message",
    "parse_model_output": "lokal.llm.parser:parse_model_output",
    "ParseResult": "lokal.llm.parser:ParseResult",
    "ScriptedBackend": "lokal.llm.backends.scripted:ScriptedBackend",
    "register_backend": "lokal.llm.backends:register_backend",
}

__all__ = [
    "Agent",
    "AgentSettings",
    "BackendError",
    "ConfigError",
    "Decision",
    "LokalError",
    "MessageError",
    "ParseError",
    "ParseResult",
    "Profile",
    "RunResult",
    "ScriptedBackend",
    "ToolRegistry",
    "ToolSpec",
    "__version__",
    "generate_ai_message",
    "load_profile",
    "parse_model_output",
    "register_backend",
    "tool",
]


_FALLBACK_VERSION = "0.1.0"  # pyproject.toml's version, for a source tree never installed


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lokal")
    except PackageNotFoundError:
        return _FALLBACK_VERSION


def __getattr__(name: str) -> Any:
    if name == "__version__":  # lazy too: importlib.metadata is slow to import
        value: Any = _version()
        globals()[name] = value
        return value
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'lokal' has no attribute {name!r}")
    module_name, _, attribute = target.partition(":")
    value = getattr(import_module(module_name), attribute)
    globals()[name] = value  # cache: later look-ups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | {"__version__"})
