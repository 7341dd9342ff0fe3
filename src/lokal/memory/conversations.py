"""Conversations in SQLite: every run's messages, tool calls, results, timings and tokens.

``ConversationRecorder`` subscribes to an Agent's events and writes each step in its own
transaction as it happens (the run and its question at its first decision, once the model is
loaded, so that a run refused before, by an unknown backend or a missing model file, stores
nothing; an AIMessage with tool calls when its first call starts, the ToolMessages of a turn
in call order as they end, the run's outcome as its last assistant message at ``final``), so
a crash loses at most the steps in flight. A run stopped by Ctrl-C is stored as
``interrupted`` with what it had (``Agent.run`` ends it with such a ``final`` event).
Positions are allocated inside ``BEGIN IMMEDIATE`` transactions, so two runs appending to one
conversation at once interleave without clashing; each run's messages keep their order.

``ConversationStore.history`` gives a conversation back as a valid OpenAI conversation to
continue: what a crash or an older version left incomplete (a call without a result, results
out of call order, call ids used twice, a run that never ended) is repaired on load, and the
repairs are listed (``History.repairs``), logged, and reported by the next run
(``run_start.history_repairs``, and ``lokal run``'s progress). A run that never ended (no
status: its process was killed) and whose process is gone is ``abandoned``: the next run
recorded in the conversation stores that status; its question stays in the history, closed by
an assistant note saying it was not answered (repair ``unfinished_run``).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from lokal.events import DecisionMade, Final, ModelLoad, RunEvent, RunStart, ToolEnd, ToolStart
from lokal.memory.db import connect
from lokal.messages import make_tool_message, repair_conversation
from lokal.sqlite import transaction

__all__ = ["ConversationRecorder", "ConversationStore", "History", "sanitize_history"]

log = logging.getLogger("lokal.memory")


class ConversationStore:
    """Read and write conversations in ``lokal.db`` (default: ``$LOKAL_HOME/lokal.db``)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.conn = connect(path)
        self._lock = threading.Lock()

    def close(self) -> None:
        self.conn.close()

    def _write(self, action):
        """Run ``action(conn)`` in one IMMEDIATE transaction (waits on busy_timeout)."""
        with self._lock, transaction(self.conn):
            return action(self.conn)

    # -- writing ---------------------------------------------------------------------------

    def delete(self, name: str) -> dict[str, int] | None:
        """Delete conversation ``name`` with its runs and messages, in one transaction: how
        many runs and messages went, or None when there is no such conversation."""

        def delete(conn: sqlite3.Connection) -> dict[str, int] | None:
            row = conn.execute("SELECT id FROM conversations WHERE name=?", (name,)).fetchone()
            if row is None:
                return None
            conv = row[0]
            messages = conn.execute(
                "DELETE FROM messages WHERE conversation_id=?", (conv,)
            ).rowcount
            runs = conn.execute("DELETE FROM runs WHERE conversation_id=?", (conv,)).rowcount
            conn.execute("DELETE FROM conversations WHERE id=?", (conv,))
            return {"runs": runs, "messages": messages}

        return self._write(delete)

    def conversation_id(self, name: str, create: bool = True) -> int | None:
        row = self.conn.execute("SELECT id FROM conversations WHERE name=?", (name,)).fetchone()
        if row or not create:
            return row["id"] if row else None

        def insert(conn: sqlite3.Connection) -> int:
            conn.execute(
                "INSERT OR IGNORE INTO conversations (name, created) VALUES (?, ?)",
                (name, time.time()),
            )
            return conn.execute("SELECT id FROM conversations WHERE name=?", (name,)).fetchone()[0]

        return self._write(insert)

    def start_run(self, conversation: str, question: str, profile: str | None = None) -> int:
        conv = self.conversation_id(conversation)
        return self._write(
            lambda conn: (
                conn.execute(
                    "INSERT INTO runs (conversation_id, question, profile, started, owner)"
                    " VALUES (?,?,?,?,?)",
                    (conv, question, profile, time.time(), f"{socket.gethostname()}:{os.getpid()}"),
                ).lastrowid
            )
        )

    def append(
        self,
        run_id: int,
        message: dict[str, Any],
        *,
        latency_ms: float | None = None,
        usage: dict[str, Any] | None = None,
    ) -> int:
        """Add one message to a run, in its own transaction; returns its position."""
        usage = usage or {}

        def insert(conn: sqlite3.Connection) -> int:
            conv = conn.execute("SELECT conversation_id FROM runs WHERE id=?", (run_id,)).fetchone()
            position = conn.execute(
                "SELECT COALESCE(MAX(position), 0) + 1 FROM messages WHERE conversation_id=?",
                (conv[0],),
            ).fetchone()[0]
            conn.execute(
                "INSERT INTO messages (conversation_id, run_id, position, role, body, created,"
                " latency_ms, prompt_tokens, completion_tokens) VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    conv[0],
                    run_id,
                    position,
                    message["role"],
                    json.dumps(message, ensure_ascii=False, default=str),
                    time.time(),
                    latency_ms,
                    usage.get("prompt_tokens"),
                    usage.get("completion_tokens"),
                ),
            )
            return position

        return self._write(insert)

    def finish_run(self, run_id: int, **fields: Any) -> None:
        allowed = {
            "status",
            "answer",
            "stop_reason",
            "prompt_tokens",
            "completion_tokens",
            "duration_s",
            "summary",
        }
        values = {k: v for k, v in fields.items() if k in allowed}
        values["finished"] = time.time()
        sets = ", ".join(f"{key}=?" for key in values)
        self._write(
            lambda conn: conn.execute(
                f"UPDATE runs SET {sets} WHERE id=?", (*values.values(), run_id)
            )
        )

    def mark_abandoned(self, run_id: int) -> bool:
        """Give run ``run_id`` the status ``abandoned`` if it still has none (its process
        went away without ending it: killed, or crashed); whether it was marked."""
        return bool(
            self._write(
                lambda conn: (
                    conn.execute(
                        "UPDATE runs SET status='abandoned', stop_reason=? "
                        "WHERE id=? AND status IS NULL",
                        (ABANDONED_REASON, run_id),
                    ).rowcount
                )
            )
        )

    def set_summary(self, run_id: int, summary: str) -> None:
        self._write(lambda c: c.execute("UPDATE runs SET summary=? WHERE id=?", (summary, run_id)))

    # -- reading ---------------------------------------------------------------------------

    def list(self) -> list[dict[str, Any]]:
        rows = self.conn.execute(
            "SELECT c.name, c.created, COUNT(DISTINCT r.id) AS runs,"
            " (SELECT COUNT(*) FROM messages m WHERE m.conversation_id=c.id) AS messages,"
            " MAX(r.started) AS last_run FROM conversations c"
            " LEFT JOIN runs r ON r.conversation_id=c.id GROUP BY c.id ORDER BY c.name"
        ).fetchall()
        return [dict(row) for row in rows]

    def runs(self, name: str) -> list[dict[str, Any]]:
        conv = self.conversation_id(name, create=False)
        if conv is None:
            return []
        runs = [
            dict(row)
            for row in self.conn.execute(
                "SELECT * FROM runs WHERE conversation_id=? ORDER BY id", (conv,)
            )
        ]
        for run in runs:
            run["messages"] = [
                {
                    **json.loads(row["body"]),
                    "_meta": {
                        "position": row["position"],
                        "created": row["created"],
                        "latency_ms": row["latency_ms"],
                        "prompt_tokens": row["prompt_tokens"],
                        "completion_tokens": row["completion_tokens"],
                    },
                }
                for row in self.conn.execute(
                    "SELECT * FROM messages WHERE run_id=? ORDER BY position", (run["id"],)
                )
            ]
        return runs

    def exists(self, name: str) -> bool:
        return self.conversation_id(name, create=False) is not None

    def unstored(self, name: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The messages of ``messages`` (a client's whole conversation, as OpenAI clients
        resend it each turn) that conversation ``name`` does not hold yet: those after the
        last assistant message it holds (the same calls, by id; or, without calls, the same
        text), system messages left out. All of them when it holds none of its assistant
        messages."""
        conv = self.conversation_id(name, create=False)
        stored: set[Any] = set()
        if conv is not None:
            with self._lock:
                rows = self.conn.execute(
                    "SELECT body FROM messages WHERE conversation_id=? AND role='assistant'",
                    (conv,),
                ).fetchall()
            stored = {_assistant_key(json.loads(row["body"])) for row in rows}
        start = 0
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if message.get("role") == "assistant" and _assistant_key(message) in stored:
                start = index + 1
                break
        return [m for m in messages[start:] if m.get("role") != "system"]

    def history(self, name: str) -> History:
        """The earlier messages of a conversation, for continuing it: every run, run by run,
        in order, repaired into a valid OpenAI conversation (``repair_conversation``: a call
        without a result, as a killed run leaves, gets an error result saying it was not run).

        A run without a status (or ``abandoned``) and without its outcome (killed, or still
        going on in another process: its calls in flight count as not run) is closed by an
        assistant note saying its question was not answered: repair ``unfinished_run``, whose
        ``status`` is ``abandoned`` (its process is gone) or ``running``.

        The repairs are in ``.repairs`` (each with the ``run_id`` it concerns) and logged as
        a warning; the stored rows are left as they are (the recorder of the next run marks
        the abandoned ones, see ``ConversationRecorder``).
        """
        messages: list[dict[str, Any]] = []
        run_ids: list[int] = []
        unfinished: list[dict[str, Any]] = []
        for run in self.runs(name):
            for message in run["messages"]:
                message.pop("_meta", None)
                messages.append(message)
                run_ids.append(run["id"])
            # a run with a status ended as it meant to (a served turn may end with its calls,
            # which the client answers in the next run); one without, or abandoned, did not
            unended = run["status"] in (None, "abandoned")
            if unended and run["messages"] and not _answered(run["messages"]):
                status = run["status"] or ("running" if _alive(run.get("owner")) else "abandoned")
                unfinished.append({"kind": "unfinished_run", "run_id": run["id"], "status": status})
                messages.append(_unfinished_note(status))
                run_ids.append(run["id"])
        history = sanitize_history(messages)
        for repair in history.repairs:
            if 0 <= repair.get("index", -1) < len(run_ids):
                repair["run_id"] = run_ids[repair["index"]]
        history.repairs.extend(unfinished)
        if history.repairs:
            log.warning(
                "conversation %r: repaired its stored history on load: %s",
                name,
                "; ".join(_describe_repair(r) for r in history.repairs),
            )
        return history

    def export(self, name: str, fmt: str = "json") -> str:
        runs = self.runs(name)
        if not runs and not self.exists(name):
            raise KeyError(f"no conversation named {name!r}")
        if fmt == "json":
            return json.dumps({"name": name, "runs": runs}, ensure_ascii=False, indent=2)
        if fmt != "markdown":
            raise ValueError("format must be json or markdown")
        lines = [f"# Conversation {name}", ""]
        for run in runs:
            tokens = f"{run['prompt_tokens'] or 0}→{run['completion_tokens'] or 0} tokens"
            lines += [
                f"## Run {run['id']}: {run['question']}",
                "",
                f"status: {run['status'] or 'unfinished'}, {run['duration_s'] or 0:.2f} s, "
                f"{tokens}",
                "",
            ]
            for message in run["messages"]:
                lines.append(f"**{message['role']}**" + _describe(message))
                lines.append("")
            if run.get("summary"):
                lines += [f"_summary_: {run['summary']}", ""]
        return "\n".join(lines)


def _assistant_key(message: dict[str, Any]) -> tuple[str, Any]:
    calls = message.get("tool_calls") or []
    if calls:
        return ("calls", tuple(call.get("id") for call in calls))
    return ("text", str(message.get("content") or "").strip())


def _describe(message: dict[str, Any]) -> str:
    if message["role"] == "tool":
        return f" `{message.get('name')}` ({message.get('status')}): {message.get('content')}"
    calls = message.get("tool_calls") or []
    shown = "; ".join(
        f"`{c['name']}({json.dumps(c.get('args'), ensure_ascii=False)})`" for c in calls
    )
    return ": " + (message.get("content") or "") + (f" → {shown}" if shown else "")


class History(list):
    """A list of messages to continue a conversation from, with the ``repairs`` it took (see
    ``lokal.messages.repair_conversation``). ``Agent.run(question, history=...)`` reports
    them in its ``run_start`` event (``history_repairs``)."""

    def __init__(self, messages=(), repairs: list[dict[str, Any]] | None = None) -> None:
        super().__init__(messages)
        self.repairs: list[dict[str, Any]] = list(repairs or [])


def sanitize_history(messages: list[dict[str, Any]]) -> History:
    """Stored messages as a valid conversation to continue: system messages are left out,
    a call without a result gets an error result saying it was not run, a turn's results
    come in call order, call ids are unique; ``.repairs`` lists what was changed."""
    positions = [i for i, m in enumerate(messages) if m.get("role") != "system"]
    kept, repairs = repair_conversation([messages[i] for i in positions])
    for repair in repairs:
        repair["index"] = positions[repair["index"]]  # the index in ``messages``
    return History(kept, repairs)


def _describe_repair(repair: dict[str, Any]) -> str:
    where = f" in run {repair['run_id']}" if "run_id" in repair else ""
    call = f" {repair.get('name')} ({repair.get('call_id')})" if repair.get("call_id") else ""
    status = f" ({repair['status']})" if repair.get("status") else ""
    return f"{repair['kind']}{call}{where}{status}"


# Runs that ended without an answer. A run stopped by Ctrl-C is stored as ``interrupted``,
# closed by its outcome (an assistant message saying so, with the tool results in hand); a
# run whose process was killed is left without a status: on load it is ``abandoned`` (its
# owner process is gone; the next run recorded in the conversation stores that status) or
# ``running`` (its process is alive). Such a run's question is kept in the history, closed by
# an assistant note saying it was not answered (repair ``unfinished_run``), so the next run
# never sees questions left hanging one after another.
ABANDONED_REASON = "the run never ended: its process stopped (killed or crashed) before it did"
_NOTES = {
    "running": "No answer yet: this run is still going on in another process.",
    "abandoned": "No final answer: this run stopped before it ended (its process was killed "
    "or crashed); the question above was not answered.",
}


def _answered(messages: list[dict[str, Any]]) -> bool:
    """Whether a run's stored messages end with its outcome (an assistant message without
    tool calls)."""
    last = messages[-1]
    return last.get("role") == "assistant" and not last.get("tool_calls")


def _unfinished_note(status: str) -> dict[str, Any]:
    return {"role": "assistant", "content": _NOTES[status], "tool_calls": []}


def _alive(owner: str | None) -> bool:
    """Whether the process ``owner`` (``host:pid``) that writes a run still runs. A process
    of another host is taken to be alive (it cannot be asked); no owner (a run written
    before owners were recorded) is taken to be gone."""
    if not owner:
        return False
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname():
        return True
    try:
        number = int(pid)
    except ValueError:
        return False
    if number == os.getpid():
        return True
    try:
        os.kill(number, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: another user's process, alive
        return True
    return True


class ConversationRecorder:
    """An Agent subscriber that writes each step of each run to a conversation, as it happens.

        recorder = ConversationRecorder(store, "project-x")
        recorder.attach(agent)       # subscribes to the agent's events
        agent.run(question, history=store.history("project-x"))

    One recorder serves one agent running one run at a time (use one Agent per thread).

    What is stored is the run's conversation, valid on its own: the question; an AIMessage
    with tool calls once its first call starts (a reply that a guard stopped before it ran,
    a repeated call or a spent time budget, is not stored); its ToolMessages in call order,
    each as soon as it and every result before it exist (tools of one turn run in parallel
    and end in any order); and the run's outcome as its last assistant message: the model's
    answer, or, when the model wrote none, the answer the run ended with.
    """

    def __init__(self, store: ConversationStore, conversation: str) -> None:
        self.store = store
        self.conversation = conversation
        self.run_id: int | None = None
        self._pending: RunStart | None = None  # a run not stored yet: before its 1st decision
        self._closed = False  # the run's final event was recorded
        self._lock = threading.RLock()
        self._reset()

    def _reset(self) -> None:
        self._decision: DecisionMade | None = None  # the latest decision, not yet stored
        self._turn: list[str] = []  # the call ids of the turn being run, in call order
        self._calls: dict[str, dict[str, Any]] = {}  # the turn's calls by id
        self._results: dict[str, tuple[dict[str, Any], float | None]] = {}
        self._written = 0  # how many of the turn's results are stored

    def attach(self, agent: Any) -> ConversationRecorder:
        agent.subscribe(self)
        return self

    def __call__(self, event: RunEvent) -> None:
        with self._lock:
            self._record(event)

    def _record(self, event: RunEvent) -> None:
        if isinstance(event, RunStart):
            # stored at its first decision, once the model is loaded: a run that fails before
            # (an unknown backend, a model file that is missing) leaves nothing in the store
            self._reset()
            self.run_id, self._pending, self._closed = None, event, False
            return
        if self._pending is not None:
            if isinstance(event, ModelLoad):
                return
            if isinstance(event, Final) and event.status == "error":
                self._pending = None  # failed before its first decision: nothing is stored
                return
            self._open()
        if self.run_id is None or self._closed:
            return  # no run, or events after its end (a tool still running after Ctrl-C)
        elif isinstance(event, DecisionMade):
            self._decision = event if event.ai_message else None
        elif isinstance(event, ToolStart):
            self._start_turn(event.call_id)
        elif isinstance(event, ToolEnd):
            self._start_turn(event.call_id)
            latency = event.duration_s * 1000
            if event.call_id in self._turn:
                self._results[event.call_id] = (event.message, latency)
                self._write_results()
            else:  # not a call of the turn (a caller's own tool events): store as it comes
                self.store.append(self.run_id, event.message, latency_ms=latency)
        elif isinstance(event, Final):
            # a run stopped by Ctrl-C (or an error) closes its turn: a call still running
            # gets an error result saying so
            stopped = event.status in ("interrupted", "error")
            self._write_results(everything=True, fill=event.stop_reason if stopped else None)
            decision = self._decision
            message = decision.ai_message if decision else None
            if message and not message.get("tool_calls") and message["content"] == event.answer:
                assert decision is not None
                self._append_decision(decision)
            else:  # no answer from the model: the run's own answer is its outcome
                answer = {"role": "assistant", "content": event.answer, "tool_calls": []}
                self.store.append(self.run_id, answer)
            self._reset()
            self._closed = True
            usage = event.usage or {}
            self.store.finish_run(
                self.run_id,
                status=event.status,
                answer=event.answer,
                stop_reason=event.stop_reason,
                prompt_tokens=usage.get("prompt_tokens"),
                completion_tokens=usage.get("completion_tokens"),
                duration_s=event.duration_s,
            )

    def _open(self) -> None:
        """Store the pending run and its question; mark the runs its history found abandoned
        (``unfinished_run`` repairs: their process is gone) as such."""
        start, self._pending = self._pending, None
        assert start is not None
        self.run_id = self.store.start_run(self.conversation, start.question, start.profile)
        self.store.append(self.run_id, {"role": "user", "content": start.question})
        for repair in start.history_repairs or []:
            if repair.get("kind") == "unfinished_run" and repair.get("status") == "abandoned":
                self.store.mark_abandoned(repair["run_id"])

    def _append_decision(self, decision: DecisionMade) -> None:
        self.store.append(
            self.run_id,
            decision.ai_message,
            latency_ms=decision.latency_ms,
            usage=decision.usage,
        )

    def _start_turn(self, call_id: str) -> None:
        """Store the latest decision's AIMessage when one of its calls starts."""
        decision = self._decision
        if decision is None or call_id in self._turn:
            return
        calls = [call["id"] for call in (decision.ai_message or {}).get("tool_calls") or []]
        if call_id not in calls:
            return
        self._write_results(everything=True)  # the previous turn, if anything is left
        self._append_decision(decision)
        self._decision = None
        self._turn, self._results, self._written = calls, {}, 0
        self._calls = {call["id"]: call for call in decision.ai_message["tool_calls"]}

    def _write_results(self, everything: bool = False, fill: str | None = None) -> None:
        """Store the turn's results in call order, up to the first one still running (or,
        with ``everything``, all that exist; with ``fill``, a call without a result gets an
        error result saying ``fill``)."""
        while self._written < len(self._turn):
            result = self._results.pop(self._turn[self._written], None)
            if result is None and not everything:
                return
            if result is None and fill is not None:
                call = self._calls[self._turn[self._written]]
                result = (make_tool_message(call, error=f"not finished: {fill}"), None)
            if result is not None:
                self.store.append(self.run_id, result[0], latency_ms=result[1])
            self._written += 1
