"""``lokal run`` (the agent on a question, with live progress) and ``lokal sandbox``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from lokal.cli import add_model_arguments, subcommand

DEFAULT_SYSTEM = (
    "You are a helpful assistant working in a local workspace. Use the tools to read files, "
    "search, calculate and analyse tables; answer from their results."
)


EXIT_CODES = """exit codes:
  0    the run ended with an answer written by the model (also after a guard: the model
       was asked for a final answer without tools)
  1    stopped without an answer: the model gave no usable reply even without tools, or
       the time budget ran out first; the output lists the tool results in hand
  2    bad input or configuration (an option, a missing file, an unknown profile)
  130  interrupted (Ctrl-C)"""


def exit_code(result: Any) -> int:
    """The exit code of ``lokal run`` for a RunResult (see EXIT_CODES)."""
    return 0 if result.answered else 1


def _run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EXIT_CODES
    parser.add_argument("question", help="what to ask the agent")
    add_model_arguments(parser)
    parser.add_argument("--workspace", default=".", help="folder the file tools may use")
    parser.add_argument("--skills", default=None, help="folder of Agent Skills (SKILL.md)")
    parser.add_argument("--max_iterations", type=int, default=20)
    parser.add_argument("--strategy", choices=["react", "plan_execute"], default="react")
    parser.add_argument("--time_budget", type=float, default=600.0, help="seconds")
    parser.add_argument("--trace", default=None, help="write every step as JSON lines")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--quiet", action="store_true", help="no live progress")
    parser.add_argument(
        "--conversation", default=None, help="continue (or start) this stored conversation"
    )
    parser.add_argument(
        "--memory_dir", default=None, help="global memory *.md (default $LOKAL_HOME/memory)"
    )
    parser.add_argument("--summarize", action="store_true", help="save a summary of the run")
    parser.add_argument(
        "--store",
        choices=["sqlite", "chroma"],
        default=None,
        help="document index for knowledge_search (default: the SQLite index if it exists)",
    )
    parser.add_argument("--store_path", default=None, help="SQLite index file")
    parser.add_argument("--chroma_url", default=None, help="Chroma server URL")


def build_agent(args: argparse.Namespace) -> Any:
    """The Agent for ``lokal run``'s options: built-in tools, skills, profile."""
    from lokal.config import announce, load_profile
    from lokal.runtime import Agent, AgentSettings
    from lokal.skills.agent_skills import SkillLibrary, skill_tools
    from lokal.skills.builtin import register_builtin_tools
    from lokal.skills.workspace import Workspace
    from lokal.tools.registry import ToolRegistry

    profile = load_profile(args.model_config, args.model_name, tool_calling=args.tool_calling)
    announce(profile)
    workspace = Workspace(args.workspace)
    registry = ToolRegistry()
    register_builtin_tools(registry, workspace)
    system = DEFAULT_SYSTEM
    if args.skills:
        library = SkillLibrary(args.skills)
        for item in skill_tools(library, workspace=workspace.root):
            registry.register(item, replace=True)
        system += "\n\n" + library.catalog_text()
    settings = AgentSettings(
        max_iterations=args.max_iterations,
        strategy=args.strategy,
        time_budget_s=args.time_budget,
    )
    agent = Agent(profile, registry, settings=settings, system_prompt=system)
    _add_memory_and_knowledge(agent, args)
    return agent


def _add_memory_and_knowledge(agent: Any, args: argparse.Namespace) -> None:
    """Memory (global + selected notes, the ``remember`` tool, the run recorded step by step
    in a conversation) and, when an index exists or ``--store`` is given, ``knowledge_search``."""
    from pathlib import Path

    from lokal.memory.store import Memory

    memory = Memory(
        memory_dir=getattr(args, "memory_dir", None),
        conversation=getattr(args, "conversation", None),
        summarize=getattr(args, "summarize", False),
    )
    store_kind = getattr(args, "store", None)
    store_path = getattr(args, "store_path", None)
    if store_kind is None:
        from lokal.rag.stores import default_store_path

        store_kind = "sqlite" if Path(store_path or default_store_path()).is_file() else None
    if store_kind is not None:
        _add_knowledge(agent, store_kind, store_path, getattr(args, "chroma_url", None))
    memory.attach(agent)


def _add_knowledge(agent: Any, store_kind: str, store_path: Any, chroma_url: Any) -> None:
    from lokal.rag.answer import knowledge_search_tool
    from lokal.rag.index import open_rag
    from lokal.rag.retrieval import Retriever

    store, embedder = open_rag(store_kind, store_path=store_path, chroma_url=chroma_url)
    agent.registry.register(knowledge_search_tool(Retriever(store, embedder)), replace=True)
    agent.system_prompt = (agent.system_prompt or "") + (
        "\n\nUse knowledge_search to look facts up in the indexed documents."
    )


def _short(value: Any, limit: int = 120) -> str:
    """One line of at most ``limit`` characters, escaped for rich markup (model text may hold
    square brackets)."""
    from rich.markup import escape

    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return escape(text if len(text) <= limit else text[: limit - 1] + "…")


class LiveProgress:
    """Prints each step of a run as it happens (rich)."""

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(stderr=True, highlight=False)

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        c = self.console
        if kind == "run_start":
            c.print(f"[bold]question[/]: {_short(event['question'], 500)}")
            c.print(f"[dim]tools: {', '.join(event['tools'])}[/]")
        elif kind == "decision":
            usage = event["usage"]
            head = (
                f"[cyan]step {event['iteration']}[/] decision ({event['purpose']}, "
                f"{event['latency_ms'] / 1000:.1f} s, {usage['prompt_tokens']}→"
                f"{usage['completion_tokens']} tokens, {len(event['attempts'])} attempt(s))"
            )
            c.print(head)
            message = event["ai_message"]
            if event["status"] != "success":
                c.print(f"  [red]unusable reply[/]: {_short(event['error']['message'])}")
            elif message["tool_calls"]:
                for call in message["tool_calls"]:
                    c.print(f"  → {call['name']}({_short(call['args'], 100)})")
            else:
                c.print(f"  answer: {_short(message['content'])}")
        elif kind == "tool_end":
            style = "green" if event["status"] == "success" else "red"
            detail = "" if event["status"] == "success" else f": {_short(event['error'])}"
            c.print(
                f"    [{style}]{event['name']} {event['status']}[/] "
                f"({event['duration_s'] * 1000:.0f} ms){detail}"
            )
        elif kind == "guard":
            c.print(f"  [yellow]guard[/]: {event['guard']}")
        elif kind == "final":
            c.print(
                f"[bold]{event['status']}[/] after {event['iterations']} step(s), "
                f"{event['duration_s']:.1f} s: {event['stop_reason']}"
            )


@subcommand("run", "the agent: a question in, tool runs, an answer out", _run_arguments)
def run_command(args: argparse.Namespace) -> int:
    from lokal.runtime import JsonlTrace

    agent = build_agent(args)
    trace = JsonlTrace(args.trace) if args.trace else None
    if trace:
        agent.subscribe(trace)
    if not args.quiet:
        agent.subscribe(LiveProgress())
    try:
        history = agent.memory.history() if hasattr(agent.memory, "history") else []
        result = agent.run(args.question, history=history)
    finally:
        if trace:
            trace.close()
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
    else:
        print(result.answer)
    return exit_code(result)


def _sandbox_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a Python file to run in the sandbox")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds")
    parser.add_argument("--memory", type=int, default=512, help="MB of address space")
    parser.add_argument("--workspace", default=None, help="shown read-only at ./workspace")
    parser.add_argument("--mode", choices=["auto", "bwrap", "process"], default="auto")


@subcommand(
    "sandbox", "run a Python file in the sandbox; prints one JSON object", _sandbox_arguments
)
def sandbox_command(args: argparse.Namespace) -> int:
    from lokal.skills.sandbox import sandbox_main

    argv = [
        args.file,
        "--timeout",
        str(args.timeout),
        "--memory",
        str(args.memory),
        "--mode",
        args.mode,
    ]
    if args.workspace:
        argv += ["--workspace", str(Path(args.workspace))]
    return sandbox_main(argv)
