"""``lokal rag index|ask|search|stats|eval``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lokal.cli.common import (
    EXIT_ANSWERED,
    EXIT_NO_ANSWER,
    add_command,
    add_model_arguments,
    add_profile_arguments,
    profile_from_args,
    require_text,
)
from lokal.errors import ConfigError, LokalError


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        choices=["sqlite", "chroma"],
        default="sqlite",
        help="where the index lives: a SQLite file or a Chroma server (sqlite)",
    )
    parser.add_argument(
        "--store_path", default=None, help="SQLite index file (default $LOKAL_HOME/rag/index.db)"
    )
    parser.add_argument("--chroma_url", default=None, help="e.g. http://127.0.0.1:8000")
    parser.add_argument("--collection", default="lokal", help="Chroma collection")
    parser.add_argument(
        "--embeddings_url", default=None, help="OpenAI-compatible /v1 base for embeddings"
    )


# how the local MiniLM runs, for the commands without the rest of the model options
PROFILE_HELP = "a named profile of model.yaml, for its embeddings: section (how MiniLM runs)"


def embedding_settings_from_args(args: argparse.Namespace):
    """The ``embeddings:`` settings of the profile the options name (None for a command
    without profile options), made the process's choice (``lokal.rag.embeddings``)."""
    if "model_name" not in vars(args):
        return None
    if args.rag_command == "ask":
        return profile_from_args(args).embeddings  # configures the process too
    settings = vars(args).get("embedding_settings")
    if settings is None:
        from lokal.config import load_profile
        from lokal.rag.embeddings import configure

        settings = args.embedding_settings = load_profile(
            args.model_config, args.model_name
        ).embeddings
        configure(settings)
    return settings


def open_from_args(args: argparse.Namespace):
    from lokal.rag.index import open_rag

    return open_rag(
        args.store,
        store_path=args.store_path,
        chroma_url=args.chroma_url,
        collection=args.collection,
        embeddings_url=args.embeddings_url,
        embeddings=embedding_settings_from_args(args),
    )


def describe_embedder(embedder) -> dict:
    """What embeds: the local MiniLM's backend (and why, when it fell back), or the server."""
    inner = getattr(embedder, "inner", embedder)
    if hasattr(inner, "info"):
        return inner.info()
    return {"model": getattr(inner, "name", "?"), "url": getattr(inner, "base_url", None)}


def _rag_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="rag_command", required=True)
    index = sub.add_parser("index", help="index a directory or a file")
    index.add_argument("path", help="a folder (indexed recursively) or one file")
    index.add_argument(
        "--max_tokens", type=int, default=200, help="the largest chunk, in tokens (200)"
    )
    index.add_argument(
        "--overlap", type=int, default=40, help="tokens two neighbouring chunks share (40)"
    )
    index.add_argument("--quiet", action="store_true", help="no progress on stderr")
    ask = sub.add_parser("ask", help="answer from the indexed documents, with citations")
    ask.add_argument("question", help="what to ask the documents")
    ask.add_argument("--k", type=int, default=4, help="chunks given to the model (4)")
    ask.add_argument(
        "--method",
        choices=["vector", "bm25", "hybrid"],
        default="hybrid",
        help="retrieval: embeddings, keywords, or both fused (hybrid)",
    )
    ask.add_argument(
        "--json", action="store_true", help="print the answer, citations and chunks as JSON"
    )
    ask.add_argument("--quiet", action="store_true", help="no live progress on stderr")
    ask.add_argument(
        "--min_score",
        type=float,
        default=None,
        help="answer 'not in the documents' without asking the model when the question's "
        "cosine to the closest chunk is below this (default: the value calibrated for "
        "all-MiniLM-L6-v2, see docs/rag.md; 0 turns it off)",
    )
    add_model_arguments(ask)
    search = sub.add_parser("search", help="the best chunks for a query")
    search.add_argument("query", help="what to look for")
    search.add_argument("--k", type=int, default=5, help="how many chunks (5)")
    search.add_argument(
        "--method",
        choices=["vector", "bm25", "hybrid"],
        default="hybrid",
        help="retrieval: embeddings, keywords, or both fused (hybrid)",
    )
    search.add_argument("--source", default=None, help="only chunks of this source")
    search.add_argument("--json", action="store_true", help="print one JSON list")
    sub.add_parser("stats", help="chunks and sources in the index")
    evaluate = sub.add_parser("eval", help="hit@1, hit@5, MRR on a labelled question set")
    evaluate.add_argument(
        "--questions",
        default="data/rag_eval/questions.json",
        help="the labelled questions (data/rag_eval/questions.json)",
    )
    evaluate.add_argument(
        "--docs", default="data/docs", help="the documents they are about (data/docs)"
    )
    evaluate.add_argument("--json", action="store_true", help="print the scores as JSON")
    for p in (index, ask, search, sub.choices["stats"], evaluate):
        add_store_arguments(p)
    for p in (index, search, evaluate):
        add_profile_arguments(p, PROFILE_HELP)


def check_rag_inputs(args: argparse.Namespace) -> None:
    """A ConfigError (exit 2, one line) before any index or model is opened: a path to
    index that does not exist, an empty question or query, k below 1, an unknown profile."""
    if args.rag_command == "index":
        if not Path(args.path).expanduser().exists():
            raise ConfigError(f"no such file or folder: {args.path!r}")
    elif args.rag_command in ("ask", "search"):
        what = "question" if args.rag_command == "ask" else "query"
        setattr(args, what, require_text(getattr(args, what), f"the {what}"))
        if args.k < 1:
            raise ConfigError(f"--k must be at least 1, got {args.k}")
    if args.rag_command == "eval":
        if not Path(args.questions).is_file():
            raise ConfigError(f"--questions {args.questions!r}: no such file")
        if not Path(args.docs).exists():
            raise ConfigError(f"--docs {args.docs!r}: no such file or folder")
    if args.rag_command in ("ask", "index", "search", "eval"):
        embedding_settings_from_args(args)  # an unknown profile or a bad model.yaml: exit 2


def rag_exit_code(record: dict) -> int:
    """0 when the answer comes from the documents (the model's, or the passage lokal
    extracted when the model did not answer from relevant passages), with a citation; 1 when
    ``rag ask`` could not answer: no passages, an unusable reply, an unsupported one. The
    record's ``status`` says the same (``success``, ``extracted``; else ``no_context``,
    ``not_found``, ``unsupported``)."""
    answered = record.get("status") in ("success", "extracted") and bool(record.get("citations"))
    return EXIT_ANSWERED if answered else EXIT_NO_ANSWER


def rag_command(args: argparse.Namespace) -> int:
    from lokal.rag.retrieval import Retriever

    check_rag_inputs(args)  # before any index or model is opened
    store, embedder = open_from_args(args)
    try:
        if args.rag_command == "index":
            from lokal.rag.index import Indexer

            embeddings = describe_embedder(embedder)  # loads the model: says what runs it
            if not args.quiet:
                inner = getattr(embedder, "inner", embedder)
                line = inner.describe() if hasattr(inner, "describe") else None
                print(line or f"embeddings: {embeddings}", file=sys.stderr, flush=True)
            indexer = Indexer(store, embedder, max_tokens=args.max_tokens, overlap=args.overlap)
            report = indexer.index_path(args.path, progress=not args.quiet)
            print(
                json.dumps(
                    {**report.to_dict(), "total_chunks": store.count(), "embeddings": embeddings}
                )
            )
            return 0
        if args.rag_command == "stats":
            sources = store.sources()
            print(
                json.dumps(
                    {
                        "store": store.name,
                        "chunks": store.count(),
                        "sources": len(sources),
                        "files": sorted(sources),
                    },
                    indent=2,
                )
            )
            return 0
        if args.rag_command == "eval":
            from lokal.rag.evaluate import evaluate, markdown_table

            results = evaluate(args.questions, args.docs, embedder)
            print(json.dumps(results, indent=2) if args.json else markdown_table(results))
            return 0
        if store.count() == 0:
            raise LokalError("the index is empty; run `lokal rag index DIR` first")
        retriever = Retriever(store, embedder)
        if args.rag_command == "search":
            where = {"source": args.source} if args.source else None
            hits = retriever.search(args.query, k=args.k, method=args.method, where=where)
            rows = [h.to_dict() for h in hits]
            if args.json:
                print(json.dumps(rows, ensure_ascii=False))
            else:
                for row in rows:
                    text = " ".join(row["text"].split())[:160]
                    print(f"{row['score']:.4f}  {row['source']}#{row['chunk']}  {text}")
            return 0
        from lokal.config import announce
        from lokal.live import working
        from lokal.llm.answer import answer_question
        from lokal.rag.answer import default_min_score

        profile = profile_from_args(args)
        if not args.quiet:  # --quiet: nothing on stderr but errors
            announce(profile)
        with working("answering", quiet=args.quiet):
            record = answer_question(
                args.question,
                retriever,
                profile,
                k=args.k,
                method=args.method,
                min_score=default_min_score(embedder) if args.min_score is None else args.min_score,
            )
        if args.json:
            print(json.dumps(record, ensure_ascii=False, indent=2))
        else:
            print(record["answer"])
        return rag_exit_code(record)
    finally:
        store.close()
        embedder.close()
        sys.stdout.flush()


def register(commands: argparse._SubParsersAction) -> None:
    """``lokal rag index|ask|search|stats|eval``."""
    add_command(
        commands, "rag", "documents: index, ask, search, stats, eval", _rag_arguments, rag_command
    )
