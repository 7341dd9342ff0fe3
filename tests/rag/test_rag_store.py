"""Embeddings (local, cached, OpenAI-compatible server), the sqlite-vec store, hybrid
retrieval, ``lokal rag index/search/stats/eval``."""

from __future__ import annotations

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from helpers import DATA, REPO
from lokal.cli import main
from lokal.rag.chunking import Chunk
from lokal.rag.embeddings import CachedEmbedder, LocalEmbedder, OpenAIEmbedder
from lokal.rag.evaluate import evaluate
from lokal.rag.index import Indexer, documents_from_texts
from lokal.rag.retrieval import Retriever, rrf
from lokal.rag.stores.sqlite_vec import SqliteVecStore


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("LOKAL_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture(scope="module")
def shared_embedder(tmp_path_factory):
    return CachedEmbedder(LocalEmbedder(), tmp_path_factory.mktemp("cache") / "cache.db")


def unit(rows: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(rows, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def chunks(source: str, n: int, kind: str = "md") -> list[Chunk]:
    return [Chunk(source, i, f"{source} text {i}", 0, 10, "H", {"type": kind}) for i in range(n)]


def test_local_embeddings_are_unit_vectors_and_meaningful():
    vectors = LocalEmbedder().embed(["a cat sat on the mat", "a kitten on a rug", "tax law"])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-4)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


def test_sqlite_vec_store_add_query_filter_delete_and_reopen(tmp_path):
    path = tmp_path / "index.db"
    store = SqliteVecStore(path)
    va, vb = unit(4, 1), unit(3, 2)
    store.add(chunks("a.md", 4), va, source_hash="ha")
    store.add(chunks("b.txt", 3, "txt"), vb, source_hash="hb")
    assert store.count() == 7 and store.sources() == {"a.md": "ha", "b.txt": "hb"}
    top = store.query(va[2], k=3)
    assert top[0].id == "a.md#2" and top[0].score == pytest.approx(1.0, abs=1e-5)
    assert [h.score for h in top] == sorted((h.score for h in top), reverse=True)
    only_b = store.query(va[2], k=5, where={"source": "b.txt"})
    assert {h.source for h in only_b} == {"b.txt"} and len(only_b) == 3
    assert {h.source for h in store.query(va[2], k=9, where={"type": "txt"})} == {"b.txt"}
    store.add(chunks("a.md", 2), unit(2, 3), source_hash="ha2")  # re-index replaces
    assert store.count() == 5
    store.persist()
    store.close()

    reopened = SqliteVecStore(path)  # a new object on the same file
    assert reopened.count() == 5 and reopened.sources()["a.md"] == "ha2"
    assert reopened.query(vb[1], k=1)[0].id == "b.txt#1"
    assert reopened.delete_source("b.txt") == 3 and reopened.count() == 2
    assert reopened.query(vb[1], k=5, where={"source": "b.txt"}) == []


def test_rrf_rewards_items_ranked_well_by_both_lists():
    fused = rrf([["a", "b", "c"], ["c", "a", "d"]])
    assert [item for item, _ in fused] == ["a", "c", "b", "d"]
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 62)


@pytest.mark.slow
def test_index_is_incremental_and_embeddings_are_cached(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(DATA / "docs", docs)
    store = SqliteVecStore(tmp_path / "index.db")
    embedder = CachedEmbedder(LocalEmbedder(), tmp_path / "cache.db")
    indexer = Indexer(store, embedder)
    first = indexer.index_path(docs)
    assert first.files == 10 and first.embedded == first.chunks > 0
    total = store.count()
    second = indexer.index_path(docs)
    assert second.embedded == 0 and second.skipped == 10 and store.count() == total
    # a fresh store with the same cache: every chunk is indexed, none is embedded again
    other = Indexer(SqliteVecStore(tmp_path / "other.db"), embedder).index_path(docs)
    assert other.chunks == total and other.embedded == 0
    # a changed file replaces its own chunks; a deleted one disappears
    path = docs / "bm25.txt"
    path.write_text(path.read_text() + "\nA brand new closing line about zebras.\n")
    (docs / "hardware.csv").unlink()
    third = indexer.index_path(docs)
    assert third.files == 9 and third.skipped == 8 and third.removed_sources == ["hardware.csv"]
    assert 0 < third.embedded <= third.chunks
    hits = Retriever(store, embedder).search("zebras", k=1, method="bm25")
    assert hits[0].source == "bm25.txt" and "zebras" in hits[0].text
    assert "hardware.csv" not in store.sources()


class Recording:
    """The real local embedder, with the size of every call it was given recorded."""

    def __init__(self, embedder) -> None:
        self.inner, self.calls = embedder, []
        self.name, self.dim = embedder.name, embedder.dim

    def embed(self, texts):
        self.calls.append(len(texts))
        return self.inner.embed(texts)


def test_index_embeds_in_batches_across_documents_and_each_source_keeps_its_vectors(tmp_path):
    docs = {
        f"note_{i}.md": f"# Note {i}\n\nThe {i}th fact is about topic {i * 7}." for i in range(9)
    }
    docs["long.md"] = "# Long\n\n" + " ".join(f"word{i}" for i in range(600))

    local = LocalEmbedder()
    recording = Recording(local)
    store = SqliteVecStore(tmp_path / "index.db")
    report = Indexer(store, recording, batch_chunks=8).index_documents(documents_from_texts(docs))
    # nine one-chunk notes wait for each other: calls of at least 8 texts, but the last
    assert sum(recording.calls) == report.chunks == store.count() > 10
    assert all(n >= 8 for n in recording.calls[:-1]) and len(recording.calls) < len(docs)
    assert set(store.sources()) == set(docs)
    # each chunk is stored with its own vector, not a neighbour's of the same call: the
    # vector of the text it was embedded from finds it, at a cosine of 1
    alone = local.embed(["Note 8\n# Note 8\nThe 8th fact is about topic 56."])[0]
    hit = store.query(alone, k=1)[0]
    assert hit.source == "note_8.md" and hit.score > 0.999
    for source in ("note_0.md", "note_4.md", "long.md"):
        said = docs[source].split("\n\n")[1][:200]
        top = Retriever(store, local).search(said, k=1, method="vector")
        assert top[0].source == source


@pytest.mark.slow
def test_hybrid_finds_both_keyword_and_paraphrase_matches(tmp_path, shared_embedder):
    store = SqliteVecStore(tmp_path / "index.db")
    embedder = shared_embedder
    Indexer(store, embedder).index_path(DATA / "docs")
    retriever = Retriever(store, embedder)
    hits = retriever.search("busy_timeout", k=3, method="hybrid")
    assert hits[0].source == "sqlite_wal.txt"
    hits = retriever.search("does killing the process damage the database", k=3)
    assert "sqlite_wal.txt" in [h.source for h in hits]
    filtered = retriever.search("vectors", k=5, where={"source": "embeddings.html"})
    assert filtered and {h.source for h in filtered} == {"embeddings.html"}


@pytest.mark.slow
def test_retrieval_eval_reports_hit_at_k_and_mrr(shared_embedder):
    embedder = shared_embedder
    results = evaluate(DATA / "rag_eval" / "questions.json", DATA / "docs", embedder)
    assert results["questions"] >= 30
    for method in ("vector", "bm25", "hybrid"):
        row = results["methods"][method]
        assert 0 <= row["hit@1"] <= row["hit@5"] <= 1 and 0 <= row["mrr"] <= 1
        assert row["hit@5"] >= 0.8  # the set is answerable: a regression guard


@pytest.mark.slow
def test_rag_cli_index_search_json_and_stats(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("README.md",):
        shutil.copy(REPO / name, docs / name)
    shutil.copy(DATA / "docs" / "sqlite_wal.txt", docs)
    store = ["--store", "sqlite", "--store_path", str(tmp_path / "idx.db")]
    assert main(["rag", "index", str(docs), "--quiet", *store]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["files"] == 2 and report["total_chunks"] > 2
    assert main(["rag", "search", "write-ahead log readers", "--k", "3", "--json", *store]) == 0
    out = capsys.readouterr().out
    rows = json.loads(out)  # exactly one JSON document
    assert isinstance(rows, list) and len(rows) == 3
    for row in rows:
        assert {"source", "text", "score"} <= set(row)
        assert isinstance(row["score"], float) and isinstance(row["text"], str)
    assert rows[0]["source"] == "sqlite_wal.txt"
    assert main(["rag", "stats", *store]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["sources"] == 2 and stats["chunks"] == report["total_chunks"]


class _EmbeddingsHandler(BaseHTTPRequestHandler):
    """A minimal OpenAI-compatible /v1/embeddings server backed by the local MiniLM."""

    embedder = LocalEmbedder()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        vectors = self.embedder.embed(texts)
        payload = {
            "object": "list",
            "model": body["model"],
            "data": [
                {"object": "embedding", "index": i, "embedding": v.tolist()}
                for i, v in enumerate(vectors)
            ][::-1],  # out of order on purpose: the client sorts by index
        }
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_openai_compatible_embeddings_server_on_loopback():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EmbeddingsHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        remote = OpenAIEmbedder(url, batch_size=2)
        texts = ["one", "two words", "three words here"]
        got = remote.embed(texts)
        assert got.shape == (3, 384) and remote.dim == 384
        assert np.allclose(got, LocalEmbedder().embed(texts), atol=1e-5)
    finally:
        server.shutdown()
        server.server_close()
