"""Conversations in SQLite: every run's messages, tool calls, results, timings and tokens.

``ConversationRecorder`` subscribes to an Agent's events and writes each step in its own
transaction as it happens (the question at ``run_start``, each decision's AIMessage, each
ToolMessage at ``tool_end``, the run's outcome at ``final``), so a crash loses at most the step
in flight. Positions are allocated inside ``BEGIN IMMEDIATE`` transactions, so two runs
appending to one conversation at once interleave without clashing; each run's messages keep
their order.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from lokal.memory.db import connect

__all__ = ["ConversationRecorder", "ConversationStore", "sanitize_history"]


class ConversationStore:
    """Read and write conversations in ``lokal.db`` (default: ``$LOKAL_HOME/lokal.db``)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.conn = connect(path)
        self._lock = threading.Lock()

    def close(self) -> None:
        self.conn.close()

    def _write(self, action):
        """Run ``action(conn)`` in one IMMEDIATE transaction (waits on busy_timeout)."""
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                value = action(self.conn)
                self.conn.execute("COMMIT")
                return value
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise

    # -- writing ---------------------------------------------------------------------------

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
                    "INSERT INTO runs (conversation_id, question, profile, started)"
                    " VALUES (?,?,?,?)",
                    (conv, question, profile, time.time()),
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

    def history(self, name: str) -> list[dict[str, Any]]:
        """The earlier messages of a conversation, for continuing it: finished runs, run by
        run, in order; calls without results (an interrupted step) are dropped."""
        messages: list[dict[str, Any]] = []
        for run in self.runs(name):
            if run["finished"] is None:
                continue
            for message in run["messages"]:
                message.pop("_meta", None)
                messages.append(message)
        return sanitize_history(messages)

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


def _describe(message: dict[str, Any]) -> str:
    if message["role"] == "tool":
        return f" `{message.get('name')}` ({message.get('status')}): {message.get('content')}"
    calls = message.get("tool_calls") or []
    shown = "; ".join(
        f"`{c['name']}({json.dumps(c.get('args'), ensure_ascii=False)})`" for c in calls
    )
    return ": " + (message.get("content") or "") + (f" → {shown}" if shown else "")


def sanitize_history(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop tool calls that have no ToolMessage and ToolMessages whose call is gone."""
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    kept: list[dict[str, Any]] = []
    live_ids: set[str] = set()
    for message in messages:
        if message.get("role") == "system":
            continue
        if message.get("role") == "assistant" and message.get("tool_calls"):
            calls = [c for c in message["tool_calls"] if c.get("id") in answered]
            if not calls and not message.get("content"):
                continue
            message = {**message, "tool_calls": calls}
            live_ids.update(c["id"] for c in calls)
        if message.get("role") == "tool" and message.get("tool_call_id") not in live_ids:
            continue
        kept.append(message)
    return kept


class ConversationRecorder:
    """An Agent subscriber that writes each step of each run to a conversation, as it happens.

        recorder = ConversationRecorder(store, "project-x")
        recorder.attach(agent)       # subscribes to the agent's events
        agent.run(question, history=store.history("project-x"))

    One recorder serves one agent running one run at a time (use one Agent per thread).
    """

    def __init__(self, store: ConversationStore, conversation: str) -> None:
        self.store = store
        self.conversation = conversation
        self.run_id: int | None = None

    def attach(self, agent: Any) -> ConversationRecorder:
        agent.subscribe(self)
        return self

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "run_start":
            self.run_id = self.store.start_run(
                self.conversation, event["question"], event.get("profile")
            )
            self.store.append(self.run_id, {"role": "user", "content": event["question"]})
        elif self.run_id is None:
            return
        elif kind == "decision" and event.get("ai_message"):
            self.store.append(
                self.run_id,
                event["ai_message"],
                latency_ms=event.get("latency_ms"),
                usage=event.get("usage"),
            )
        elif kind == "tool_end":
            self.store.append(self.run_id, event["message"], latency_ms=event["duration_s"] * 1000)
        elif kind == "final":
            usage = event.get("usage") or {}
            self.store.finish_run(
                self.run_id,
                status=event["status"],
                answer=event["answer"],
                stop_reason=event["stop_reason"],
                prompt_tokens=usage.get("prompt_tokens"),
                completion_tokens=usage.get("completion_tokens"),
                duration_s=event["duration_s"],
            )
