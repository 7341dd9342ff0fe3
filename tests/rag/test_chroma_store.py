"""The Chroma store against a real ``chroma run`` server on loopback (telemetry off)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import DATA
from lokal.cli import main
from lokal.rag.chunking import Chunk
from lokal.rag.stores.chroma import ChromaStore
from servers import free_port, run_server

pytestmark = pytest.mark.server

CHROMA = str(Path(sys.executable).parent / "chroma")


@pytest.fixture(scope="module")
def chroma_url(tmp_path_factory):
    os.environ["ANONYMIZED_TELEMETRY"] = "False"
    path = tmp_path_factory.mktemp("chroma")
    port = free_port()
    args = [CHROMA, "run", "--path", str(path / "data"), "--host", "127.0.0.1", "--port", str(port)]
    url = f"http://127.0.0.1:{port}"
    with run_server(args, f"{url}/api/v2/heartbeat", path / "chroma.log", timeout=60):
        yield url


def unit(rows: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(rows, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_chroma_store_add_query_filter_delete(chroma_url):
    store = ChromaStore(chroma_url, collection="unit-test")
    va, vb = unit(3, 1), unit(2, 2)
    store.add([Chunk("a.md", i, f"a {i}", 0, 3, "A", {"type": "md"}) for i in range(3)], va, "ha")
    store.add([Chunk("b.txt", i, f"b {i}", 0, 3, "", {"type": "txt"}) for i in range(2)], vb, "hb")
    assert store.count() == 5 and store.sources() == {"a.md": "ha", "b.txt": "hb"}
    top = store.query(va[1], k=2)
    assert top[0].id == "a.md#1" and top[0].score == pytest.approx(1.0, abs=1e-4)
    assert top[0].heading == "A" and top[0].metadata == {"type": "md"}
    assert {h.source for h in store.query(va[1], k=5, where={"type": "txt"})} == {"b.txt"}
    store.add([Chunk("a.md", 0, "a new", 0, 5)], unit(1, 3), "ha2")  # replaces a.md
    assert store.count() == 3
    assert store.delete_source("b.txt") == 2 and store.count() == 1
    # a new client sees what the old one wrote (the server persists)
    assert ChromaStore(chroma_url, collection="unit-test").chunks()[0].text == "a new"


def test_rag_cli_against_the_chroma_server(chroma_url, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LOKAL_HOME", str(tmp_path / "home"))
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("sqlite_wal.txt", "bm25.txt", "vector_stores.pdf"):
        shutil.copy(DATA / "docs" / name, docs)
    store = ["--store", "chroma", "--chroma_url", chroma_url, "--collection", "cli-test"]
    assert main(["rag", "index", str(docs), "--quiet", *store]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["files"] == 3 and report["total_chunks"] >= 3
    assert main(["rag", "index", str(docs), "--quiet", *store]) == 0
    assert json.loads(capsys.readouterr().out)["embedded"] == 0
    assert main(["rag", "search", "HNSW approximate index", "--json", "--k", "2", *store]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["source"] == "vector_stores.pdf"
    assert main(["rag", "stats", *store]) == 0
    assert json.loads(capsys.readouterr().out)["sources"] == 3
