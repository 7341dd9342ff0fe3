"""The two records that travel through RAG: a ``Chunk`` of a document (made by chunking,
stored by the stores) and a ``Hit`` (a stored chunk found again, with its score).

They sit here, below chunking, embeddings and the stores, so that those modules import them
and never each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Chunk", "Hit"]


@dataclass
class Chunk:
    source: str
    index: int
    text: str
    start: int
    end: int
    heading: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.source}#{self.index}"


@dataclass
class Hit:
    """One retrieved chunk; ``score`` is cosine similarity (vector) or the fused score."""

    source: str
    index: int
    text: str
    score: float
    heading: str = ""
    start: int = 0
    end: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.source}#{self.index}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "text": self.text,
            "score": round(float(self.score), 6),
            "chunk": self.index,
            "heading": self.heading,
        }
