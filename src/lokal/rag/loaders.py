"""Documents in: ``.txt``, ``.md``, ``.pdf`` (pypdf), ``.html`` (BeautifulSoup), ``.docx``
(python-docx) and ``.csv``; a directory is read recursively with a progress bar."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lokal.errors import LokalError

__all__ = ["SUPPORTED", "Document", "UnsupportedFileType", "load_directory", "load_file"]


class UnsupportedFileType(LokalError):
    """A file whose extension no loader reads."""


@dataclass
class Document:
    source: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _pdf(path: Path) -> str:
    from pypdf import PdfReader

    reader = PdfReader(str(path))
    return "\n\n".join((page.extract_text() or "").strip() for page in reader.pages)


def _html(path: Path) -> str:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(path.read_bytes(), "html.parser")
    for tag in soup(["script", "style", "noscript", "template"]):
        tag.decompose()
    # headings become markdown headings so that chunking can follow the structure
    for level in range(1, 7):
        for tag in soup.find_all(f"h{level}"):
            tag.replace_with(f"\n{'#' * level} {tag.get_text(' ', strip=True)}\n")
    lines = (line.strip() for line in soup.get_text("\n").splitlines())
    return "\n".join(line for line in lines if line)


def _docx(path: Path) -> str:
    import docx

    document = docx.Document(str(path))
    lines = []
    for paragraph in document.paragraphs:
        text = paragraph.text.strip()
        if not text:
            continue
        style = (paragraph.style.name or "").lower() if paragraph.style is not None else ""
        if style.startswith("heading") and style[-1:].isdigit():
            text = "#" * int(style[-1]) + " " + text
        elif style == "title":
            text = "# " + text
        lines.append(text)
    for table in document.tables:
        for row in table.rows:
            lines.append(" | ".join(cell.text.strip() for cell in row.cells))
    return "\n".join(lines)


def _csv(path: Path) -> str:
    """One line per row, ``column: value`` pairs, so that each row reads on its own."""
    text = _text(path)
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return ""
    header, body = rows[0], rows[1:]
    lines = [
        "; ".join(f"{name}: {value}" for name, value in zip(header, row, strict=False) if value)
        for row in body
    ]
    return "\n".join(line for line in lines if line)


LOADERS: dict[str, Callable[[Path], str]] = {
    ".txt": _text,
    ".md": _text,
    ".markdown": _text,
    ".pdf": _pdf,
    ".html": _html,
    ".htm": _html,
    ".docx": _docx,
    ".csv": _csv,
}
SUPPORTED = tuple(LOADERS)


def load_file(path: str | Path, root: str | Path | None = None) -> Document:
    """One file as a Document; ``source`` is the path relative to ``root`` if given."""
    path = Path(path)
    if not path.exists():  # before the type: /no/such/dir is missing, not of type '(none)'
        raise LokalError(f"no such file or folder: {str(path)!r}")
    if path.is_dir():
        raise LokalError(f"{str(path)!r} is a folder; index it with load_directory")
    loader = LOADERS.get(path.suffix.lower())
    if loader is None:
        raise UnsupportedFileType(
            f"cannot read {path.name!r}: unsupported file type {path.suffix or '(none)'!r}; "
            f"supported: {', '.join(SUPPORTED)}"
        )
    if not path.is_file():
        raise LokalError(f"{str(path)!r} is not a regular file")
    source = str(path.relative_to(root)) if root is not None else str(path)
    return Document(source=source, text=loader(path), metadata={"type": path.suffix.lower()[1:]})


def iter_files(directory: str | Path) -> list[Path]:
    directory = Path(directory)
    return sorted(
        p
        for p in directory.rglob("*")
        if p.is_file()
        and p.suffix.lower() in LOADERS
        and not any(part.startswith(".") for part in p.relative_to(directory).parts)
    )


def load_directory(
    directory: str | Path, *, progress: bool = False, strict: bool = False
) -> Iterator[Document]:
    """Every supported file under ``directory``, recursively (hidden folders skipped).

    Files of other types are skipped (``strict=True`` raises instead)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise LokalError(f"{str(directory)!r} is not a directory")
    if strict:
        for p in directory.rglob("*"):
            if p.is_file() and p.suffix.lower() not in LOADERS:
                load_file(p)  # raises UnsupportedFileType
    files = iter_files(directory)
    if progress:
        from rich.progress import track

        files = track(files, description="loading", transient=True)  # type: ignore[assignment]
    for path in files:
        yield load_file(path, root=directory)
