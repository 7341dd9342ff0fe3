"""The backends of the bundled all-MiniLM-L6-v2 against each other, in one run (issue 24).

    .venv/bin/python benchmarks/embed_backends.py [--chunks 2000] [--questions 100]
        [--decisions 12] [--repeats 3] [--sweep-repeats 3] [--no-torch] [--no-decisions]
        [--no-write]

Backends: ``numpy`` (lokal's NumPy encoder, the fallback), ``onnx`` (ONNX Runtime, fp32),
``onnx-int8`` (the same graph, matrix products quantised to 8 bits), and ``torch``
(sentence-transformers on PyTorch, the reference implementation; skipped with
``--no-torch`` or when it is not installed). Each measure runs every backend in turn, in
the same process, so ratios compare like with like; what the machine was doing meanwhile
(load average) is printed with them.

1. the ONNX graphs: build time (once per machine and weights) and load time;
2. ingest: ``Indexer`` (load, chunk 200/40, embed, store in sqlite-vec) over ``data/docs``
   (median of ``--repeats``) and over a generated corpus of at least ``--chunks`` chunks
   (paragraphs of data/docs's sentences, shuffled with a fixed seed), in slices that
   alternate between backends; a fresh embedding cache each time, so every chunk is embedded;
3. batching and workers: embedding only, 256 chunks of that corpus and the short questions
   of 4., per (workers, batch); with one ONNX Runtime call at a time on 2 intra-op threads,
   and PyTorch's batch sizes, for comparison;
4. one question's latency (p50, p95): ``--questions`` distinct questions, one at a time;
5. agreement: cosine of every backend's vectors with the reference's (torch when there,
   else numpy), over the chunks of data/docs, their questions and 300 generated chunks;
6. retrieval: hit@1, hit@5 and MRR of ``lokal rag eval`` (data/rag_eval/questions.json over
   data/docs), and how the calibrated ``RAG_MIN_SCORE`` still separates the answerable
   questions from data/rag_eval/unanswerable.json;
7. tool preselection recall@4 on the development cases (data/dev/cases, the first expected
   call, tools of data/dev/tools_lokal_run.json unless a case has its own);
8. whole staged decisions (default profile, bundled model) on ``--decisions`` development
   cases, the selector's embedder switched per backend (skipped with ``--no-decisions``).

Writes the ``embed_backends`` section of docs/performance.md (unless ``--no-write``).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import machine, write_section

from lokal.rag.chunking import chunk_text
from lokal.rag.embeddings import MINILM, CachedEmbedder, LocalEmbedder, minilm_path
from lokal.rag.index import Indexer, documents_from_texts
from lokal.rag.loaders import load_directory

ROOT = Path(__file__).resolve().parent.parent
LOCAL = ("numpy", "onnx", "onnx-int8")


class TorchMiniLM:
    """sentence-transformers on PyTorch: the reference implementation, as an Embedder."""

    name = f"{MINILM}@torch"
    dim = 384
    backend = "torch"

    def __init__(self, batch_size: int = 8) -> None:
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(minilm_path()), device="cpu", local_files_only=True)
        self.batch_size = batch_size

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True
        )
        return np.asarray(vectors, dtype=np.float32)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f}/{five:.1f}"


def p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


# -- the corpora ------------------------------------------------------------------------------


def sentences() -> list[str]:
    out = []
    for doc in load_directory(ROOT / "data" / "docs"):
        for line in doc.text.splitlines():
            if line.lstrip().startswith("#"):  # a heading, not a sentence
                continue
            for part in re.split(r"(?<=[.!?])\s+", " ".join(line.split())):
                if len(part.split()) >= 4:
                    out.append(part)
    return out


def generated_corpus(min_chunks: int, seed: int = 0) -> dict[str, str]:
    """Markdown documents of shuffled data/docs sentences, until they chunk into at least
    ``min_chunks`` chunks of 200/40 word pieces."""
    rng = random.Random(seed)
    pool = sentences()
    docs: dict[str, str] = {}
    total = 0
    while total < min_chunks:
        parts = []
        for section in range(rng.randint(3, 6)):
            parts.append(f"## Section {section + 1}")
            for _ in range(rng.randint(2, 4)):
                parts.append(" ".join(rng.choice(pool) for _ in range(rng.randint(3, 8))))
        text = f"# Generated document {len(docs)}\n\n" + "\n\n".join(parts)
        name = f"gen_{len(docs):04d}.md"
        docs[name] = text
        total += len(chunk_text(text, name, markdown=True))
    return docs


def chunk_texts(docs: dict[str, str]) -> list[str]:
    out = []
    for name, text in docs.items():
        for chunk in chunk_text(text, name, markdown=True):
            out.append(f"{chunk.heading}\n{chunk.text}" if chunk.heading else chunk.text)
    return out


# -- the measures -----------------------------------------------------------------------------


def graphs(tmp: Path) -> dict[str, float]:
    """Build both graphs in a fresh cache (timed), then load each (timed)."""
    from lokal.rag import onnx_minilm

    os.environ["LOKAL_MODEL_CACHE"] = str(tmp / "models")
    folder = minilm_path()
    out = {}
    for variant in ("fp32", "int8"):
        started = time.perf_counter()
        path = onnx_minilm.ensure_graph(folder, variant)
        out[f"build_{variant}"] = time.perf_counter() - started
        out[f"size_{variant}"] = path.stat().st_size / 1e6
        started = time.perf_counter()
        onnx_minilm.OnnxMiniLM(path, folder, variant)
        out[f"load_{variant}"] = time.perf_counter() - started
    started = time.perf_counter()
    from lokal.rag.minilm import MiniLM

    MiniLM(folder)
    out["load_numpy"] = time.perf_counter() - started
    return out


def ingest(make, documents, tmp: Path, tag: str) -> tuple[int, float]:
    """Chunks indexed and seconds: a fresh store and a fresh cache."""
    from lokal.rag.stores.sqlite_vec import SqliteVecStore

    store = SqliteVecStore(tmp / f"{tag}.db")
    cache = CachedEmbedder(make(), tmp / f"{tag}-cache.db")
    indexer = Indexer(store, cache)
    started = time.perf_counter()
    report = indexer.index_documents(documents, prune=False)
    seconds = time.perf_counter() - started
    cache.close()
    store.close()
    return report.chunks, seconds


def ingest_all(makers, corpus: dict[str, str], repeats: int, tmp: Path) -> dict:
    docs = list(load_directory(ROOT / "data" / "docs"))
    result: dict[str, dict] = {name: {"docs": [], "gen_chunks": 0, "gen_s": 0.0} for name in makers}
    for r in range(repeats):
        for name, make in makers.items():
            chunks, seconds = ingest(make, docs, tmp, f"docs-{name}-{r}")
            result[name]["docs"].append(chunks / seconds)
            result[name]["docs_chunks"] = chunks
    names = list(corpus)
    slices = [names[i::4] for i in range(4)]
    for i, part in enumerate(slices):
        documents = documents_from_texts({n: corpus[n] for n in part})
        order = list(makers) if i % 2 == 0 else list(reversed(makers))
        for name in order:
            chunks, seconds = ingest(makers[name], documents, tmp, f"gen-{name}-{i}")
            result[name]["gen_chunks"] += chunks
            result[name]["gen_s"] += seconds
        print(f"  generated corpus slice {i + 1}/4 done (load {load()})", flush=True)
    return {
        name: {
            "docs": statistics.median(r["docs"]),
            "docs_chunks": r["docs_chunks"],
            "gen": r["gen_chunks"] / r["gen_s"],
            "gen_chunks": r["gen_chunks"],
        }
        for name, r in result.items()
    }


def _intra_op_runner(variant: str, threads: int = 2, batch: int = 8):
    """Embed with one ONNX Runtime call at a time on a session of ``threads`` intra-op
    threads (the usual set-up, which lokal does not use): for comparison."""
    import onnxruntime as ort

    from lokal.rag.embeddings import onnx_session

    encoder, _ = onnx_session(minilm_path(), variant)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.log_severity_level = 3
    session = ort.InferenceSession(str(encoder.graph), options, providers=["CPUExecutionProvider"])

    def run(texts: list[str]) -> None:
        ids = [e.ids for e in encoder.tokenizer.encode_batch(texts)]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for i in range(0, len(order), batch):
            group = [ids[j] for j in order[i : i + batch]]
            width = max(len(g) for g in group)
            input_ids = np.zeros((len(group), width), np.int64)
            mask = np.zeros((len(group), width), np.int64)
            for row, g in enumerate(group):
                input_ids[row, : len(g)] = g
                mask[row, : len(g)] = 1
            session.run(None, {"input_ids": input_ids, "attention_mask": mask})

    return run


def sweep(sets: dict[str, list[str]], torch_ok: bool, repeats: int = 3) -> list[tuple]:
    """Embedding throughput (texts/s, median of ``repeats``) per backend, workers and batch
    size, on each set of texts."""
    runners: list[tuple[str, str, object]] = []
    configs = {
        "onnx": [(1, 1), (1, 8), (2, 1), (2, 4), (2, 8), (2, 16), (2, 32)],
        "onnx-int8": [(1, 1), (2, 1)],  # one text per call (OnnxMiniLM.encode says why)
    }
    for backend in ("onnx", "onnx-int8"):
        for threads, batch in configs[backend]:
            embedder = LocalEmbedder(backend, threads=threads, batch_size=batch)
            runners.append((backend, f"{threads} worker(s), batches of {batch}", embedder.embed))
        variant, batch = ("int8", 1) if backend == "onnx-int8" else ("fp32", 8)
        runners.append(
            (
                backend,
                f"one call at a time, 2 intra-op threads, batches of {batch}",
                _intra_op_runner(variant, batch=batch),
            )
        )
    if torch_ok:
        for batch in (1, 8, 32):

            def run(texts: list[str], batch: int = batch) -> None:
                TORCH.batch_size = batch
                try:
                    TORCH.embed(texts)
                finally:
                    TORCH.batch_size = 8

            runners.append(("torch", f"2 intra-op threads, batches of {batch}", run))
    rates: dict[tuple[str, str, str], list[float]] = {}
    for _ in range(repeats):
        for backend, setup, run in runners:
            for name, texts in sets.items():
                run(texts[:2])
                started = time.perf_counter()
                run(texts)
                rate = len(texts) / (time.perf_counter() - started)
                rates.setdefault((backend, setup, name), []).append(rate)
    return [
        (backend, setup, *(statistics.median(rates[backend, setup, name]) for name in sets))
        for backend, setup, _ in runners
    ]


def encoder_flops(tokens: list[int]) -> float:
    """Floating-point operations (a multiply-add is two) of all-MiniLM-L6-v2 on texts of
    ``tokens`` word pieces: per layer the four 384×384 projections, the 384→1536→384
    feed-forward, and attention's two n×n products; the embeddings, LayerNorm, softmax and
    pooling are a few percent more and not counted."""
    hidden, inner, layers = 384, 1536, 6
    return sum(
        2 * layers * (4 * n * hidden * hidden + 2 * n * hidden * inner + 2 * n * n * hidden)
        for n in tokens
    )


def blas_peak(size: int = 2048, repeats: int = 5) -> dict[int, float]:
    """GFLOP/s of a ``size``² float32 matrix product through NumPy's BLAS on 1 and 2 threads:
    a reference for what these cores do on the operation the encoder is made of (ONNX
    Runtime's own kernels may beat it)."""
    from threadpoolctl import threadpool_limits

    x = np.random.default_rng(0).random((size, size), dtype=np.float32)
    out = {}
    for threads in (1, 2):
        with threadpool_limits(threads):
            x @ x
            started = time.perf_counter()
            for _ in range(repeats):
                x @ x
            out[threads] = repeats * 2 * size**3 / (time.perf_counter() - started) / 1e9
    return out


def fma_peak() -> tuple[float, float, str]:
    """The most float32 operations per second the cores' FMA units can do, computed (not
    measured): cores × 2 FMA units × float32 lanes (16 with AVX-512, 8 with AVX2) × 2
    operations, at the clock /proc/cpuinfo reports (a boost clock raises it); that clock
    (MHz); and how it was computed."""
    try:
        info = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return 0.0, 0.0, "unknown (no /proc/cpuinfo)"
    found = re.search(r"^flags\s*:(.*)$", info, re.M)
    clocks = [float(m) for m in re.findall(r"^cpu MHz\s*:\s*([\d.]+)", info, re.M)]
    if found is None or not clocks:  # not x86 (an ARM cpuinfo names neither)
        return 0.0, 0.0, "unknown (no x86 flags or clock in /proc/cpuinfo)"
    flags = set(found.group(1).split())
    lanes = 16 if "avx512f" in flags else 8 if "avx2" in flags and "fma" in flags else 4
    mhz = max(clocks)
    cores = os.cpu_count() or 1
    peak = cores * 2 * lanes * 2 * mhz / 1000
    how = f"{cores} cores × 2 FMA units × {lanes} float32 lanes × 2 operations at {mhz:,.0f} MHz"
    return peak, mhz, how


def latency(makers, questions: list[str]) -> dict[str, tuple[float, float]]:
    embedders = {name: make() for name, make in makers.items()}
    for embedder in embedders.values():
        embedder.embed(["warm up"])
    times: dict[str, list[float]] = {name: [] for name in embedders}
    for q in questions:
        for name, embedder in embedders.items():
            started = time.perf_counter()
            embedder.embed([q])
            times[name].append((time.perf_counter() - started) * 1000)
    return {name: (p(t, 50), p(t, 95)) for name, t in times.items()}


def agreement(makers, texts: list[str], reference: str) -> dict[str, tuple[float, float]]:
    vectors = {name: make().embed(texts) for name, make in makers.items()}
    ref = vectors[reference]
    out = {}
    for name, v in vectors.items():
        if name == reference:
            continue
        cos = (v * ref).sum(axis=1)
        out[name] = (float(cos.mean()), float(cos.min()))
    if "numpy" in vectors and reference != "numpy":
        cos = (vectors["onnx"] * vectors["numpy"]).sum(axis=1)
        out["onnx vs numpy"] = (float(cos.mean()), float(cos.min()))
    return out


def retrieval(makers, tmp: Path) -> dict[str, dict]:
    from lokal.rag.answer import RAG_MIN_SCORE
    from lokal.rag.evaluate import evaluate
    from lokal.rag.retrieval import Retriever
    from lokal.rag.stores.sqlite_vec import SqliteVecStore

    questions = ROOT / "data" / "rag_eval" / "questions.json"
    unanswerable = json.loads((ROOT / "data/rag_eval/unanswerable.json").read_text("utf-8"))
    answerable = json.loads(questions.read_text("utf-8"))
    out = {}
    for name, make in makers.items():
        cache = CachedEmbedder(make(), tmp / f"eval-{name}.db")
        scores = evaluate(questions, ROOT / "data" / "docs", cache)
        store = SqliteVecStore(tmp / f"threshold-{name}.db")
        Indexer(store, cache).index_path(ROOT / "data" / "docs")
        retriever = Retriever(store, cache)
        kept = sum(retriever.best_cosine(q["question"]) >= RAG_MIN_SCORE for q in answerable)
        rejected = sum(retriever.best_cosine(q["question"]) < RAG_MIN_SCORE for q in unanswerable)
        store.close()
        cache.close()
        out[name] = {
            **{m: scores["methods"][m] for m in ("vector", "hybrid")},
            "kept": kept,
            "answerable": len(answerable),
            "rejected": rejected,
            "unanswerable": len(unanswerable),
        }
    return out


def dev_items():
    from lokal.bench.batch import load_cases

    default = json.loads((ROOT / "data/dev/tools_lokal_run.json").read_text("utf-8"))
    for case in load_cases(ROOT / "data/dev/cases"):
        calls = case["expect"].get("tool_calls")
        if calls and not any(m.get("role") == "tool" for m in case["messages"]):
            yield case, case.get("tools") or default, calls[0]["name"]


def preselection(makers, k: int = 4) -> dict[str, dict]:
    from lokal.llm.select import ToolSelector
    from lokal.tools.schema import tool_specs

    items = list(dev_items())
    out = {}
    selectors = {name: ToolSelector(make()) for name, make in makers.items()}
    selectors["BM25 alone"] = ToolSelector(use_embeddings=False)
    for name, selector in selectors.items():
        hits = over_k = 0
        for case, functions, expected in items:
            tools = tool_specs(functions)
            ranking = selector.select(case["messages"], tools, k=None).ranking
            chosen = {t.name for t in ranking[:k]} | {t.name for t in ranking if t.pinned}
            hits += expected in chosen
            over_k += len(tools) > k
        out[name] = {"hits": hits, "n": len(items), "over_k": over_k}
    return out


def decisions(makers, count: int) -> dict[str, dict]:
    import lokal.llm.select as select
    from lokal.config import load_profile
    from lokal.llm.backends import get_backend
    from lokal.llm.decide import generate_ai_message
    from lokal.llm.select import ToolSelector
    from lokal.tools.schema import tool_specs

    profile = load_profile(ROOT / "configs" / "model.yaml")
    items = list(dev_items())
    step = max(1, len(items) // count)
    chosen = items[::step][:count]
    get_backend(profile)
    selectors = {}
    for name, make in makers.items():
        selector = ToolSelector(make())
        for _, functions, _ in chosen:
            selector.prepare(tool_specs(functions))  # the tools' vectors: not a decision's cost
        selectors[name] = selector
    previous = select._DEFAULT
    times: dict[str, list[float]] = {name: [] for name in makers}
    same = 0
    differ: list[str] = []
    try:
        select._DEFAULT = selectors["numpy"]
        generate_ai_message(profile, [{"role": "user", "content": "Hello"}], chosen[0][1])
        for i, (case, functions, _) in enumerate(chosen):
            names = list(makers) if i % 2 == 0 else list(reversed(makers))
            calls = {}
            for name in names:
                select._DEFAULT = selectors[name]
                started = time.perf_counter()
                decision = generate_ai_message(profile, case["messages"], functions)
                times[name].append(time.perf_counter() - started)
                calls[name] = json.dumps(
                    [(c.get("name"), c.get("args")) for c in decision.tool_calls],
                    default=str,
                )
            same += len(set(calls.values())) == 1
            if len(set(calls.values())) > 1:
                differ.append(f"{case['id']}: " + "; ".join(f"{n} {c}" for n, c in calls.items()))
            print(f"  decision {i + 1}/{len(chosen)} (load {load()})", flush=True)
    finally:
        select._DEFAULT = previous
    return {
        "per": {name: (statistics.median(t), sum(t)) for name, t in times.items()},
        "n": len(chosen),
        "same": same,
        "differ": differ,
    }


# -- the report -------------------------------------------------------------------------------

TORCH: TorchMiniLM


def main() -> None:
    global TORCH
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=2000, help="generated corpus, at least")
    parser.add_argument("--questions", type=int, default=100, help="latency: distinct questions")
    parser.add_argument("--decisions", type=int, default=12, help="staged decisions per backend")
    parser.add_argument("--repeats", type=int, default=3, help="data/docs ingest repeats")
    parser.add_argument("--sweep-repeats", type=int, default=3, help="batching sweep repeats")
    parser.add_argument("--no-torch", action="store_true", help="leave PyTorch out")
    parser.add_argument("--no-decisions", action="store_true", help="no bundled model")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--state",
        type=Path,
        default=ROOT / "outputs" / "embed_backends.json",
        help="each measure's result is written here as it is done",
    )
    parser.add_argument(
        "--resume", action="store_true", help="keep the measures already in --state"
    )
    args = parser.parse_args()
    state: dict = {}
    if args.resume and args.state.is_file():
        state = json.loads(args.state.read_text(encoding="utf-8"))
        print(f"resuming: {', '.join(state)} from {args.state}", flush=True)
    resumed = [name for name in state if not name.startswith("_")]
    started_load = load()

    def measured(name: str, measure):
        """``measure()``, or its result from --state; written there as soon as it is done
        (JSON: tuples come back as lists), with the load average at the start and end."""
        if name not in state:
            state.setdefault("_load", {"start": started_load})
            state[name] = measure()
            state["_load"]["end"] = load()
            args.state.parent.mkdir(parents=True, exist_ok=True)
            args.state.write_text(json.dumps(state, indent=1), encoding="utf-8")
        return state[name]

    command = (
        "`.venv/bin/python benchmarks/embed_backends.py"
        + (" " + " ".join(sys.argv[1:]) if sys.argv[1:] else "")
        + "`"
    )
    tmp = Path(tempfile.mkdtemp(prefix="embed-backends-"))  # graphs, stores, caches
    atexit.register(shutil.rmtree, tmp, True)

    print("graphs...", flush=True)
    built = dict(measured("graphs", lambda: graphs(tmp)))
    makers = {name: (lambda name=name: LocalEmbedder(name)) for name in LOCAL}
    torch_ok = not args.no_torch
    if torch_ok:
        try:
            started = time.perf_counter()
            TORCH = TorchMiniLM(8)
            built.setdefault("load_torch", time.perf_counter() - started)
            makers["torch"] = lambda: TORCH
        except ImportError as exc:
            print(f"no torch: {exc}")
            torch_ok = False
    reference = "torch" if torch_ok else "numpy"
    names = list(makers)
    for name in LOCAL:
        print(LocalEmbedder(name).describe())

    corpus = generated_corpus(args.chunks)
    gen_texts = chunk_texts(corpus)
    print(f"generated corpus: {len(corpus)} documents, {len(gen_texts)} chunks", flush=True)

    print("ingest...", flush=True)
    ingested = measured("ingest", lambda: ingest_all(makers, corpus, args.repeats, tmp))
    print(json.dumps(ingested, indent=1), flush=True)

    pool = [case["messages"][-1]["content"] for case, _, _ in dev_items()]
    pool += [
        q["question"]
        for q in json.loads((ROOT / "data/rag_eval/questions.json").read_text("utf-8"))
    ]
    questions = list(dict.fromkeys(pool))[: args.questions]

    print("batching and workers...", flush=True)
    swept = measured(
        "sweep",
        lambda: sweep(
            {"chunks": gen_texts[:256], "questions": questions}, torch_ok, args.sweep_repeats
        ),
    )
    for row in swept:
        print(row, flush=True)
    from tokenizers import Tokenizer

    pieces = Tokenizer.from_file(str(minilm_path() / "tokenizer.json"))
    pieces.enable_truncation(256)
    lengths = [len(e.ids) for e in pieces.encode_batch(gen_texts[:256])]
    per_chunk = encoder_flops(lengths) / len(lengths)
    peak = dict(zip((1, 2), measured("blas_peak", lambda: list(blas_peak().values())), strict=True))
    print(f"compute: {per_chunk / 1e9:.2f} GFLOP per chunk, BLAS peak {peak}", flush=True)

    print("latency...", flush=True)
    latencies = measured("latency", lambda: latency(makers, questions))
    print(latencies, flush=True)

    print("agreement...", flush=True)
    docs_chunks = chunk_texts({d.source: d.text for d in load_directory(ROOT / "data" / "docs")})
    texts = docs_chunks + questions + gen_texts[:300]
    agreed = measured("agreement", lambda: agreement(makers, texts, reference))
    print(agreed, flush=True)

    print("retrieval...", flush=True)
    retrieved = measured("retrieval", lambda: retrieval(makers, tmp))
    print(json.dumps(retrieved, indent=1), flush=True)

    print("preselection...", flush=True)
    selected = measured("preselection", lambda: preselection(makers))
    print(selected, flush=True)

    decided = None
    if not args.no_decisions:
        print("decisions...", flush=True)
        decided = measured("decisions", lambda: decisions(makers, args.decisions))
        print(decided, flush=True)

    lines = [
        "## Embedding backends: NumPy, ONNX Runtime fp32 and int8, PyTorch",
        "",
        f"Command: {command} on {machine()}, onnxruntime "
        f"{LocalEmbedder('onnx').info()['runtime'].split()[-1]}; load average (1/5 min) "
        f"{state.get('_load', {}).get('start', '?')} at the start, "
        f"{state.get('_load', {}).get('end', '?')} at "
        "the end of the measures (2 would be both cores busy)"
        + (f"; measures kept from an earlier run: {', '.join(resumed)}. " if resumed else ". ")
        + "Every measure runs all backends in the same process, alternating, so the ratios "
        "compare like with like. `numpy` is lokal's NumPy encoder (the fallback); `onnx` and "
        "`onnx-int8` run the graph lokal builds from the installed weights "
        "(`lokal.rag.onnx_minilm`); `torch` is sentence-transformers on PyTorch "
        "(2 intra-op threads, batches of 8), the reference implementation.",
        "",
        "**Ingest** (`Indexer`: load, chunk 200/40, embed, store in sqlite-vec; every chunk "
        "embedded), chunks/s, and each backend's ratio to "
        + ("torch and to numpy:" if torch_ok else "numpy:"),
        "",
    ]
    ratios = ["torch", "numpy"] if torch_ok else ["numpy"]
    header = [
        "backend",
        f"data/docs ({ingested['numpy']['docs_chunks']} chunks, median of {args.repeats})",
        *[f"×{b}" for b in ratios],
        f"generated corpus ({ingested['numpy']['gen_chunks']:,} chunks)",
        *[f"×{b}" for b in ratios],
    ]
    lines += ["| " + " | ".join(header) + " |", "| --- |" + " ---: |" * (len(header) - 1)]
    for name in names:
        r = ingested[name]
        cells = [name]
        for corpus_key in ("docs", "gen"):
            cells.append(f"{r[corpus_key]:.1f}")
            cells += [f"{r[corpus_key] / ingested[b][corpus_key]:.2f}" for b in ratios]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        f"**Batching and workers** (embedding only, texts/s, median of {args.sweep_repeats}): "
        f"{min(256, len(gen_texts))} generated "
        f"chunks, and the {len(questions)} questions below (short texts, like tool "
        "descriptions). lokal's ONNX sessions run each call on one thread; a list of texts is "
        "sorted by length, cut into batches, and the batches run on `threads` workers at once "
        "(the default: 2 workers here, batches of 8; int8 always one text per call, as its "
        "activations are quantised with one scale per call):",
        "",
        "| backend | setup | chunks/s | questions/s |",
        "| --- | --- | ---: | ---: |",
    ]
    lines += [f"| {b} | {setup} | {c:.1f} | {q:.0f} |" for b, setup, c, q in swept]
    best = {b: max(c for name, _, c, _ in swept if name == b) for b, *_ in swept}
    fma, mhz, how = fma_peak()
    gflops = {b: rate * per_chunk / 1e9 for b, rate in best.items()}
    lines += [
        "",
        f"**The ceiling.** A chunk of these 256 is {statistics.mean(lengths):.0f} word pieces "
        f"on average, {per_chunk / 1e9:.2f} GFLOP of matrix products (`encoder_flops`). "
        f"For reference, a 2048² float32 product through NumPy's BLAS ran at {peak[1]:.0f} "
        f"GFLOP/s on one thread and {peak[2]:.0f} on two (`blas_peak`), and "
        + (
            f"at the clock the cores report their FMA units can do {fma:.0f} GFLOP/s "
            f"({how}; `fma_peak`, computed, not measured). "
            if fma
            else f"the FMA units' rate is {how}. "
        )
        + "Each backend's best setup above:",
        "",
        "| backend | best chunks/s | GFLOP/s | × the 2-thread BLAS product | share of the FMA bound |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {b} | {best[b]:.1f} | {g:.0f} | {g / peak[2]:.2f} | "
        + (f"{g / fma:.0%} |" if fma else "— |")
        for b, g in gflops.items()
    ]
    if "torch" in best and fma:
        need = 4 * gflops["torch"]
        lines += [
            "",
            f"PyTorch's best is {gflops['torch']:.0f} GFLOP/s. 4× PyTorch would take "
            f"{need:.0f} GFLOP/s: every FMA unit of these cores busy on every cycle at "
            f"{need / fma * mhz:,.0f} MHz, about twice the clock any server CPU "
            "runs at, so no float32 backend can reach it here. The int8 row is counted in "
            "float32 operations for comparison (its products are 8-bit)."
            + (
                " A share above 100 % means the cores ran above the clock they report (boost)."
                if max(gflops.values()) > fma
                else ""
            ),
        ]
    lines += [
        "",
        f"**One question** ({len(questions)} distinct development and RAG questions, one at "
        "a time, nothing cached), ms:",
        "",
        "| backend | p50 | p95 |",
        "| --- | ---: | ---: |",
    ]
    lines += [f"| {n} | {latencies[n][0]:.2f} | {latencies[n][1]:.2f} |" for n in names]
    lines += [
        "",
        f"**Agreement** with the {reference} vectors (cosine over {len(texts)} texts: the "
        f"{len(docs_chunks)} chunks of data/docs, the questions, {min(300, len(gen_texts))} generated chunks):",
        "",
        "| backend | mean | min |",
        "| --- | ---: | ---: |",
    ]
    lines += [f"| {n} | {m:.6f} | {lo:.6f} |" for n, (m, lo) in agreed.items()]
    lines += [
        "",
        "**Retrieval** (`lokal rag eval`: data/rag_eval/questions.json over data/docs) and the "
        "calibrated `RAG_MIN_SCORE` (0.31) on each backend's cosines:",
        "",
        "| backend | vector hit@1 | vector hit@5 | vector MRR | hybrid hit@1 | hybrid hit@5 "
        "| hybrid MRR | answerable kept | unanswerable turned away |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n in names:
        r = retrieved[n]
        v, h = r["vector"], r["hybrid"]
        lines.append(
            f"| {n} | {v['hit@1']:.3f} | {v['hit@5']:.3f} | {v['mrr']:.3f} | {h['hit@1']:.3f} "
            f"| {h['hit@5']:.3f} | {h['mrr']:.3f} | {r['kept']}/{r['answerable']} "
            f"| {r['rejected']}/{r['unanswerable']} |"
        )
    any_sel = next(iter(selected.values()))
    lines += [
        "",
        f"**Tool preselection recall@4** on the development cases ({any_sel['n']} cases "
        f"expecting a call; {any_sel['over_k']} offer more than 4 tools):",
        "",
        "| ranking | recall@4 |",
        "| --- | ---: |",
    ]
    lines += [
        f"| {n} | {s['hits']}/{s['n']} ({100 * s['hits'] / s['n']:.1f}%) |"
        for n, s in selected.items()
    ]
    if decided:
        lines += [
            "",
            f"**Whole staged decisions** (default profile, SmolLM2-135M through llama.cpp, "
            f"{decided['n']} development cases, the tools' vectors made beforehand; each "
            "decision embeds its question and scores the tools): the same calls on every "
            f"backend in {decided['same']}/{decided['n']} cases.",
            "",
            "| backend | median decision | total |",
            "| --- | ---: | ---: |",
        ]
        lines += [
            f"| {n} | {decided['per'][n][0] * 1000:.0f} ms | {decided['per'][n][1]:.1f} s |"
            for n in names
        ]
        if decided["differ"]:
            lines += ["", "Cases whose calls differ between backends:", ""]
            lines += [f"- {d}" for d in decided["differ"]]
    lines += [
        "",
        f"**Graphs**: built once per machine and weights into `$LOKAL_HOME/models`: fp32 in "
        f"{built['build_fp32']:.1f} s ({built['size_fp32']:.0f} MB), int8 in "
        f"{built['build_int8']:.1f} s ({built['size_int8']:.0f} MB). Load: fp32 "
        f"{built['load_fp32']:.2f} s, int8 {built['load_int8']:.2f} s, numpy "
        f"{built['load_numpy']:.2f} s"
        + (
            f", torch (sentence-transformers, imports included) {built['load_torch']:.1f} s."
            if torch_ok
            else "."
        ),
    ]
    markdown = "\n".join(lines)
    print(markdown)
    if not args.no_write:
        write_section("embed_backends", markdown)


if __name__ == "__main__":
    main()
