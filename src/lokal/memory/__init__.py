"""Memory: global memory, selected notes, conversations in SQLite."""

from lokal.memory.conversations import ConversationRecorder, ConversationStore
from lokal.memory.db import connect
from lokal.memory.store import Memory, extractive_summary, remember_tool
from lokal.paths import db_path, lokal_home

__all__ = [
    "ConversationRecorder",
    "ConversationStore",
    "Memory",
    "connect",
    "db_path",
    "extractive_summary",
    "lokal_home",
    "remember_tool",
]
