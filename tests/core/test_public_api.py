"""The top-level API: ``from lokal import ...`` for every curated name, loaded lazily."""

import json
import subprocess
import sys

import pytest

import lokal

EXPECTED = {
    "Agent",
    "AgentSettings",
    "RunResult",
    "tool",
    "ToolSpec",
    "ToolRegistry",
    "load_profile",
    "Profile",
    "generate_ai_message",
    "Decision",
    "parse_model_output",
    "ParseResult",
    "ScriptedBackend",
    "register_backend",
    "LokalError",
    "ConfigError",
    "MessageError",
    "ParseError",
    "BackendError",
    "__version__",
}


def test_all_is_the_curated_list():
    assert set(lokal.__all__) == EXPECTED
    assert len(lokal.__all__) == len(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_public_name_resolves(name):
    value = getattr(lokal, name)
    assert value is not None
    assert name in dir(lokal)
    namespace: dict = {}
    exec(f"from lokal import {name}", namespace)
    assert namespace[name] is value


def test_public_names_are_the_package_objects():
    from lokal.config import Profile, load_profile
    from lokal.errors import ParseError
    from lokal.llm.backends import register_backend
    from lokal.llm.backends.scripted import ScriptedBackend
    from lokal.llm.decide import generate_ai_message
    from lokal.llm.parser import ParseResult, parse_model_output
    from lokal.records import Decision
    from lokal.runtime import Agent, AgentSettings, RunResult
    from lokal.tools.registry import Tool, ToolRegistry, tool
    from lokal.tools.schema import ToolSpec

    assert lokal.Agent is Agent
    assert lokal.AgentSettings is AgentSettings
    assert lokal.RunResult is RunResult
    assert lokal.tool is tool
    assert lokal.ToolSpec is ToolSpec and issubclass(Tool, ToolSpec)
    assert lokal.Decision is Decision
    assert lokal.ToolRegistry is ToolRegistry
    assert lokal.load_profile is load_profile
    assert lokal.Profile is Profile
    assert lokal.generate_ai_message is generate_ai_message
    assert lokal.parse_model_output is parse_model_output
    assert lokal.ParseResult is ParseResult
    assert lokal.ScriptedBackend is ScriptedBackend
    assert lokal.register_backend is register_backend
    assert lokal.ParseError is ParseError


def test_version_is_a_string():
    assert isinstance(lokal.__version__, str)
    assert lokal.__version__[0].isdigit()


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_name"):
        lokal.no_such_name  # noqa: B018
    assert not hasattr(lokal, "no_such_name")


def test_the_readme_example_parses():
    result = lokal.parse_model_output('{"tool_calls": [{"name": "calculator", "args": {}}]}')
    assert isinstance(result, lokal.ParseResult)
    assert result.message["tool_calls"][0]["name"] == "calculator"
    with pytest.raises(lokal.ParseError):
        lokal.parse_model_output("")


HEAVY = ("llama_cpp", "numpy", "torch", "transformers", "chromadb", "sentence_transformers")


def test_import_lokal_stays_light():
    """A fresh interpreter: ``import lokal`` loads no model runtime, no NumPy, no RAG."""
    code = "import json, sys, lokal; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    loaded = set(json.loads(out))
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY)
    assert heavy == []
    ours = sorted(m for m in loaded if m.startswith("lokal."))
    assert ours == ["lokal.errors"]  # everything else waits for first use
