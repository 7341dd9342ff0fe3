"""Agent Skills: folders with a ``SKILL.md`` the model reads, then runs through ``code_execution``.

A skills directory holds one folder per skill::

    skills/weather-forecast/
        SKILL.md            # YAML front matter (name, description) + markdown instructions
        scripts/weather_helper.py
        data/weather.json

The system prompt lists only names and descriptions (``SkillLibrary.catalog_text``). The model
calls ``read_skill`` to get the instructions, then ``code_execution`` to run a script in the
sandbox with a copy of the skill folder as its working directory, and answers from the real
output. ``code_execution`` is always offered as a tool: hiding it (a bug of an earlier agent)
leaves the model reading instructions it cannot follow, and it invents the results.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from lokal.errors import ConfigError
from lokal.skills.sandbox import run_sandboxed
from lokal.skills.workspace import Workspace
from lokal.tools.registry import Tool, tool

__all__ = [
    "Skill",
    "SkillCommand",
    "SkillError",
    "SkillLibrary",
    "command_tools",
    "documented_commands",
    "parse_skill_file",
    "skill_tools",
]

_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)^---[ \t]*(?:\r?\n|\Z)(.*)\Z", re.S | re.M)
_COMMAND_IN_BODY = re.compile(r"\bpython3?\s+scripts/[^\s`\"']+[^\n`\"]*")
_PYTHON = re.compile(r"^python(3(\.\d+)?)?$")


class SkillError(ConfigError):
    """A skill is unknown, or its SKILL.md is malformed (the message names the file)."""


class Skill:
    """One parsed skill folder."""

    def __init__(self, name: str, description: str, body: str, path: Path) -> None:
        self.name = name
        self.description = description
        self.body = body
        self.path = path

    def __repr__(self) -> str:
        return f"Skill({self.name!r}, {str(self.path)!r})"

    def files(self) -> list[str]:
        """Every file of the skill (relative, forward slashes), hidden files and caches left out."""
        found = []
        for current, dirs, names in os.walk(self.path):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
            for name in sorted(names):
                if not name.startswith("."):
                    found.append((Path(current) / name).relative_to(self.path).as_posix())
        return found

    def example_command(self) -> str | None:
        """The first ``python scripts/…`` command in the instructions, else one for a script."""
        match = _COMMAND_IN_BODY.search(self.body)
        if match:
            return match.group(0).strip()
        scripts = [f for f in self.files() if f.startswith("scripts/") and f.endswith(".py")]
        return f"python {scripts[0]}" if scripts else None


def parse_skill_file(path: Path) -> Skill:
    """Parse a ``SKILL.md``; raise SkillError naming the file when it is malformed."""
    import yaml

    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillError(f"{path}: cannot read: {exc}") from None
    match = _FRONT_MATTER.match(text)
    if not match:
        raise SkillError(
            f"{path}: SKILL.md must start with YAML front matter between two '---' lines"
        )
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        raise SkillError(f"{path}: invalid YAML front matter: {exc}") from None
    if not isinstance(meta, dict):
        raise SkillError(f"{path}: the front matter must be a mapping with name and description")
    for key in ("name", "description"):
        value = meta.get(key)
        if not isinstance(value, str) or not value.strip():
            raise SkillError(f"{path}: front matter field '{key}' must be a non-empty string")
    name = meta["name"].strip()
    if len(name) > 64 or any(c.isspace() or c in "/\\" for c in name):
        raise SkillError(f"{path}: skill name {name!r} must be at most 64 characters, no spaces")
    return Skill(name, " ".join(meta["description"].split()), match.group(2).strip(), path.parent)


class SkillLibrary:
    """The skills found in one directory (rescanned on every call, so edits show at once).

    With ``strict`` (the default) a malformed ``SKILL.md`` raises SkillError; otherwise it is
    skipped and its error kept in ``problems``.
    """

    def __init__(self, skills_dir: str | os.PathLike[str], *, strict: bool = True) -> None:
        self.root = Path(skills_dir)
        if not self.root.is_dir():
            raise SkillError(f"skills directory {str(self.root)!r} does not exist")
        self.strict = strict
        self.problems: list[str] = []

    def _scan(self) -> dict[str, Skill]:
        skills: dict[str, Skill] = {}
        self.problems = []
        for folder in sorted(p for p in self.root.iterdir() if p.is_dir()):
            manifest = folder / "SKILL.md"
            if folder.name.startswith(".") or not manifest.is_file():
                continue
            try:
                skill = parse_skill_file(manifest)
                if skill.name in skills:
                    raise SkillError(
                        f"{manifest}: skill name {skill.name!r} is already used by "
                        f"{skills[skill.name].path / 'SKILL.md'}"
                    )
            except SkillError as exc:
                if self.strict:
                    raise
                self.problems.append(str(exc))
                continue
            skills[skill.name] = skill
        return skills

    def list(self) -> list[dict[str, str]]:
        """``[{"name", "description"}]`` of every skill, sorted by name."""
        return [
            {"name": s.name, "description": s.description}
            for s in sorted(self._scan().values(), key=lambda s: s.name)
        ]

    def names(self) -> list[str]:
        return sorted(self._scan())

    def get(self, skill_name: str) -> Skill:
        """The skill called ``skill_name`` (also matched case-insensitively or by folder)."""
        skills = self._scan()
        wanted = (skill_name or "").strip()
        if wanted in skills:
            return skills[wanted]
        for skill in skills.values():
            if wanted.casefold() in (skill.name.casefold(), skill.path.name.casefold()):
                return skill
        close = difflib.get_close_matches(wanted, list(skills), n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        available = ", ".join(sorted(skills)) or "(none)"
        raise SkillError(f"unknown skill '{skill_name}'.{hint} Available skills: {available}")

    def read(self, skill_name: str) -> dict[str, Any]:
        """The instructions and file list of a skill, with a hint on running its scripts."""
        skill = self.get(skill_name)
        example = skill.example_command()
        if example:
            call = f'{{"command": "{example}", "skill_name": "{skill.name}"}}'
            hint = f"run scripts with code_execution, e.g. {call}"
        else:
            hint = "this skill has no scripts; follow its instructions"
        return {
            "name": skill.name,
            "description": skill.description,
            "body": skill.body,
            "files": skill.files(),
            "hint": hint,
        }

    def catalog_text(self) -> str:
        """A short text for the system prompt: skill names and descriptions only."""
        entries = self.list()
        if not entries:
            return "No skills are installed."
        lines = ["Skills (call read_skill with a skill name to get its instructions):"]
        lines += [f"- {e['name']}: {e['description']}" for e in entries]
        lines.append(
            "Skill scripts run through the code_execution tool, e.g. "
            '{"command": "python scripts/<script>.py ...", "skill_name": "<skill>"}; '
            "never make up a script's output."
        )
        return "\n".join(lines)

    def find_script(self, script: str) -> list[tuple[Skill, str]]:
        """Skills holding a file that ``script`` names: ``[(skill, relative path)]``."""
        wanted = script.replace("\\", "/")
        found = []
        for skill in self._scan().values():
            relative = _match_file(skill, wanted)
            if relative is not None:
                found.append((skill, relative))
        return found


def _match_file(skill: Skill, wanted: str) -> str | None:
    """The file of ``skill`` that a model-written path means (exact, suffix or unique name)."""
    files = [f for f in skill.files() if f.endswith(".py")]
    wanted = wanted.removeprefix("./")
    if wanted in files:
        return wanted
    suffix = [f for f in files if wanted.endswith("/" + f)]
    if len(suffix) == 1:
        return suffix[0]
    by_name = [f for f in files if f.rsplit("/", 1)[-1] == wanted.rsplit("/", 1)[-1]]
    return by_name[0] if len(by_name) == 1 else None


def skill_tools(
    library: SkillLibrary,
    workspace: str | os.PathLike[str] | Workspace | None = None,
    sandbox_defaults: dict[str, Any] | None = None,
) -> list[Tool]:
    """The ``read_skill`` and ``code_execution`` tools for ``library``.

    ``sandbox_defaults`` are keyword arguments for ``run_sandboxed`` (timeout, memory_mb…);
    ``workspace`` (a folder or a ``Workspace``, whose ``allow_hard_links`` the sandbox
    follows) is shown read-only at ``./workspace`` inside the sandbox.
    """
    defaults = dict(sandbox_defaults or {})
    sandbox_timeout = float(defaults.get("timeout", 10))

    @tool
    def read_skill(skill_name: str) -> dict[str, Any]:
        """Read a skill's instructions (its SKILL.md) and list its files.

        Call this before using a skill, then run the skill's scripts with code_execution.

        Args:
            skill_name: The skill's name as listed in the system prompt, e.g. "weather-forecast".
        """
        return library.read(skill_name)

    @tool(timeout=sandbox_timeout + 30)
    def code_execution(
        code: str | None = None, command: str | None = None, skill_name: str | None = None
    ) -> dict[str, Any]:
        """Run Python code or a skill script in an isolated sandbox; returns stdout and stderr.

        Give exactly one of code or command. The sandbox has no network; the workspace is
        read-only at ./workspace.

        Args:
            code: Python source to run, e.g. "print(2 ** 10)".
            command: A python command line, e.g.
                "python scripts/weather_helper.py current --location Beijing".
            skill_name: The skill whose folder the command runs in, e.g. "weather-forecast".
        """
        if (code is None) == (command is None):
            raise ValueError("give exactly one of code or command")
        skill: Skill | None = library.get(skill_name) if skill_name else None
        if code is not None:
            files = skill.path if skill else None
            result = run_sandboxed(code, files_from=files, workspace=workspace, **defaults)
            return result.to_dict()
        assert command is not None
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise ValueError(f"cannot split command {command!r}: {exc}") from None
        if not argv or not _PYTHON.match(os.path.basename(argv[0])):
            raise ValueError(
                "command must start with python or python3, e.g. "
                '"python scripts/weather_helper.py current --location Beijing"'
            )
        argv[0] = sys.executable
        script_at = next((i for i, a in enumerate(argv[1:], 1) if not a.startswith("-")), None)
        if script_at is not None and argv[script_at - 1] not in ("-c", "-m"):
            script = argv[script_at]
            if skill is not None:
                relative = _match_file(skill, script)
                if relative is None:
                    listed = ", ".join(skill.files())
                    raise ValueError(f"skill '{skill.name}' has no script {script!r}: {listed}")
                argv[script_at] = relative
            else:
                owners = library.find_script(script)
                if len(owners) > 1:
                    names = ", ".join(s.name for s, _ in owners)
                    raise ValueError(
                        f"{script!r} exists in several skills ({names}); pass skill_name"
                    )
                if owners:
                    skill, argv[script_at] = owners[0]
        files = skill.path if skill else None
        result = run_sandboxed(command=argv, files_from=files, workspace=workspace, **defaults)
        return result.to_dict()

    tools = [*command_tools(library, code_execution)]
    names = library.names()
    if names:
        # The names a model may pass, as an enum (a grammar then cannot invent one), and the
        # catalog in the description (tool preselection ranks read_skill by what skills do).
        parameters = json.loads(json.dumps(read_skill.parameters))
        parameters["properties"]["skill_name"]["enum"] = names
        catalog = "; ".join(f"{s['name']}: {s['description']}" for s in library.list())
        read_skill = dataclasses.replace(
            read_skill,
            parameters=parameters,
            description=read_skill.description + "\n\nSkills: " + catalog,
        )
    return [read_skill, code_execution, *tools]


# -- a skill's documented commands as tools ----------------------------------------------

_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.M)


@dataclasses.dataclass(frozen=True)
class SkillCommand:
    """A command a skill documents (a fenced one-line ``python scripts/…`` block): its
    script, sub-command, ``--option value`` pairs as shown, and the heading above it."""

    skill: str
    script: str
    subcommand: str | None
    options: tuple[tuple[str, str], ...]
    heading: str

    @property
    def tool_name(self) -> str:
        stem = self.subcommand or Path(self.script).stem
        return re.sub(r"[^A-Za-z0-9_]+", "_", f"{self.skill}_{stem}").strip("_")


def documented_commands(skill: Skill) -> list[SkillCommand]:
    """The commands ``skill`` documents in its SKILL.md, each once (by tool name)."""
    found: dict[str, SkillCommand] = {}
    for match in _FENCE.finditer(skill.body):
        lines = [line.strip() for line in match.group(1).splitlines() if line.strip()]
        if len(lines) != 1 or not _COMMAND_IN_BODY.fullmatch(lines[0]):
            continue
        try:
            argv = shlex.split(lines[0])
        except ValueError:
            continue
        script, rest = argv[1], argv[2:]
        subcommand = rest.pop(0) if rest and not rest[0].startswith("-") else None
        options: list[tuple[str, str]] | None = []
        while rest and options is not None:
            flag = rest.pop(0)
            if not flag.startswith("--") or not rest or rest[0].startswith("--"):
                options = None  # a flag without a value or a second positional: not simple
            else:
                options.append((flag[2:], rest.pop(0)))
        if options is None:
            continue
        headings = _HEADING.findall(skill.body[: match.start()])
        command = SkillCommand(
            skill.name, script, subcommand, tuple(options), headings[-1] if headings else ""
        )
        found.setdefault(command.tool_name, command)
    return list(found.values())


def _command_tool(command: SkillCommand, skill: Skill, code_execution: Tool) -> Tool:
    """A tool that runs ``command`` with the model's option values through
    ``code_execution`` (the same sandbox, the same checks)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for option, example in command.options:
        name = option.replace("-", "_")
        if re.fullmatch(r"-?\d+", example):  # a number has a default: the documented value
            properties[name] = {
                "type": "integer",
                "description": f"--{option}, e.g. {example}",
                "default": int(example),
            }
        else:  # a word names what to act on: the question must give it
            properties[name] = {"type": "string", "description": f"--{option}, e.g. {example!r}"}
            required.append(name)
    what = command.heading or (command.subcommand or Path(command.script).stem)
    description = (
        f"{what} ({skill.name} skill): {skill.description} Runs "
        f"`python {command.script}{' ' + command.subcommand if command.subcommand else ''} "
        f"...` in the sandbox and returns what it prints."
    )

    def run(**values: Any) -> Any:
        argv = ["python", command.script, *([command.subcommand] if command.subcommand else [])]
        for option, _ in command.options:
            value = values.get(option.replace("-", "_"))
            if value is not None:
                argv += [f"--{option}", str(value)]
        result = code_execution.run({"command": shlex.join(argv), "skill_name": skill.name})
        if result.get("status") != "ok":  # the script's own message (e.g. the cities it knows)
            detail = (result.get("stderr") or result.get("stdout") or "").strip()[-1000:]
            raise RuntimeError(
                f"{shlex.join(argv)} failed ({result.get('status')}, exit "
                f"{result.get('exit_code')}): {detail or 'no output'}"
            )
        stdout = result.get("stdout") or ""
        try:
            return json.loads(stdout)  # a script that prints JSON: its values, not the text
        except json.JSONDecodeError:
            return {"stdout": stdout}

    return Tool(
        name=command.tool_name,
        description=description,
        parameters={"type": "object", "properties": properties, "required": required},
        func=run,
        timeout=code_execution.timeout,
    )


def command_tools(library: SkillLibrary, code_execution: Tool) -> list[Tool]:
    """One tool per documented command of every skill (``weather-forecast_current(location)``
    for ``python scripts/weather_helper.py current --location Beijing``): a small model
    fills a tool's arguments far more reliably than it writes a command line after reading
    the instructions."""
    tools: list[Tool] = []
    for name in library.names():
        skill = library.get(name)
        tools += [_command_tool(c, skill, code_execution) for c in documented_commands(skill)]
    return tools
