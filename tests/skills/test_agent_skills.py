"""Agent Skills: SKILL.md folders, read_skill and code_execution."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers import DATA, REPO
from lokal.messages import read_tool_result
from lokal.skills import SkillError, SkillLibrary, skill_tools
from lokal.tools import ToolRegistry

ROOT = REPO
SKILLS = ROOT / "data" / "skills"
WORKSPACE = ROOT / "data" / "workspace"
WEATHER = json.loads((SKILLS / "weather-forecast" / "data" / "weather.json").read_text())


@pytest.fixture
def library() -> SkillLibrary:
    return SkillLibrary(SKILLS)


@pytest.fixture
def registry(library: SkillLibrary) -> ToolRegistry:
    return ToolRegistry(skill_tools(library, workspace=WORKSPACE, sandbox_defaults={"timeout": 20}))


def _write_skill(root: Path, folder: str, text: str) -> Path:
    path = root / folder
    path.mkdir(parents=True)
    (path / "SKILL.md").write_text(text, encoding="utf-8")
    return path / "SKILL.md"


def _run(registry: ToolRegistry, args: dict[str, Any]) -> dict[str, Any]:
    message = registry.execute({"id": "call_001", "name": "code_execution", "args": args})
    return read_tool_result(message)


def test_list_and_catalog(library: SkillLibrary) -> None:
    listed = library.list()
    assert [s["name"] for s in listed] == ["weather-forecast"]
    assert "forecast" in listed[0]["description"]
    catalog = library.catalog_text()
    assert "- weather-forecast: " + listed[0]["description"] in catalog
    assert "read_skill" in catalog and "code_execution" in catalog
    assert "--location" not in catalog  # only names and descriptions, not the body


def test_read_skill(library: SkillLibrary) -> None:
    skill = library.read("weather-forecast")
    assert skill["name"] == "weather-forecast"
    assert "python scripts/weather_helper.py current --location" in skill["body"]
    assert "---" not in skill["body"].splitlines()[0]  # front matter is stripped
    assert skill["files"] == ["SKILL.md", "data/weather.json", "scripts/weather_helper.py"]
    assert skill["hint"].startswith("run scripts with code_execution, e.g. {")
    hint_call = json.loads(skill["hint"].split("e.g. ", 1)[1])
    assert hint_call == {
        "command": "python scripts/weather_helper.py current --location Beijing",
        "skill_name": "weather-forecast",
    }
    assert library.read("Weather-Forecast")["name"] == "weather-forecast"


def test_unknown_skill_lists_available(library: SkillLibrary) -> None:
    with pytest.raises(SkillError) as info:
        library.read("weather-forcast")
    message = str(info.value)
    assert "unknown skill 'weather-forcast'" in message
    assert "Did you mean 'weather-forecast'?" in message
    assert message.endswith("Available skills: weather-forecast")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("# no front matter\n", "must start with YAML front matter"),
        ("---\nname: [unclosed\n---\nbody\n", "invalid YAML front matter"),
        ("---\nname: x\n---\nbody\n", "'description' must be a non-empty string"),
        ("---\n- a\n- b\n---\nbody\n", "must be a mapping"),
        ("---\nname: two words\ndescription: d\n---\n", "no spaces"),
    ],
)
def test_malformed_skill_names_the_file(tmp_path: Path, text: str, message: str) -> None:
    manifest = _write_skill(tmp_path, "broken", text)
    _write_skill(tmp_path, "good", "---\nname: good\ndescription: A good skill.\n---\nDo it.\n")
    with pytest.raises(SkillError) as info:
        SkillLibrary(tmp_path).list()
    assert str(manifest) in str(info.value) and message in str(info.value)
    lenient = SkillLibrary(tmp_path, strict=False)
    assert lenient.list() == [{"name": "good", "description": "A good skill."}]
    assert len(lenient.problems) == 1 and str(manifest) in lenient.problems[0]


def test_duplicate_names_and_missing_dir(tmp_path: Path) -> None:
    text = "---\nname: same\ndescription: d\n---\n"
    _write_skill(tmp_path, "a", text)
    _write_skill(tmp_path, "b", text)
    with pytest.raises(SkillError, match="already used"):
        SkillLibrary(tmp_path).list()
    with pytest.raises(SkillError, match="does not exist"):
        SkillLibrary(tmp_path / "nope")


def test_skill_without_scripts(tmp_path: Path) -> None:
    _write_skill(tmp_path, "tone", "---\nname: tone\ndescription: Write politely.\n---\nBe kind.")
    skill = SkillLibrary(tmp_path).read("tone")
    assert skill["files"] == ["SKILL.md"]
    assert "no scripts" in skill["hint"]


def test_both_tools_are_always_offered(registry: ToolRegistry) -> None:
    # and one tool per documented command of each skill (tested below)
    assert registry.names()[:2] == ["read_skill", "code_execution"]
    schema = {s["function"]["name"]: s["function"] for s in registry.schemas()}
    props = schema["code_execution"]["parameters"]["properties"]
    assert set(props) == {"code", "command", "skill_name"}
    assert "weather_helper.py" in props["command"]["description"]
    assert schema["read_skill"]["parameters"]["required"] == ["skill_name"]


def test_read_skill_tool(registry: ToolRegistry) -> None:
    message = registry.execute(
        {"id": "c1", "name": "read_skill", "args": {"skill_name": "weather-forecast"}}
    )
    assert read_tool_result(message)["output"]["name"] == "weather-forecast"
    message = registry.execute({"id": "c2", "name": "read_skill", "args": {"skill_name": "x"}})
    assert message["status"] == "error"
    assert "weather-forecast" in read_tool_result(message)["error"]


def test_code_execution_runs_weather_script(registry: ToolRegistry) -> None:
    result = _run(
        registry,
        {
            "command": "python scripts/weather_helper.py current --location Beijing",
            "skill_name": "weather-forecast",
        },
    )
    output = result["output"]
    assert result["status"] == "success" and output["status"] == "ok", output
    data = json.loads(output["stdout"])
    beijing = WEATHER["cities"]["Beijing"]["current"]
    assert data == {"location": "Beijing", "country": "China", **beijing}


def test_code_execution_finds_the_skill_from_the_script_path(registry: ToolRegistry) -> None:
    # No skill_name, and the absolute path of the script, as an earlier agent wrote it.
    result = _run(
        registry, {"command": "python3 /path/to/weather_helper.py forecast -l London --days 2"}
    )
    data = json.loads(result["output"]["stdout"])
    assert data["location"] == "London" and data["days"] == 2
    assert data["forecast"] == WEATHER["cities"]["London"]["forecast"][:2]


def test_code_execution_reports_script_failure(registry: ToolRegistry) -> None:
    result = _run(
        registry,
        {
            "command": "python scripts/weather_helper.py current --location Paris",
            "skill_name": "weather-forecast",
        },
    )
    assert result["output"]["status"] == "error" and result["output"]["exit_code"] == 2
    assert "supported: Beijing" in result["output"]["stderr"]


def test_code_execution_runs_code_with_workspace(registry: ToolRegistry) -> None:
    code = "import csv\nrows = list(csv.DictReader(open('workspace/data/sales.csv')))\n"
    code += "print(sum(int(r['units']) for r in rows))"
    result = _run(registry, {"code": code})
    assert result["output"]["status"] == "ok"
    with (WORKSPACE / "data" / "sales.csv").open() as handle:
        import csv

        expected = sum(int(r["units"]) for r in csv.DictReader(handle))
    assert int(result["output"]["stdout"]) == expected


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "exactly one of code or command"),
        ({"code": "print(1)", "command": "python x.py"}, "exactly one of code or command"),
        ({"command": "bash -c 'cat /etc/passwd'"}, "must start with python"),
        ({"command": "python 'unclosed"}, "cannot split command"),
        (
            {"command": "python scripts/nope.py", "skill_name": "weather-forecast"},
            "has no script 'scripts/nope.py'",
        ),
        ({"code": "print(1)", "skill_name": "nope"}, "unknown skill 'nope'"),
    ],
)
def test_code_execution_argument_errors(
    registry: ToolRegistry, args: dict[str, Any], message: str
) -> None:
    result = _run(registry, args)
    assert result["status"] == "error"
    assert message in result["error"]


# -- documented commands as tools ---------------------------------------------------------


def test_each_documented_command_of_a_skill_is_a_tool_with_its_options():
    from lokal.skills.agent_skills import documented_commands

    library = SkillLibrary(DATA / "skills")
    commands = documented_commands(library.get("weather-forecast"))
    assert [(c.tool_name, c.subcommand, c.options) for c in commands] == [
        ("weather_forecast_current", "current", (("location", "Beijing"),)),
        ("weather_forecast_forecast", "forecast", (("location", "London"), ("days", "3"))),
    ]
    tools = {t.name: t for t in skill_tools(library)}
    forecast = tools["weather_forecast_forecast"].parameters
    assert forecast["required"] == ["location"]  # a word must come from the question
    assert forecast["properties"]["days"] == {
        "type": "integer",
        "description": "--days, e.g. 3",
        "default": 3,
    }
    assert "Forecast (weather-forecast skill)" in tools["weather_forecast_forecast"].description


def test_a_command_tool_runs_the_script_in_the_sandbox_and_returns_its_json():
    tools = {t.name: t for t in skill_tools(SkillLibrary(DATA / "skills"))}
    current = tools["weather_forecast_current"].run({"location": "Beijing"})
    assert current["location"] == "Beijing" and "temperature_c" in current
    forecast = tools["weather_forecast_forecast"].run({"location": "London", "days": 2})
    assert len(forecast["forecast"]) == 2
    # the script's own error, with what it supports, becomes the tool's error
    with pytest.raises(RuntimeError, match="supported: Beijing"):
        tools["weather_forecast_current"].run({"location": "Paris"})


def test_commands_with_bare_flags_or_several_lines_are_not_tools(tmp_path):
    from lokal.skills.agent_skills import documented_commands

    skill = tmp_path / "s" / "tool-x"
    (skill / "scripts").mkdir(parents=True)
    (skill / "scripts" / "x.py").write_text("print(1)\n")
    (skill / "SKILL.md").write_text(
        "---\nname: tool-x\ndescription: x\n---\n\n"
        "```\npython scripts/x.py run --verbose\n```\n\n"
        "```\npython scripts/x.py a --k 1\npython scripts/x.py b --k 2\n```\n\n"
        "```\npython scripts/x.py show --name foo\n```\n"
    )
    commands = documented_commands(SkillLibrary(tmp_path / "s").get("tool-x"))
    assert [c.tool_name for c in commands] == ["tool_x_show"]
