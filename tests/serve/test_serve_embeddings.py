"""``/v1/embeddings`` through the official openai SDK (``client.embeddings.create``) against
a real server on loopback: the bundled MiniLM's vectors, equal to calling the embedder
directly, as floats and as base64."""

from __future__ import annotations

import base64

import httpx
import numpy as np
import openai
import pytest
from serve_support import KEY

from lokal.rag.embeddings import MINILM, LocalEmbedder

TEXTS = ["How do readers and writers share a WAL database?", "The staging server is tortoise."]


def test_vectors_equal_the_embedders_as_floats_and_base64(serve):
    served = serve([])
    client = served.client()
    reply = client.embeddings.create(model=MINILM, input=TEXTS, encoding_format="float")
    direct = LocalEmbedder().embed(TEXTS)
    got = np.array([d.embedding for d in reply.data], dtype=np.float32)
    assert got.shape == (2, 384) and [d.index for d in reply.data] == [0, 1]
    assert np.allclose(got, direct, atol=1e-6)
    assert reply.usage.prompt_tokens == reply.usage.total_tokens > len(TEXTS)
    raw = httpx.post(
        f"{served.url}/embeddings",
        json={"model": MINILM, "input": TEXTS[0], "encoding_format": "base64"},
        headers={"Authorization": f"Bearer {KEY}"},
    ).json()
    decoded = np.frombuffer(base64.b64decode(raw["data"][0]["embedding"]), dtype="<f4")
    assert np.allclose(decoded, direct[0], atol=1e-6)
    # the SDK's default asks for base64 and decodes it
    default = client.embeddings.create(model=MINILM, input=TEXTS[0])
    assert np.allclose(np.array(default.data[0].embedding), direct[0], atol=1e-6)


def test_a_served_profile_names_its_embedding_settings(serve, profile):
    served = serve([])
    reply = served.client().embeddings.create(model=profile.name, input="hello")
    assert len(reply.data[0].embedding) == 384
    assert served.log[-1]["embedding_backend"] in ("onnx", "onnx-int8", "numpy")


def test_bad_embedding_requests_are_clear_errors(serve):
    served = serve([])
    client = served.client()
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="text-embedding-3-small", input="x")
    for body, param in [
        ({"model": MINILM, "input": []}, "input"),
        ({"model": MINILM, "input": 5}, "input"),
        ({"model": MINILM, "input": "x", "encoding_format": "int8"}, "encoding_format"),
    ]:
        reply = httpx.post(
            f"{served.url}/embeddings", json=body, headers={"Authorization": f"Bearer {KEY}"}
        )
        assert reply.status_code == 400 and reply.json()["error"]["param"] == param, reply.text
