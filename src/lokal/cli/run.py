"""``lokal run`` (the agent on a question, with live progress) and ``lokal sandbox``."""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path
from typing import Any

from lokal import events as ev
from lokal.cli.common import (
    EXIT_ANSWERED,
    EXIT_CODES,
    EXIT_NO_ANSWER,
    add_command,
    add_model_arguments,
    add_strategy_argument,
    ensure_output_folder,
    profile_from_args,
    require_text,
)
from lokal.config import Profile
from lokal.errors import ConfigError

__all__ = ["EXIT_CODES", "build_agent", "check_run_inputs", "exit_code", "register"]

DEFAULT_SYSTEM = (
    "You are a helpful assistant working in a local workspace. Use the tools to read files, "
    "search, calculate and analyse tables; answer from their results."
)


def exit_code(result: Any) -> int:
    """The exit code of ``lokal run`` for a RunResult (see EXIT_CODES in lokal.cli.common)."""
    return EXIT_ANSWERED if getattr(result, "trusted", result.answered) else EXIT_NO_ANSWER


# ``lokal run -`` reads the question from standard input; a question is refused when its
# estimated tokens (UTF-8 bytes / 4) exceed the profile's input budget (context_budget)
STDIN = "-"
BYTES_PER_TOKEN = 4


def context_budget(profile: Profile) -> int | None:
    """The tokens of input the profile's model takes, as far as the profile says without
    loading it: ``max_input_tokens`` when set, else (llama.cpp, and the mock, which stands in
    for it) ``n_ctx`` minus the tokens it may generate; else None (a transformers model or
    an OpenAI-compatible server without max_input_tokens: its context is its own)."""
    model = profile.model
    if model.max_input_tokens is not None:
        return model.max_input_tokens
    if profile.backend not in ("llamacpp", "mock"):
        return None
    return max(1, model.n_ctx - profile.generation.max_new_tokens)


def read_question(args: argparse.Namespace, profile: Profile) -> str:
    """The question: the argument, or with ``-`` standard input (UTF-8). A ConfigError when
    it holds NUL characters (they are refused, not stripped: text with NULs is most likely a
    binary file given by mistake) or when it is clearly more than the model's context
    (``context_budget``); standard input is read only up to that size."""
    budget = context_budget(profile)
    limit = None if budget is None else budget * BYTES_PER_TOKEN
    if args.question == STDIN:
        import sys

        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:
            raise ConfigError("the question is '-' but there is no standard input to read")
        data = stream.read() if limit is None else stream.read(limit + 1)
        if limit is not None and len(data) > limit:
            raise _too_long("standard input", f"more than {limit:,}", limit + 1, budget, profile)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"standard input is not UTF-8 text (byte {exc.start}); give the question as text"
            ) from None
        where = "standard input"
    else:
        text, where = args.question, "the question"
    if "\x00" in text:
        raise ConfigError(
            f"{where} contains a NUL character (at character {text.index(chr(0))}); NUL is "
            "refused, not stripped: is it a binary file?"
        )
    size = len(text.encode("utf-8"))
    if limit is not None and budget is not None and size > limit:
        raise _too_long(where, f"{size:,}", size, budget, profile)
    return require_text(text, "the question")


def _too_long(where: str, shown: str, size: int, budget: int, profile: Profile) -> ConfigError:
    return ConfigError(
        f"{where} is too long for the context of profile {profile.name!r}: {shown} bytes, "
        f"about {size // BYTES_PER_TOKEN:,} tokens or more, and its model takes at most "
        f"{budget:,} tokens of input (n_ctx minus max_new_tokens, or max_input_tokens); "
        "shorten it or use a profile with a larger context"
    )


def check_run_inputs(args: argparse.Namespace) -> None:
    """The checks of ``lokal run``'s input, before anything is loaded or stored: a
    ConfigError (exit 2, one line) for an unknown profile or backend, an empty question, one
    with NUL characters or too long for the model's context, a workspace or skills folder
    that is not a folder (or holds a malformed SKILL.md), a memory folder or document index
    that does not exist, a blank conversation name, a time budget or max_iterations that
    leaves no room for a step, a trace file that cannot be written (a missing folder for it
    is made, as for every output option), an MCP servers file that cannot be used. An empty
    question would otherwise run, and a small model answers it by echoing its system
    prompt, global memory included. The conversation store is opened only after these."""
    profile = profile_from_args(args)
    from lokal.llm.backends import check_backend

    check_backend(profile)
    args.question = read_question(args, profile)
    for option in ("workspace", "skills", "memory_dir"):
        value = getattr(args, option, None)
        if value is not None and not Path(value).expanduser().is_dir():
            what = "does not exist" if not Path(value).expanduser().exists() else "is a file"
            raise ConfigError(f"--{option} {value!r} {what}; give a folder")
    if getattr(args, "workspace", None) is not None:
        from lokal.skills.workspace import Workspace

        Workspace(args.workspace)  # refuses / and a folder that holds lokal's home
    if getattr(args, "skills", None) is not None:
        from lokal.skills.agent_skills import SkillLibrary

        args.skill_library = SkillLibrary(args.skills)
        args.skill_library.list()  # a malformed SKILL.md: SkillError
    store_path = getattr(args, "store_path", None)
    sqlite_index = store_path is not None and getattr(args, "store", None) != "chroma"
    if sqlite_index and not Path(store_path).expanduser().is_file():
        raise ConfigError(f"--store_path {store_path!r}: no document index there")
    if getattr(args, "conversation", None) is not None:
        args.conversation = require_text(args.conversation, "the conversation name")
    budget = getattr(args, "time_budget", None)
    if budget is not None and not budget > 0:  # also NaN
        raise ConfigError(f"--time_budget must be more than 0 seconds, got {budget}")
    if getattr(args, "max_iterations", 1) < 1:
        raise ConfigError(f"--max_iterations must be at least 1, got {args.max_iterations}")
    trace = getattr(args, "trace", None)
    if trace is not None and getattr(args, "no_trace", False):
        raise ConfigError("--trace and --no-trace contradict each other; give one")
    if trace is not None:
        ensure_output_folder(trace, "--trace")
    if getattr(args, "mcp", None):  # MCP servers: the file, before any server starts
        from lokal.mcp.config import load_mcp_config

        load_mcp_config(args.mcp)


def _run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "question", help="what to ask the agent; - reads it from standard input (UTF-8)"
    )
    add_model_arguments(parser)
    parser.add_argument("--workspace", default=".", help="folder the file tools may use")
    parser.add_argument(
        "--allow-hard-links",
        "--allow_hard_links",
        dest="allow_hard_links",
        action="store_true",
        help="let the tools read workspace files that have more than one hard link (refused "
        "by default: such a file may also be a file outside the workspace)",
    )
    parser.add_argument("--skills", default=None, help="folder of Agent Skills (SKILL.md)")
    parser.add_argument(
        "--max_iterations",
        type=int,
        default=20,
        help="decisions before the run is stopped and a final answer forced (20)",
    )
    add_strategy_argument(parser)
    parser.add_argument("--time_budget", type=float, default=600.0, help="seconds")
    parser.add_argument(
        "--trace",
        default=None,
        metavar="FILE",
        help="write every step as JSON lines here (default: a new file in $LOKAL_HOME/traces)",
    )
    parser.add_argument(
        "--no-trace", "--no_trace", dest="no_trace", action="store_true", help="keep no trace"
    )
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
    parser.add_argument("--mcp", default=None, help="servers.json: tools of MCP servers")


def build_agent(args: argparse.Namespace, resources: contextlib.ExitStack | None = None) -> Any:
    """The Agent for ``lokal run``'s options: built-in tools, skills, profile."""
    from lokal.config import announce
    from lokal.runtime import Agent, AgentSettings
    from lokal.skills.agent_skills import SkillLibrary, skill_tools
    from lokal.skills.builtin import register_builtin_tools
    from lokal.skills.workspace import Workspace
    from lokal.tools.registry import ToolRegistry

    profile = profile_from_args(args)
    if not getattr(args, "quiet", False):  # --quiet: nothing on stderr but errors
        announce(profile)
    workspace = Workspace(args.workspace, allow_hard_links=getattr(args, "allow_hard_links", False))
    registry = ToolRegistry()
    register_builtin_tools(registry, workspace)
    system = DEFAULT_SYSTEM
    if args.skills:
        library = vars(args).get("skill_library") or SkillLibrary(args.skills)
        for item in skill_tools(library, workspace=workspace):  # the sandbox follows its rule
            registry.register(item, replace=True)
        system += "\n\n" + library.catalog_text()
    settings = AgentSettings(
        max_iterations=args.max_iterations,
        strategy=args.strategy or "react",
        time_budget_s=args.time_budget,
    )
    agent = Agent(profile, registry, settings=settings, system_prompt=system)
    _add_memory_and_knowledge(agent, args)
    if getattr(args, "mcp", None):  # last: MCP names avoid every other tool's
        from lokal.mcp.client import open_mcp_tools

        if resources is None:
            raise ConfigError("--mcp needs the run's resources, which stop the servers")
        resources.enter_context(open_mcp_tools(args.mcp, registry=registry))
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
    """Register ``knowledge_search``; the index and the embedding model are opened on its
    first call, so a run that never searches the documents loads neither."""
    from lokal.rag.answer import knowledge_search_tool
    from lokal.rag.retrieval import LazyRetriever

    def open_index():
        from lokal.rag.index import open_rag

        return open_rag(store_kind, store_path=store_path, chroma_url=chroma_url)

    agent.registry.register(knowledge_search_tool(LazyRetriever(open_index)), replace=True)
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


def _repairs(repairs: list[dict[str, Any]]) -> str:
    """The repairs made to a loaded conversation, in one line: unfinished runs by number and
    status, the other repairs counted by kind."""
    unfinished = [r for r in repairs if r.get("kind") == "unfinished_run"]
    others: dict[str, int] = {}
    for repair in repairs:
        if repair.get("kind") != "unfinished_run":
            others[repair.get("kind", "?")] = others.get(repair.get("kind", "?"), 0) + 1
    parts = []
    if unfinished:
        runs = ", ".join(f"run {r.get('run_id')} ({r.get('status')})" for r in unfinished)
        parts.append(f"{len(unfinished)} unfinished run(s) closed by a note: {runs}")
    parts += [f"{count} {kind}" for kind, count in others.items()]
    return _short("repaired on load: " + "; ".join(parts), 300)


class LiveProgress:
    """Prints each step of a run as it happens (rich, on stderr), from the run's typed events
    (``lokal.events``), with a spinner on a terminal while the model loads, decides or tools
    run: elapsed seconds and tokens so far."""

    def __init__(self, console: Any = None) -> None:
        from lokal.live import Spinner, stderr_console

        self.console = console or stderr_console()
        self.spinner = Spinner(self.console)
        self.running: list[str] = []  # tools of the current turn still running
        self.decision_started: float | None = None  # elapsed_s of the last decision_start

    def __call__(self, event: ev.RunEvent) -> None:
        c = self.console
        if isinstance(event, ev.RunStart):
            c.print(f"[bold]question[/]: {_short(event.question, 500)}")
            c.print(f"[dim]tools: {', '.join(event.tools)}[/]")
            if event.history_repairs:
                c.print(f"[yellow]history[/]: {_repairs(event.history_repairs)}")
            memory = event.memory
            if memory and memory.get("notes"):
                chosen = ", ".join(f"#{n['id']} ({n['cosine']:.2f})" for n in memory["selected"])
                c.print(
                    f"[dim]memory: {len(memory['selected'])} of {memory['notes']} note(s) above "
                    f"{memory['min_score']:.2f}{': ' + chosen if chosen else ''}[/]"
                )
            # the run loads what it uses next (ModelLoad events), unless it was given them
            self.spinner.start(f"loading {event.profile}")
        elif isinstance(event, ev.ModelLoad):
            self.spinner.stop()
            if event.component == "embeddings":
                c.print(
                    f"[cyan]embeddings[/] {_short(event.model)} ready for tool preselection "
                    f"({event.duration_s:.1f} s)"
                )
            elif event.component == "memory":
                c.print(
                    f"[cyan]memory[/] {_short(event.model)} ready, notes ranked "
                    f"({event.duration_s:.1f} s)"
                )
            else:
                what = event.component or "model"
                c.print(f"[cyan]{what}[/] {_short(event.model)} ready ({event.duration_s:.1f} s)")
            self.spinner.start("loading")  # another load may follow; a decision relabels it
        elif isinstance(event, ev.DecisionStart):
            self.decision_started = event.elapsed_s
            purpose = "deciding" if event.purpose == "decide" else event.purpose
            self.spinner.start(f"step {event.iteration}: {purpose}")
        elif isinstance(event, ev.ToolStart):
            self.running.append(event.name)
            self.spinner.start(f"running {', '.join(self.running)}")
        elif isinstance(event, ev.DecisionMade):
            self.spinner.stop()
            usage = event.usage
            # the decision's whole time (as the trace viewer shows it: tool preselection,
            # prompt fitting, generation, retries); the model's own part when it differs
            model_s = event.latency_ms / 1000
            wall_s = model_s
            if event.elapsed_s is not None and self.decision_started is not None:
                wall_s = max(model_s, event.elapsed_s - self.decision_started)
            took = f"{wall_s:.1f} s" + (
                f", model {model_s:.1f} s" if wall_s - model_s >= 0.05 else ""
            )
            head = (
                f"[cyan]step {event.iteration}[/] decision ({event.purpose}, "
                f"{took}, {usage['prompt_tokens']}→"
                f"{usage['completion_tokens']} tokens, {len(event.attempts)} attempt(s))"
            )
            c.print(head)
            message = event.ai_message
            if event.status != "success" or message is None:
                error = event.error or {}
                c.print(f"  [red]unusable reply[/]: {_short(error.get('message', ''))}")
            elif message["tool_calls"]:
                for call in message["tool_calls"]:
                    c.print(f"  → {call['name']}({_short(call['args'], 100)})")
            else:
                c.print(f"  answer: {_short(message['content'])}")
        elif isinstance(event, ev.ToolEnd):
            if event.name in self.running:
                self.running.remove(event.name)
            if not self.running:
                self.spinner.stop()
            style = "green" if event.status == "success" else "red"
            detail = "" if event.status == "success" else f": {_short(event.error)}"
            c.print(
                f"    [{style}]{event.name} {event.status}[/] "
                f"({event.duration_s * 1000:.0f} ms){detail}"
            )
        elif isinstance(event, ev.Guard):
            c.print(f"  [yellow]guard[/]: {event.guard}")
        elif isinstance(event, ev.Final):
            self.spinner.stop()
            c.print(
                f"[bold]{event.status}[/] after {event.iterations} step(s), "
                f"{event.duration_s:.1f} s: {event.stop_reason} (answer: {event.source})"
            )


def run_command(args: argparse.Namespace) -> int:
    from lokal.progress import listening
    from lokal.runtime import JsonlTrace

    check_run_inputs(args)  # before any model is loaded
    with contextlib.ExitStack() as resources:  # what the run holds open: MCP servers
        agent = build_agent(args, resources)
        trace = trace_link = None
        if not getattr(args, "no_trace", False):  # every run is kept (docs/tracing.md)
            from lokal.viewer.store import new_trace_path

            trace = JsonlTrace(args.trace or new_trace_path())
            if args.trace:  # listed by `lokal traces list` too: a link in $LOKAL_HOME/traces
                from lokal.viewer.store import link_trace

                trace_link = link_trace(trace.path)
        progress = None if args.quiet else LiveProgress()
        # the run loads the model itself, as a step of its own (a model_load event after
        # run_start) that its time budget does not count; the progress display shows it
        if trace:
            agent.subscribe(trace)
        if progress:
            agent.subscribe(progress)
        try:
            history = agent.memory.history() if hasattr(agent.memory, "history") else []
            with listening(progress.spinner if progress else lambda fields: None):
                result = agent.run(args.question, history=history)
        finally:
            if progress:
                progress.spinner.stop()
            if trace:
                trace.close()
                if trace_link is not None:
                    from lokal.viewer.store import copy_trace_link

                    copy_trace_link(trace_link, trace.path)
    if args.json:
        loads = [e for e in result.events if isinstance(e, ev.ModelLoad)]
        model_s = sum(e.duration_s for e in loads if e.component is None)  # the chat model
        record = {
            **result.to_dict(),
            "model_load_s": round(model_s, 4),
            "load_s": round(sum(e.duration_s for e in loads), 4),  # every load step
            "exit_code": exit_code(result),
        }
        print(json.dumps(record, ensure_ascii=False, indent=2))
    else:
        print(result.answer)
    if exit_code(result) != EXIT_ANSWERED:
        import sys

        print(
            f"lokal run: no trusted answer ({result.source}): {result.stop_reason}", file=sys.stderr
        )
    return exit_code(result)


def _sandbox_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a Python file to run in the sandbox")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds")
    parser.add_argument("--memory", type=int, default=512, help="MB of address space")
    parser.add_argument("--workspace", default=None, help="shown read-only at ./workspace")
    parser.add_argument(
        "--allow-hard-links",
        "--allow_hard_links",
        dest="allow_hard_links",
        action="store_true",
        help="show workspace files that have more than one hard link (refused by default: "
        "such a file may also be a file outside the workspace)",
    )
    parser.add_argument(
        "--mode",
        choices=["auto", "bwrap", "process"],
        default="auto",
        help="isolation: bubblewrap, a limited process, or the best available (auto)",
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
    if args.allow_hard_links:
        argv.append("--allow-hard-links")
    return sandbox_main(argv)


def register(commands: argparse._SubParsersAction) -> None:
    """``lokal run`` and ``lokal sandbox``."""
    add_command(
        commands,
        "run",
        "the agent: a question in, tool runs, an answer out",
        _run_arguments,
        run_command,
    )
    add_command(
        commands,
        "sandbox",
        "run a Python file in the sandbox; prints one JSON object",
        _sandbox_arguments,
        sandbox_command,
    )
