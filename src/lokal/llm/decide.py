"""generate_ai_message(): the decision, in three visible steps.

1. ``resolve_request`` (``lokal.llm.request``): every option the caller passed resolved once
   into a typed ``DecisionRequest`` (the legacy ``mode`` translated at the door);
2. ``run_attempts`` (``lokal.llm.attempts``): ask the backend, retry with the reason, stop
   on the time budget;
3. the named reply checks (``lokal.llm.replies.REPLY_CHECKS``) each attempt's reply passes.

Bad model output never raises: it is a result with ``status: "error"`` and the reason, with
every attempt recorded. A caller's mistake (missing file, unknown profile, malformed
messages) raises ConfigError or MessageError with a message saying how to fix it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lokal.config import Profile
from lokal.llm.attempts import run_attempts
from lokal.llm.backends import Backend
from lokal.llm.request import done_calls, resolve_request, turn_results, validate_conversation
from lokal.records import Decision

__all__ = ["done_calls", "generate_ai_message", "turn_results", "validate_conversation"]


def generate_ai_message(
    model_config: str | Path | dict | Profile | None,
    messages: list[dict[str, Any]],
    tools_schema: Any = None,
    mode: str | None = None,
    model_name: str | None = None,
    tool_calling: str | None = None,
    *,
    strategy: str | None = None,
    backend: Backend | str | None = None,
    purpose: str | None = None,
    tool_choice: Any = None,
    parallel_tool_calls: bool = True,
    response_format: Any = None,
) -> Decision:
    """Ask the model for the next step and return the decision record.

    ``tools_schema``: the tools on offer in any accepted form (``ToolSpec``s, ``@tool``
    functions, OpenAI or flat dicts, BFCL types), checked before the model runs.
    ``strategy``: ``react`` (one decision) or ``plan_execute`` (a plan on the first turn, step
    decisions after tool results). ``tool_calling`` overrides the profile's
    ``prompt_json | builtin | constrained | staged``. ``backend`` replaces the profile's
    backend: a name (``"mock"``) or an instance (tests pass a ScriptedBackend).
    ``mode`` is the original command lines' name for the first axis (``prompt_json``,
    ``plan_execute``, or ``mock`` for the mock backend). ``purpose="final"`` asks for a final
    answer with tools disabled.

    ``tool_choice`` (OpenAI's): ``"none"`` disables the tools (as ``purpose="final"``),
    ``"auto"`` (default) lets the model choose, ``"required"`` makes a reply without a call
    unusable (constrained: no answer branch in the grammar; staged: the call is forced;
    otherwise such a reply is retried with a corrective message); a named function or
    ``allowed_tools`` restricts the tools to those names first (named: required).
    ``parallel_tool_calls=False`` allows one call per reply (grammar ``maxItems: 1``, staged:
    no second call; a parsed reply with more keeps the first, the others are recorded in
    ``parse.dropped_calls``). ``response_format`` (``json_object`` or ``json_schema``) makes
    the answer's content JSON matching it, by grammar where the mode has one and checked (and
    retried) in every mode.
    """
    request = resolve_request(
        model_config,
        messages,
        tools_schema,
        mode,
        model_name,
        tool_calling,
        strategy=strategy,
        backend=backend,
        purpose=purpose,
        tool_choice=tool_choice,
        parallel_tool_calls=parallel_tool_calls,
        response_format=response_format,
    )
    return run_attempts(request)
