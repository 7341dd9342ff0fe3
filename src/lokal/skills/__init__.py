"""Skills: the workspace guard, built-in tools, the sandbox and Agent Skills (SKILL.md folders)."""

from lokal.skills.agent_skills import Skill, SkillError, SkillLibrary, skill_tools
from lokal.skills.builtin import builtin_tools, register_builtin_tools
from lokal.skills.sandbox import SandboxResult, run_sandboxed, sandbox_capabilities, sandbox_main
from lokal.skills.workspace import Workspace, WorkspaceError

__all__ = [
    "SandboxResult",
    "Skill",
    "SkillError",
    "SkillLibrary",
    "Workspace",
    "WorkspaceError",
    "builtin_tools",
    "register_builtin_tools",
    "run_sandboxed",
    "sandbox_capabilities",
    "sandbox_main",
    "skill_tools",
]
