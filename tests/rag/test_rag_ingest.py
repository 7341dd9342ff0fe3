"""Loaders for every type, chunking (the three cases, headings, token bounds)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import DATA
from lokal.rag.chunking import chunk_lines, chunk_text, default_tokenizer, split_sections
from lokal.rag.loaders import SUPPORTED, UnsupportedFileType, load_directory, load_file

DOCS = DATA / "docs"
TOK = default_tokenizer()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("local_models.md", "## Quantization and GGUF"),
        ("sqlite_wal.txt", "PRAGMA busy_timeout"),
        ("vector_stores.pdf", "chroma run --path DIR --port 8000"),
        ("embeddings.html", "# all-MiniLM-L6-v2"),
        ("agent_memory.docx", "## Selected memory"),
        ("hardware.csv", "model: Qwen2.5-3B-Instruct; parameters: 3.1B"),
    ],
)
def test_each_file_type_loads(name, expected):
    doc = load_file(DOCS / name)
    assert expected in doc.text
    assert doc.metadata["type"] == name.rsplit(".", 1)[1]


def test_html_drops_scripts_and_styles():
    text = load_file(DOCS / "embeddings.html").text
    assert "console.log" not in text and "font-family" not in text


def test_unknown_type_fails_naming_the_supported_ones(tmp_path):
    path = tmp_path / "data.xlsx"
    path.write_bytes(b"x")
    with pytest.raises(UnsupportedFileType) as error:
        load_file(path)
    message = str(error.value)
    assert ".xlsx" in message and all(ext in message for ext in SUPPORTED)


def test_a_directory_is_read_recursively(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "top.md").write_text("# Top\ntext")
    (tmp_path / "a" / "b" / "deep.txt").write_text("deep text")
    (tmp_path / "a" / "skip.bin").write_bytes(b"\0")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "x.md").write_text("hidden")
    docs = list(load_directory(tmp_path, progress=True))
    assert sorted(d.source for d in docs) == ["a/b/deep.txt", "top.md"]
    with pytest.raises(UnsupportedFileType):
        list(load_directory(tmp_path, strict=True))


def test_case_1_an_over_long_line_is_split_with_overlap():
    line = " ".join(f"word{i}" for i in range(100))  # ~ 200 word pieces, one line
    chunks = chunk_lines(line, TOK, max_tokens=50, overlap=10)
    assert TOK.count(line) > 150 and len(chunks) >= 4
    for a, b in itertools.pairwise(chunks):
        assert TOK.count(b) <= 50
        shared = " ".join(b.split()[:3])  # b starts with the last ~10 tokens of a
        assert shared in a[-40:]


def test_case_2_lines_that_fit_join_one_chunk():
    chunks = chunk_lines("alpha beta\ngamma delta\nepsilon", TOK, max_tokens=50, overlap=10)
    assert chunks == ["alpha beta\ngamma delta\nepsilon"]


def test_case_3_a_full_chunk_starts_the_next_with_the_overlap():
    lines = [f"sentence number {i} about retrieval" for i in range(12)]
    chunks = chunk_lines("\n".join(lines), TOK, max_tokens=30, overlap=8)
    assert len(chunks) > 2
    for a, b in itertools.pairwise(chunks):
        cover = a[TOK.offsets(a)[-8][0] :]  # the last 8 tokens of a, as written
        assert b.startswith(cover + "\n")
        assert TOK.count(b) <= 30


def test_the_seed_defaults_remain_available():
    text = (DOCS / "sqlite_wal.txt").read_text() * 10
    chunks = chunk_text(text, "x.txt", max_tokens=600, overlap=150, markdown=False)
    assert all(TOK.count(c.text) <= 600 for c in chunks) and len(chunks) > 1


def test_heading_paths_and_positions():
    text = "# Guide\nintro\n## Install\npip install lokal\n## Use\nlokal run\n# Other\nend\n"
    assert [h for h, _, _ in split_sections(text)] == [
        "Guide",
        "Guide > Install",
        "Guide > Use",
        "Other",
    ]
    chunks = chunk_text(text, "guide.md")
    assert [c.heading for c in chunks] == ["Guide", "Guide > Install", "Guide > Use", "Other"]
    assert [c.index for c in chunks] == [0, 1, 2, 3]
    install = chunks[1]
    assert install.id == "guide.md#1"
    assert text[install.start : install.end] == install.text


lines = st.lists(
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=300),
    max_size=30,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=lines, max_tokens=st.integers(8, 80), ratio=st.floats(0.0, 0.5))
def test_no_chunk_exceeds_max_tokens_and_neighbours_overlap(lines, max_tokens, ratio):
    overlap = int(max_tokens * ratio)
    chunks = chunk_lines("\n".join(lines), TOK, max_tokens=max_tokens, overlap=overlap)
    for chunk in chunks:
        assert TOK.count(chunk) <= max_tokens
    if overlap:  # each chunk starts with the end of the previous one
        for a, b in itertools.pairwise(chunks):
            shared = next((j for j in range(len(b), 0, -1) if a.endswith(b[:j])), 0)
            assert shared > 0 or TOK.count(b) > max_tokens - overlap  # or no room was left
