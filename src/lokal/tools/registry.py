"""Tool objects, the ``@tool`` decorator and ``ToolRegistry`` (validation and execution).

Execution model
---------------
``ToolRegistry.execute_many`` runs the tool calls of one model turn concurrently, one daemon
thread per call (at most ``max_workers`` at a time). Every call has its own timeout, counted
from the moment its thread starts it; a call still waiting for a free worker when its timeout
has elapsed since submission fails too, so one hung tool can never block the caller.

A Python thread cannot be killed. A tool that runs past its timeout is *abandoned*: the caller
gets an error ToolMessage ("timed out after Ns") at once, while the thread keeps running in
the background until the function returns by itself; its result is dropped. The threads are
daemon threads, so an abandoned tool does not keep the interpreter alive at exit (this is why
``concurrent.futures.ThreadPoolExecutor`` is not used: its workers are joined at exit). Tools
that can hang on I/O should take their own timeouts; code that must be stoppable belongs in
the sandbox (``lokal.skills.sandbox``), which runs in a process that is killed on timeout.

Async tools (``async def``) are run with ``asyncio.run`` inside their worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import difflib
import enum
import functools
import inspect
import json
import logging
import math
import threading
import time
import types
import typing
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Literal

from lokal.messages import ToolMessage, call_id, decode_arguments, make_tool_message
from lokal.tools.schema import ToolSpec
from lokal.tools.signature import function_to_schema

__all__ = ["EventCallback", "Tool", "ToolRegistry", "to_jsonable", "tool"]

log = logging.getLogger("lokal.tools")

EventCallback = Callable[[str, dict[str, Any]], None]


# --- Tool -----------------------------------------------------------------------------------


def _strip_annotated(tp: Any) -> Any:
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def _is_model(tp: Any) -> bool:
    return inspect.isclass(tp) and callable(getattr(tp, "model_validate", None))


def _needs_conversion(tp: Any) -> bool:
    """True when a type hint contains a pydantic model (duck-typed) or an Enum."""
    tp = _strip_annotated(tp)
    if inspect.isclass(tp) and (_is_model(tp) or issubclass(tp, enum.Enum)):
        return True
    return any(_needs_conversion(arg) for arg in typing.get_args(tp))


def _convert(tp: Any, value: Any) -> Any:
    """``value`` (JSON data) turned into the Enum members / pydantic models ``tp`` names."""
    tp = _strip_annotated(tp)
    if value is None:
        return None
    if inspect.isclass(tp) and issubclass(tp, enum.Enum):
        return tp(value)
    if _is_model(tp):
        return tp.model_validate(value)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            if arg is type(None) or not _needs_conversion(arg):
                continue
            try:
                return _convert(arg, value)
            except (ValueError, TypeError):
                continue
        return value
    if origin in (list, set, frozenset, tuple) and args and isinstance(value, list):
        return origin(_convert(args[0], item) for item in value)
    if origin is dict and len(args) == 2 and isinstance(value, dict):
        return {key: _convert(args[1], item) for key, item in value.items()}
    return value


@dataclasses.dataclass(eq=False)
class Tool(ToolSpec):
    """A ``ToolSpec`` with the function that runs it. Calling the Tool calls the function."""

    func: Callable[..., Any] = dataclasses.field(default=None, repr=False)  # type: ignore[assignment]
    timeout: float | None = None
    converters: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not callable(self.func):
            raise TypeError(f"a tool must be callable, got {type(self.func).__name__}")
        super().__post_init__()

    @classmethod
    def from_function(
        cls,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
    ) -> Tool:
        if isinstance(func, Tool):
            return dataclasses.replace(
                func,
                name=name or func.name,
                description=func.description if description is None else description,
                timeout=func.timeout if timeout is None else timeout,
            )
        if not callable(func):
            raise TypeError(f"a tool must be callable, got {type(func).__name__}")
        schema = function_to_schema(func, name=name, description=description)
        try:
            hints = typing.get_type_hints(inspect.unwrap(func), include_extras=True)
        except Exception:
            hints = {}
        converters = {
            param: hint
            for param, hint in hints.items()
            if param != "return" and _needs_conversion(hint)
        }
        made = cls(
            func=func,
            name=schema["name"],
            description=schema["description"],
            parameters=schema["parameters"],
            timeout=timeout,
            converters=converters,
        )
        functools.update_wrapper(made, func, updated=())  # type: ignore[arg-type]
        return made

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(inspect.unwrap(self.func))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def convert_args(self, args: dict[str, Any]) -> dict[str, Any]:
        """Arguments as the function expects them (dicts → pydantic models, values → Enums)."""
        if not self.converters:
            return args
        converted = dict(args)
        for param, hint in self.converters.items():
            if param in converted:
                converted[param] = _convert(hint, converted[param])
        return converted

    def run(self, args: dict[str, Any]) -> Any:
        """Call the function with keyword arguments; coroutines are run to completion."""
        result = self.func(**self.convert_args(args))
        if inspect.isawaitable(result):
            return asyncio.run(_await(result))
        return result


async def _await(awaitable: Any) -> Any:
    return await awaitable


def tool(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
) -> Any:
    """Turn a function into a ``Tool``; usable bare (``@tool``) or with options.

    ``@tool(name="search", description="...", timeout=5)`` overrides the name, the description
    taken from the docstring, and gives the tool its own timeout in seconds.
    """

    def wrap(target: Callable[..., Any]) -> Tool:
        return Tool.from_function(target, name=name, description=description, timeout=timeout)

    if func is not None:
        return wrap(func)
    return wrap


# --- results --------------------------------------------------------------------------------


def _finite(value: Any) -> Any:
    """Replace NaN and infinities (not valid JSON) by None, recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def to_jsonable(value: Any) -> Any:
    """A tool's return value as JSON data: as is when serialisable, else a dump or ``str()``."""
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False)
        return value
    except ValueError:
        return _finite(value)
    except TypeError:
        pass
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(dataclasses.asdict(value))
    for method in ("model_dump", "to_dict"):
        dump = getattr(value, method, None)
        if callable(dump):
            try:
                dumped = dump(mode="json") if method == "model_dump" else dump()
                json.dumps(dumped, ensure_ascii=False, default=str)
            except Exception:
                continue
            return json.loads(json.dumps(_finite(dumped), ensure_ascii=False, default=str))
    if isinstance(value, set | frozenset | tuple):
        return to_jsonable(list(value))
    return str(value)


# --- registry -------------------------------------------------------------------------------


@dataclasses.dataclass
class _Job:
    index: int
    call: dict[str, Any]
    tool: Tool | None
    args: dict[str, Any]
    timeout: float | None
    submit_perf: float = 0.0
    start_perf: float | None = None
    start_time: float | None = None
    finished: bool = False
    reported: bool = False  # its tool_end was given to on_event
    message: ToolMessage | None = None


class ToolRegistry:
    """Named tools with their schemas; validates and executes tool calls."""

    def __init__(self, tools: Iterable[Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools:
            self.register(item)

    # -- registration ---------------------------------------------------------------------
    def register(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
        replace: bool = False,
    ) -> Tool:
        """Add a function or ``Tool``; a second tool with the same name needs ``replace``."""
        made = Tool.from_function(func, name=name, description=description, timeout=timeout)
        if made.name in self._tools and not replace:
            raise ValueError(f"a tool named {made.name!r} is already registered")
        self._tools[made.name] = made
        return made

    def unregister(self, name: str) -> None:
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            raise KeyError(self._unknown(name)) from None

    def names(self) -> list[str]:
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def schemas(self, form: Literal["openai", "flat"] = "openai") -> list[dict[str, Any]]:
        """Every tool's schema, in registration order."""
        return [item.schema(form) for item in self._tools.values()]

    def _unknown(self, name: str) -> str:
        available = ", ".join(self._tools) or "(none)"
        close = difflib.get_close_matches(str(name), list(self._tools), n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        return f"unknown tool '{name}'.{hint} Available tools: {available}"

    # -- validation -----------------------------------------------------------------------
    def validate(self, name: str, args: Any) -> str | None:
        """None when ``args`` fit the tool's parameters, else a readable error message."""
        if name not in self._tools:
            return self._unknown(name)
        return self._tools[name].validate(args)

    # -- execution ------------------------------------------------------------------------
    def execute(
        self,
        call: dict[str, Any],
        timeout: float | None = None,
        *,
        on_event: EventCallback | None = None,
    ) -> ToolMessage:
        """Run one call and return its ToolMessage.

        ``timeout`` (seconds) overrides the tool's own timeout; with neither, the call runs
        until it returns. ``on_event`` works as in ``execute_many``.
        """
        job = self._prepare(0, call, timeout, override=True)
        return self._run_jobs([job], 1, on_event)[0]

    def execute_many(
        self,
        calls: Iterable[dict[str, Any]],
        *,
        max_workers: int | None = None,
        default_timeout: float | None = 30.0,
        on_event: EventCallback | None = None,
    ) -> list[ToolMessage]:
        """Run the calls of one turn concurrently; ToolMessages come back in call order.

        Each call's timeout is the tool's own ``timeout`` or else ``default_timeout``
        (None: no limit). ``on_event(kind, payload)`` is called with ``"tool_start"`` and
        ``"tool_end"`` for every call (also for unknown tools, invalid arguments and
        timeouts). Invocations are serialised by a lock, so the callback need not be
        thread-safe, but it runs in worker threads and must not block for long.

        ``tool_start`` payload: ``index, call_id, name, args, start_perf, start_time``.
        ``tool_end`` payload adds ``end_perf, end_time, duration_s, status`` ("success" or
        "error"), ``error`` (text or None), ``timed_out`` (bool) and ``message`` (the ToolMessage,
        so a subscriber can store each result as soon as it exists). ``*_perf`` stamps are
        ``time.perf_counter()``, ``*_time`` stamps are ``time.time()``.
        """
        jobs = [
            self._prepare(index, call, default_timeout, override=False)
            for index, call in enumerate(calls)
        ]
        if not jobs:
            return []
        workers = max(1, min(max_workers or len(jobs), len(jobs)))
        return self._run_jobs(jobs, workers, on_event)

    def _prepare(
        self, index: int, call: dict[str, Any], timeout: float | None, *, override: bool
    ) -> _Job:
        call = dict(call)
        call.setdefault("id", None)
        if not call["id"]:
            call["id"] = call_id(index)
        call["name"] = str(call.get("name") or "")
        args = call.get("args")
        with contextlib.suppress(ValueError):  # tolerate JSON-encoded arguments and None
            args = decode_arguments(args)[0]
        item = self._tools.get(call["name"])
        if item is not None and item.timeout is not None:
            # execute_many: the tool's own timeout wins; execute: an explicit timeout wins.
            use_tool_timeout = timeout is None if override else True
            if use_tool_timeout:
                timeout = item.timeout
        return _Job(index=index, call=call, tool=item, args=args, timeout=timeout)

    def _run_jobs(
        self, jobs: list[_Job], workers: int, on_event: EventCallback | None
    ) -> list[ToolMessage]:
        condition = threading.Condition()
        emit_lock = threading.RLock()
        slots = threading.Semaphore(workers)

        def emit(kind: str, payload: dict[str, Any]) -> None:
            if on_event is None:
                return
            with emit_lock:
                try:
                    on_event(kind, payload)
                except Exception:
                    log.exception("on_event callback failed for %s", kind)

        def base(job: _Job) -> dict[str, Any]:
            return {
                "index": job.index,
                "call_id": job.call["id"],
                "name": job.call["name"],
                "args": job.args,
            }

        def start(job: _Job) -> bool:
            # holding emit_lock: a timeout's tool_end cannot overtake this tool_start
            with emit_lock:
                with condition:
                    if job.finished:
                        return False
                    job.start_perf = time.perf_counter()
                    job.start_time = time.time()
                    condition.notify_all()
                emit(
                    "tool_start",
                    {**base(job), "start_perf": job.start_perf, "start_time": job.start_time},
                )
            return True

        def finish(job: _Job, output: Any, error: str | None, timed_out: bool = False) -> None:
            end_perf, end_time = time.perf_counter(), time.time()
            with condition:
                if job.finished:
                    return
                job.finished = True
                job.message = make_tool_message(job.call, output=output, error=error)
                started = job.start_perf is not None
                condition.notify_all()
            if not started:  # never ran: still give the trace a start record
                job.start_perf, job.start_time = end_perf, end_time
                emit("tool_start", {**base(job), "start_perf": end_perf, "start_time": end_time})
            emit(
                "tool_end",
                {
                    **base(job),
                    "start_perf": job.start_perf,
                    "start_time": job.start_time,
                    "end_perf": end_perf,
                    "end_time": end_time,
                    "duration_s": end_perf - (job.start_perf or end_perf),
                    "status": "error" if error is not None else "success",
                    "error": error,
                    "timed_out": timed_out,
                    "message": job.message,
                },
            )
            # the batch returns only once every tool_end is out: a run's events never
            # arrive after the run has ended (a worker finishing races the waiting loop)
            with condition:
                job.reported = True
                condition.notify_all()

        def work(job: _Job) -> None:
            with slots:
                if not start(job):
                    return
                assert job.tool is not None
                try:
                    output = to_jsonable(job.tool.run(job.args))
                except Exception as exc:
                    finish(job, None, f"{type(exc).__name__}: {exc}")
                else:
                    finish(job, output, None)

        runnable: list[_Job] = []
        for job in jobs:
            if job.tool is None:
                start(job)
                finish(job, None, self._unknown(job.call["name"]))
                continue
            problem = self.validate(job.tool.name, job.args)
            if problem is not None:
                start(job)
                finish(job, None, f"invalid arguments for tool '{job.tool.name}': {problem}")
                continue
            runnable.append(job)

        for job in runnable:
            job.submit_perf = time.perf_counter()
            thread = threading.Thread(
                target=work, args=(job,), name=f"lokal-tool-{job.call['name']}", daemon=True
            )
            thread.start()

        while True:
            expired: list[_Job] = []
            with condition:
                pending = [job for job in runnable if not job.reported]
                if not pending:
                    break
                now = time.perf_counter()
                nearest: float | None = None
                for job in pending:
                    if job.finished or job.timeout is None:
                        continue  # finished: its tool_end is on its way
                    began = job.start_perf if job.start_perf is not None else job.submit_perf
                    deadline = began + job.timeout
                    if now >= deadline:
                        expired.append(job)
                    elif nearest is None or deadline < nearest:
                        nearest = deadline
                if not expired:
                    condition.wait(None if nearest is None else max(0.0, nearest - now))
            for job in expired:
                waited = "" if job.start_perf is not None else " (waiting for a free worker)"
                finish(job, None, f"timed out after {job.timeout:g}s{waited}", timed_out=True)

        return [job.message for job in jobs if job.message is not None]
