"""function_to_schema: signatures, type hints and docstrings → JSON Schema."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal, Optional

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel

from lokal.tools import Tool, function_to_schema, parse_docstring, tool


def _valid(schema: dict[str, Any], instance: Any) -> bool:
    return Draft202012Validator(schema).is_valid(instance)


def test_basic_types_required_and_defaults() -> None:
    def f(text: str, count: int, ratio: float = 0.5, flag: bool = False) -> None:
        """Do something."""

    schema = function_to_schema(f)
    assert schema["name"] == "f"
    assert schema["description"] == "Do something."
    params = schema["parameters"]
    Draft202012Validator.check_schema(params)
    assert params["properties"]["text"] == {"type": "string"}
    assert params["properties"]["count"] == {"type": "integer"}
    assert params["properties"]["ratio"] == {"type": "number", "default": 0.5}
    assert params["properties"]["flag"] == {"type": "boolean", "default": False}
    assert params["required"] == ["text", "count"]
    assert params["additionalProperties"] is False
    assert _valid(params, {"text": "a", "count": 1})
    assert not _valid(params, {"text": "a"})
    assert not _valid(params, {"text": "a", "count": "1"})
    assert not _valid(params, {"text": "a", "count": 1, "other": 2})


def test_containers_literal_optional_and_union() -> None:
    def f(
        tags: list[str],
        weights: dict[str, float],
        mode: Literal["fast", "slow"] = "fast",
        limit: Optional[int] = None,  # noqa: UP045 - the Optional spelling is what we test
        note: str | None = None,
        either: int | list[int] = 0,
        pair: tuple[int, str] = (1, "a"),
    ) -> None:
        pass

    params = function_to_schema(f)["parameters"]
    Draft202012Validator.check_schema(params)
    props = params["properties"]
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["weights"] == {"type": "object", "additionalProperties": {"type": "number"}}
    assert props["mode"]["enum"] == ["fast", "slow"] and props["mode"]["type"] == "string"
    assert props["limit"]["type"] == ["integer", "null"] and props["limit"]["default"] is None
    assert props["note"]["type"] == ["string", "null"]
    assert params["required"] == ["tags", "weights"]
    assert _valid(params, {"tags": ["a"], "weights": {"x": 1.5}, "limit": None, "either": [1]})
    assert not _valid(params, {"tags": ["a"], "weights": {}, "mode": "medium"})
    assert not _valid(params, {"tags": [1], "weights": {}})
    assert not _valid(params, {"tags": [], "weights": {"x": "heavy"}})
    assert _valid(params, {"tags": [], "weights": {}, "pair": [2, "b"]})
    assert not _valid(params, {"tags": [], "weights": {}, "pair": [2]})


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    city: str
    zip_code: str | None = None


class Person(BaseModel):
    name: str
    age: int
    address: Address


def test_enum_and_pydantic_models() -> None:
    def f(person: Person, color: Color = Color.RED) -> None:
        pass

    params = function_to_schema(f)["parameters"]
    Draft202012Validator.check_schema(params)
    assert params["properties"]["color"] == {
        "type": "string",
        "enum": ["red", "blue"],
        "default": "red",
    }
    assert "Address" in params["$defs"]  # nested model definitions are hoisted
    good = {"person": {"name": "Li", "age": 30, "address": {"city": "Beijing"}}}
    assert _valid(params, good)
    assert not _valid(params, {"person": {"name": "Li", "age": "old", "address": {"city": "B"}}})
    assert not _valid(params, {"person": {"name": "Li", "age": 3, "address": {}}})


def test_annotated_description() -> None:
    def f(city: Annotated[str, "the city name"], days: int = 3) -> None:
        """Forecast.

        Args:
            days: number of days
        """

    props = function_to_schema(f)["parameters"]["properties"]
    assert props["city"] == {"type": "string", "description": "the city name"}
    assert props["days"]["description"] == "number of days"


def test_google_docstring() -> None:
    def file_reader(path: str, max_chars: int = 2000) -> dict[str, Any]:
        """Read a text file.

        Returns its content, cut to max_chars.

        Args:
            path (str): Path relative to the workspace,
                for example docs/agent_intro.txt.
            max_chars: Maximum number of characters.

        Returns:
            A dict with the content.

        Raises:
            ValueError: on binary files.
        """
        return {}

    schema = function_to_schema(file_reader)
    assert schema["description"] == "Read a text file.\n\nReturns its content, cut to max_chars."
    props = schema["parameters"]["properties"]
    assert props["path"]["description"] == (
        "Path relative to the workspace, for example docs/agent_intro.txt."
    )
    assert props["max_chars"]["description"] == "Maximum number of characters."


def test_rest_docstring_from_tiny_agent() -> None:
    def count_letter_in_string(a: str, b: str) -> str:
        """
        统计字符串中某个字母的出现次数。
        :param a: 要搜索的字符串。
        :param b: 要统计的字母。
        :return: 字母在字符串中出现的次数。
        """
        return str(a.count(b))

    schema = function_to_schema(count_letter_in_string)
    assert schema["description"] == "统计字符串中某个字母的出现次数。"
    props = schema["parameters"]["properties"]
    assert props["a"] == {"type": "string", "description": "要搜索的字符串。"}
    assert props["b"] == {"type": "string", "description": "要统计的字母。"}
    assert schema["parameters"]["required"] == ["a", "b"]


def test_rest_typed_param_and_numpy_docstrings() -> None:
    parsed = parse_docstring(
        """Add numbers.

        :param int x: the first
            number, wrapped.
        :type x: int
        :param y: the second
        :returns: the sum
        """
    )
    assert parsed.description == "Add numbers."
    assert parsed.params == {"x": "the first number, wrapped.", "y": "the second"}
    assert parsed.returns == "the sum"

    numpy = parse_docstring(
        """Scale a value.

        Parameters
        ----------
        value : float
            The value to scale.
        factor : float, optional
            The factor.

        Returns
        -------
        float
        """
    )
    assert numpy.description == "Scale a value."
    assert numpy.params == {"value": "The value to scale.", "factor": "The factor."}


def test_no_docstring_and_kwargs() -> None:
    def f(x, *args, **kwargs):  # type: ignore[no-untyped-def]
        return x

    schema = function_to_schema(f)
    assert schema["description"] == ""
    params = schema["parameters"]
    assert params["properties"] == {"x": {}}
    assert "additionalProperties" not in params  # **kwargs accepts extra arguments
    assert _valid(params, {"x": 1, "y": 2})


def test_tool_decorator_bare_and_with_options() -> None:
    @tool
    def greet(name: str) -> str:
        """Say hello."""
        return f"hello {name}"

    assert isinstance(greet, Tool)
    assert greet("Ada") == "hello Ada"  # still callable like the function
    assert greet.__name__ == "greet" and greet.__doc__ == "Say hello."
    assert greet.schema() == function_to_schema(greet.func)
    assert greet.schema("openai") == {"type": "function", "function": greet.schema("flat")}
    with pytest.raises(ValueError, match="unknown schema form"):
        greet.schema("xml")  # type: ignore[arg-type]

    @tool(name="search_docs", description="Search the docs.", timeout=2.5)
    def search(query: str) -> list[str]:
        """Ignored summary."""
        return [query]

    assert search.name == "search_docs"
    assert search.description == "Search the docs."
    assert search.timeout == 2.5
    assert search.schema()["name"] == "search_docs"


def test_async_tool_is_detected() -> None:
    @tool
    async def fetch(url: str) -> str:
        """Fetch."""
        return url

    assert fetch.is_async
    assert fetch.run({"url": "x"}) == "x"
