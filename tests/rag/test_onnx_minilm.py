"""MiniLM through ONNX Runtime (issue 24): the graph lokal builds from the installed weights
gives the NumPy encoder's vectors; it is rebuilt when the weights change; without
onnxruntime (or without the onnx package to build the graph) NumPy runs and lokal says so;
the embedding cache never serves one backend's vector for another; the profile chooses, and
``lokal rag index`` shows what runs. No timings are asserted: these hold on any CPU."""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest

import lokal.rag.embeddings as embeddings
from lokal.cli import main
from lokal.config import load_profile
from lokal.errors import ConfigError
from lokal.rag import onnx_minilm
from lokal.rag.embeddings import CachedEmbedder, LocalEmbedder, minilm_path
from lokal.rag.minilm import MiniLM

TEXTS = [
    "hello world",
    "Read the file notes.txt and tell me when the review is.",
    "请读取 notes.txt 文件。",
    "The quick brown fox jumps over the lazy dog. " * 40,  # longer than 256 word pieces
    "x",
    "What is the default page size of SQLite, and can a reader work while a write happens?",
    "",
]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1)


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    """The NumPy encoder's vectors of TEXTS (the existing path, the fallback)."""
    return LocalEmbedder("numpy").embed(TEXTS)


def test_onnx_and_numpy_vectors_agree_on_fixed_texts(reference):
    embedder = LocalEmbedder("onnx")
    got = embedder.embed(TEXTS)
    assert embedder.backend == "onnx" and embedder.fallback is None
    assert got.shape == (len(TEXTS), 384) and got.dtype == np.float32
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert cosines(got, reference).min() >= 0.9999, cosines(got, reference)


def test_batches_and_workers_change_no_vector_and_no_order(reference):
    """Texts are sorted by length into padded batches run by several workers: every vector
    comes back to its own row, equal to the text embedded alone."""
    texts = TEXTS * 3  # 21 texts of very different lengths, in 6 batches of 4
    together = LocalEmbedder("onnx", threads=2, batch_size=4).embed(texts)
    alone = np.vstack([LocalEmbedder("onnx", threads=1, batch_size=1).embed([t]) for t in TEXTS])
    assert cosines(together, np.vstack([alone] * 3)).min() > 0.99999
    assert cosines(together, np.vstack([reference] * 3)).min() >= 0.9999


def test_int8_vectors_are_close_to_fp32_but_not_the_same(reference):
    int8 = LocalEmbedder("onnx-int8")
    got = int8.embed(TEXTS)
    assert int8.backend == "onnx-int8" and int8.fallback is None
    assert int8.name != LocalEmbedder("onnx").name
    agreement = cosines(got, reference)
    assert agreement.mean() > 0.97 and agreement.min() > 0.9, agreement
    assert agreement.min() < 0.99999  # quantised: not the fp32 vectors themselves
    # activations are quantised per call: one text per call, so no text moves its neighbour
    alone = np.vstack([LocalEmbedder("onnx-int8").embed([t]) for t in TEXTS])
    assert cosines(got, alone).min() > 0.99999
    assert int8.info()["batch_size"] == 1


def _copy_model(to: Path) -> Path:
    to.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        shutil.copy2(minilm_path() / name, to / name)
    return to


def test_a_changed_model_file_invalidates_the_exported_graph(tmp_path, monkeypatch):
    from safetensors.numpy import load_file, save_file

    monkeypatch.setenv("LOKAL_MODEL_CACHE", str(tmp_path / "cache"))
    folder = _copy_model(tmp_path / "model")
    first = onnx_minilm.ensure_graph(folder)
    assert first.is_file() and first.parent == tmp_path / "cache"
    before = onnx_minilm.OnnxMiniLM(first, folder).encode(TEXTS[:3])

    # touched, same bytes: the digest is computed again and names the same graph
    shutil.copy2(folder / "model.safetensors", tmp_path / "same.safetensors")
    shutil.move(tmp_path / "same.safetensors", folder / "model.safetensors")
    assert onnx_minilm.ensure_graph(folder) == first

    weights = load_file(str(folder / "model.safetensors"))
    bias = "encoder.layer.5.output.dense.bias"
    noise = np.random.default_rng(0).normal(0, 0.5, weights[bias].shape)  # not a constant:
    weights[bias] = (weights[bias] + noise).astype(np.float32)  # LayerNorm would undo one
    save_file(weights, str(folder / "model.safetensors"))
    second = onnx_minilm.ensure_graph(folder)
    assert second != first and second.is_file()
    assert not first.exists()  # the graph of the old weights is gone
    after = onnx_minilm.OnnxMiniLM(second, folder).encode(TEXTS[:3])
    assert cosines(after, before).min() < 0.999  # the new weights' vectors...
    changed = MiniLM(folder).encode(TEXTS[:3])  # ...are what NumPy makes of the new weights
    assert cosines(after, changed).min() >= 0.9999


def test_without_onnxruntime_the_numpy_fallback_is_used_and_says_so(monkeypatch, caplog, reference):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime fails
    for asked in ("auto", "onnx", "onnx-int8"):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="lokal.embeddings"):
            embedder = LocalEmbedder(asked)
            vectors = embedder.embed(TEXTS)
        assert embedder.backend == "numpy"
        assert "onnxruntime cannot be imported" in embedder.fallback
        assert "onnxruntime" in caplog.text and "NumPy" in caplog.text
        assert "not used" in embedder.describe() and "on NumPy" in embedder.describe()
        assert embedder.info()["fallback"] == embedder.fallback
        assert "@numpy:" in embedder.name
        assert cosines(vectors, reference).min() > 0.99999


def test_without_the_onnx_package_an_unbuilt_graph_falls_back(tmp_path, monkeypatch):
    monkeypatch.setenv("LOKAL_MODEL_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(embeddings, "_SESSIONS", {})  # nothing loaded in this process
    monkeypatch.setitem(sys.modules, "onnx", None)
    embedder = LocalEmbedder("onnx")
    assert embedder.backend == "numpy"
    assert "needs the onnx package" in embedder.fallback


def test_the_cache_keys_vectors_by_backend_and_weights(tmp_path):
    path = tmp_path / "cache.db"
    numpy_cache = CachedEmbedder(LocalEmbedder("numpy"), path)
    numpy_cache.embed(["one text"])
    onnx_cache = CachedEmbedder(LocalEmbedder("onnx"), path)
    onnx_cache.embed(["one text"])
    assert onnx_cache.misses == 1 and onnx_cache.hits == 0  # not numpy's vector
    again = CachedEmbedder(LocalEmbedder("onnx"), path)
    again.embed(["one text"])
    assert again.misses == 0 and again.hits == 1
    for cache in (numpy_cache, onnx_cache, again):
        cache.close()
    with sqlite3.connect(path) as conn:
        models = sorted(row[0] for row in conn.execute("SELECT model FROM embedding_cache"))
    digest = onnx_minilm.weights_digest(minilm_path())[:12]
    assert models == [f"all-MiniLM-L6-v2@numpy:{digest}", f"all-MiniLM-L6-v2@onnx:{digest}"]


def test_the_profile_chooses_the_embedding_backend(monkeypatch):
    config = {
        "model": {"backend": "mock"},
        "embeddings": {"backend": "onnx", "batch_size": 16},
        "models": {"small": {"embeddings": {"backend": "onnx-int8", "threads": 1}}},
    }
    monkeypatch.delenv("LOKAL_EMBEDDING_BACKEND", raising=False)
    default = load_profile(config)
    assert (default.embeddings.backend, default.embeddings.batch_size) == ("onnx", 16)
    small = load_profile(config, "small").embeddings
    assert (small.backend, small.threads, small.batch_size) == ("onnx-int8", 1, 16)
    assert load_profile({"model": {"backend": "mock"}}).embeddings.backend == "auto"
    monkeypatch.setenv("LOKAL_EMBEDDING_BACKEND", "numpy")
    assert load_profile(config, "small").embeddings.backend == "numpy"
    monkeypatch.setenv("LOKAL_EMBEDDING_BACKEND", "torch")
    with pytest.raises(ConfigError, match="backend"):
        load_profile(config)


def test_the_configured_settings_reach_every_local_embedder():
    from lokal.config import EmbeddingSettings

    embeddings.configure(EmbeddingSettings(backend="numpy"))
    assert LocalEmbedder().backend == "numpy"
    assert LocalEmbedder("onnx").backend == "onnx"  # its own choice wins
    embeddings.configure(None)
    assert LocalEmbedder().settings().backend == "auto"


@pytest.fixture
def two_docs(tmp_path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# SQLite\n\nWAL lets readers work during a write.\n", "utf-8")
    (docs / "b.md").write_text("# BM25\n\nThe b parameter normalises length.\n", "utf-8")
    return docs


def _index(docs: Path, store: Path, capsys, *extra: str) -> tuple[dict, str]:
    code = main(["rag", "index", str(docs), "--store_path", str(store), *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out.strip().splitlines()[-1]), err


def test_rag_index_shows_the_backend_and_a_fallback(two_docs, tmp_path, monkeypatch, capsys):
    report, err = _index(two_docs, tmp_path / "a.db", capsys)
    assert report["embeddings"]["backend"] == "onnx" and report["embeddings"]["fallback"] is None
    assert "embeddings: all-MiniLM-L6-v2 on ONNX Runtime" in err and report["chunks"] == 2

    config = tmp_path / "model.yaml"
    config.write_text(
        "model: {backend: mock}\nmodels:\n  int8: {embeddings: {backend: onnx-int8}}\n", "utf-8"
    )
    report, err = _index(
        two_docs, tmp_path / "b.db", capsys, "--model_config", str(config), "--profile", "int8"
    )
    assert report["embeddings"]["backend"] == "onnx-int8" and "int8" in err

    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    report, err = _index(two_docs, tmp_path / "c.db", capsys)
    assert report["embeddings"]["backend"] == "numpy"
    assert "onnxruntime cannot be imported" in report["embeddings"]["fallback"]
    assert "on NumPy" in err and "not used" in err


def test_indexing_again_with_another_backend_re_embeds_every_source(
    two_docs, tmp_path, monkeypatch, capsys
):
    store = tmp_path / "index.db"
    first, _ = _index(two_docs, store, capsys, "--quiet")
    same, _ = _index(two_docs, store, capsys, "--quiet")
    monkeypatch.setenv("LOKAL_EMBEDDING_BACKEND", "numpy")
    other, _ = _index(two_docs, store, capsys, "--quiet")
    assert (first["embedded"], same["skipped"], other["embedded"]) == (2, 2, 2)
    assert other["embeddings"]["backend"] == "numpy" and other["total_chunks"] == 2


@pytest.mark.parametrize(
    ("n", "batch", "threads"), [(1, 8, 2), (4, 8, 2), (17, 8, 2), (17, 8, 1), (64, 8, 3), (5, 1, 4)]
)
def test_batches_cover_every_text_once_and_keep_every_worker_busy(n, batch, threads):
    groups = onnx_minilm._groups(list(range(n)), batch, threads)
    assert [i for g in groups for i in g] == list(range(n))  # each text once, in order
    assert all(0 < len(g) <= batch for g in groups)
    assert max(map(len, groups)) - min(map(len, groups)) <= 1  # near-equal
    if threads > 1:  # every round of workers is full, or every text has its own batch
        assert len(groups) % threads == 0 or len(groups) == n
    else:
        assert len(groups) == -(-n // batch)
