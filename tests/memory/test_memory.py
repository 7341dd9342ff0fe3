"""Memory: the SQLite file (WAL, migrations), conversations and their CLI, the remember tool,
global + selected memory in the prompt, continuing a conversation, surviving a restart."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import MODEL_CONFIG, envelope
from lokal.cli import main
from lokal.config import load_profile
from lokal.llm.backends.scripted import ScriptedBackend
from lokal.memory import ConversationStore, Memory, connect
from lokal.memory.db import MIGRATIONS, applied_migrations, migrate
from lokal.runtime import Agent
from lokal.tools.registry import ToolRegistry, tool


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("LOKAL_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def make_agent(replies, **memory_options):
    profile = load_profile(MODEL_CONFIG)
    backend = ScriptedBackend(replies)
    agent = Agent(profile, ToolRegistry([add]), backend=backend)
    memory = Memory(**memory_options).attach(agent)
    return agent, backend, memory


def test_database_lives_under_lokal_home_in_wal_mode_with_recorded_migrations(home):
    conn = connect()
    assert (home / "lokal.db").is_file()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 30000
    assert applied_migrations(conn) == [name for name, _ in MIGRATIONS]
    assert migrate(conn, MIGRATIONS) == []  # idempotent
    extra = [*MIGRATIONS, ("003_test", "CREATE TABLE extra (x INTEGER)")]
    assert migrate(conn, extra) == ["003_test"]
    assert "003_test" in applied_migrations(conn)


def test_a_run_is_recorded_with_tool_calls_results_timings_and_tokens(home):
    agent, _, memory = make_agent(
        [envelope([("add", {"a": 2, "b": 3})]), "The sum is 5."], conversation="sums"
    )
    result = agent.run("What is 2 + 3?")
    assert result.answer == "The sum is 5."
    memory.close()
    # a new store object (as a new process would) reads what the old one wrote
    store = ConversationStore()
    (run,) = store.runs("sums")
    roles = [m["role"] for m in run["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    tool_message = run["messages"][2]
    assert json.loads(tool_message["content"]) == {"status": "success", "output": 5, "error": None}
    assert run["status"] == "final" and run["answer"] == "The sum is 5."
    assert run["prompt_tokens"] > 0 and run["completion_tokens"] > 0 and run["duration_s"] >= 0
    assert run["messages"][1]["_meta"]["latency_ms"] is not None
    assert run["messages"][1]["_meta"]["prompt_tokens"] > 0


def test_continuing_a_conversation_gives_its_earlier_messages_as_history(home):
    agent, _, memory = make_agent(["My name is noted, Ada."], conversation="chat")
    agent.run("My name is Ada.", history=memory.history())
    memory.close()
    agent, backend, memory = make_agent(["You are Ada."], conversation="chat")
    history = memory.history()
    assert [m["role"] for m in history] == ["user", "assistant"]
    agent.run("What is my name?", history=history)
    prompt = json.dumps(backend.requests[0].messages)
    assert "My name is Ada." in prompt and "My name is noted, Ada." in prompt
    assert len(memory.store.runs("chat")) == 2


@pytest.mark.slow
def test_remember_tool_stores_a_note_that_a_later_run_selects(home, tmp_path):
    memory_dir = tmp_path / "memdir"
    memory_dir.mkdir()
    (memory_dir / "profile.md").write_text("The user prefers answers in French.\n")
    agent, _, memory = make_agent(
        [envelope([("remember", {"note": "The staging server is called tortoise."})]), "Noted."],
        memory_dir=memory_dir,
    )
    agent.run("Remember that the staging server is called tortoise.")
    assert [n["text"] for n in memory.notes()] == ["The staging server is called tortoise."]
    memory.add_note("Lunch is at noon on Fridays.", source="user")
    memory.close()

    agent, backend, memory = make_agent(["It is tortoise."], memory_dir=memory_dir, k=1)
    result = agent.run("What is the name of the staging server?")
    # ranking the notes loaded the embedding model: a step of its own, after run_start
    loads = [e for e in result.events if e.type == "model_load" and e.component == "memory"]
    assert len(loads) == 1 and loads[0].duration_s > 0
    assert result.events[0].type == "run_start" and result.events[1] is loads[0]
    system = [m for m in backend.requests[0].messages if m["role"] == "system"]
    text = "\n".join(m["content"] for m in system)
    assert "The user prefers answers in French." in text  # global memory
    assert "The staging server is called tortoise. (source: remember in run-" in text
    assert "Lunch is at noon" not in text  # k=1: only the relevant note


def test_global_memory_is_capped(home, tmp_path):
    (tmp_path / "big.md").write_text("x" * 10_000)
    memory = Memory(memory_dir=tmp_path, max_global_chars=500)
    text = memory.global_text()
    assert len(text) < 600 and text.endswith("[… global memory truncated]")


def test_selected_memory_fuses_keyword_and_embedding_rankings(home):
    memory = Memory()
    memory.add_note("The database password rotates every 90 days.")
    memory.add_note("Our cat is named Pixel.")
    memory.add_note("Deployments happen on Tuesdays after the standup.")
    # the ranking without the relevance threshold (tests/test_memory_relevance.py tests it)
    top = memory.select("When do we ship releases to production?", k=1, min_score=0)
    assert top[0]["text"].startswith("Deployments")  # no shared keyword: embeddings find it
    top = memory.select("Pixel", k=1)
    assert top[0]["text"] == "Our cat is named Pixel."
    assert top[0]["score"] > 0


def test_summarize_saves_an_extractive_summary(home):
    agent, _, memory = make_agent(
        [envelope([("add", {"a": 1, "b": 1})]), "Two. That is all."],
        conversation="s",
        summarize=True,
    )
    agent.run("What is 1 + 1?")
    (note,) = memory.notes()
    assert note["text"] == "Asked: What is 1 + 1? Answer: Two. That is all. Tools used: add."
    assert memory.store.runs("s")[0]["summary"] == note["text"]


def test_conversations_cli_lists_shows_and_exports(home, capsys):
    agent, _, memory = make_agent([envelope([("add", {"a": 4, "b": 4})]), "8"], conversation="c1")
    agent.run("4 + 4?")
    memory.close()
    assert main(["conversations", "list"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["name"] == "c1" and row["runs"] == 1 and row["messages"] == 4
    assert main(["conversations", "show", "c1"]) == 0
    shown = capsys.readouterr().out
    assert "# Conversation c1" in shown and "`add(" in shown
    assert main(["conversations", "export", "c1", "--format", "json"]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert [m["role"] for m in exported["runs"][0]["messages"]][-1] == "assistant"
    assert main(["conversations", "export", "c1", "--format", "markdown"]) == 0
    assert capsys.readouterr().out.startswith("# Conversation c1")
    assert main(["conversations", "show", "nope"]) == 2


def test_memory_survives_a_new_process(home):
    Memory().add_note("Remember the milk.")
    code = (
        "from lokal.memory import Memory; import json; "
        "print(json.dumps([n['text'] for n in Memory().notes()]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == ["Remember the milk."]


def test_note_ids_are_never_reused_also_in_a_database_made_before_autoincrement(tmp_path):
    import sqlite3

    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    old.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied REAL)"
    )
    for name, sql in MIGRATIONS[:2]:  # the schema before 003: ids could be reused
        old.executescript(sql)
        old.execute("INSERT INTO schema_migrations VALUES (?, 0)", (name,))
    old.execute("INSERT INTO notes (text, source, created) VALUES ('kept', 'user', 0)")
    old.commit()
    old.close()
    memory = Memory(db_path=path, memory_dir=tmp_path)
    assert [(n["id"], n["text"]) for n in memory.notes()] == [(1, "kept")]
    second = memory.add_note("second")
    assert memory.delete_note(second)
    third = memory.add_note("third")
    assert third > second
    memory.close()
