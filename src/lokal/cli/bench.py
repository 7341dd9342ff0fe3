"""``lokal bench`` and ``lokal bfcl``."""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lokal.bench.report import LATENCY_HEADERS
from lokal.cli.common import add_command, ensure_output_folder, read_json_file
from lokal.config import LEGACY_MODES, TOOL_CALLING
from lokal.errors import ConfigError


def _split(value: str | list[str] | None) -> list[str]:
    """The names in a comma list, or in a list of comma lists (a repeated option)."""
    values = [value] if isinstance(value, str) else value or []
    return [part.strip() for v in values for part in v.split(",") if part.strip()]


@contextmanager
def _progress_bar(description: str, total: int) -> Iterator[Callable[[], None]]:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        transient=False,
    ) as progress:
        task = progress.add_task(description, total=total)
        yield lambda: progress.advance(task)


def _machine() -> dict[str, str]:
    import os

    return {
        "machine": platform.machine(),
        "python": platform.python_version(),
        "cpus": str(os.cpu_count()),
        "system": platform.system(),
    }


def _concurrency_note(backends: set[str], concurrency: int) -> str | None:
    if concurrency > 1 and backends - {"openai", "mock"}:
        return (
            f"concurrency {concurrency}: in-process backends ({', '.join(sorted(backends))}) "
            "run one generation at a time (model lock), so this gains nothing; "
            "a server backend (openai) gains"
        )
    return None


# --- lokal bench ------------------------------------------------------------------------------


def _bench_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model_config", default=None, help="model.yaml (default configs/)")
    parser.add_argument(
        "--profile",
        "--profiles",
        "--model_name",
        dest="profiles",
        action="append",
        default=None,
        metavar="NAME",
        help="a profile of model.yaml; repeat it or give a comma list to compare several "
        "(default: the default profile)",
    )
    parser.add_argument(
        "--modes",
        default=None,
        help=f"comma list of tool_calling modes: {','.join(TOOL_CALLING)} "
        "(default: each profile's own)",
    )
    parser.add_argument("--cases", default="data/bench_cases", help="directory of case files")
    parser.add_argument(
        "--tools_schema",
        default="data/messages/tools_schema_basic.json",
        help="tools for cases that carry none",
    )
    parser.add_argument(
        "--mode",
        choices=tuple(LEGACY_MODES),
        default="prompt_json",
        help="the cases' strategy by its original name (a case's own mode wins unless this is "
        "mock, which runs every case on the mock backend)",
    )
    parser.add_argument("--outdir", default="outputs/bench", help="where the reports go")
    parser.add_argument("--concurrency", type=int, default=1, help="cases in flight at once")
    parser.add_argument(
        "--limit", type=int, default=None, help="only the first N case files (by file name)"
    )


def print_table(console: Any, table: Any) -> None:
    """Print a rich table whole: on a terminal its cells fold instead of being cut; into a
    file or a pipe (80 columns by default) it gets the width it needs."""
    if console.is_terminal:
        console.print(table)
        return
    needed = console.measure(table, options=console.options.update_width(10_000)).maximum
    width = console.width
    console.width = max(width, needed)  # print(width=) cannot go past the console's width
    try:
        console.print(table)
    finally:
        console.width = width


def bench_command(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from lokal.bench.batch import load_cases, run_bench, summarize
    from lokal.bench.report import write_report
    from lokal.config import load_profile

    console = Console()
    if args.concurrency < 1:
        raise ConfigError("--concurrency must be at least 1")
    modes = _split(args.modes) or [None]
    for mode in modes:
        if mode not in (None, *TOOL_CALLING):
            raise ConfigError(f"--modes: {mode!r} is not one of {', '.join(TOOL_CALLING)}")
    if args.limit is not None and args.limit < 1:
        raise ConfigError("--limit must be at least 1")
    ensure_output_folder(args.outdir, "--outdir", folder=True)  # before hours of cases
    profiles = [load_profile(args.model_config, name) for name in _split(args.profiles) or [None]]
    cases = load_cases(args.cases)[: args.limit]
    tools = read_json_file(args.tools_schema, "tools_schema")
    backends = {"mock"} if args.mode == "mock" else {p.backend for p in profiles}
    note = _concurrency_note(backends, args.concurrency)
    if note:
        console.print(f"[yellow]{note}[/yellow]")
    total = len(profiles) * len(modes) * len(cases)
    started = time.perf_counter()
    with _progress_bar("lokal bench", total) as advance:
        records = run_bench(
            profiles,
            modes,
            cases,
            tools,
            decision_mode=args.mode,
            concurrency=args.concurrency,
            progress=advance,
        )
    summary = summarize(records)
    used = list(dict.fromkeys(r["decision_mode"] for r in records))  # in the order run
    meta = {
        "command": "lokal bench",
        "cases_dir": str(args.cases),
        # the tool_calling mode(s) the decisions used (staged, constrained, ...), not --mode
        "decision_mode": used[0] if len(used) == 1 else ",".join(used),
        "tool_calling": used,
        "mode_option": args.mode,  # --mode: the cases' strategy, or mock for every case
        "backend": "mock" if args.mode == "mock" else sorted({p.backend for p in profiles}),
        "profiles": [p.name for p in profiles],
        "limit": args.limit,
        "concurrency": args.concurrency,
        "wall_time_s": round(time.perf_counter() - started, 1),
        **_machine(),
    }
    paths = write_report(args.outdir, records, summary, meta)
    table = Table(title=f"lokal bench: {len(cases)} cases")
    table.add_column("profile/mode", overflow="fold")
    for header in ("success %", "correct %", *LATENCY_HEADERS):
        table.add_column(header, justify="right", overflow="fold")
    for key, s in summary.items():
        table.add_row(
            key,
            f"{s['success_rate']:.1f}",
            f"{s['correct_rate']:.1f}",
            f"{s['latency_ms_mean']:.0f}",
            f"{s['latency_ms_p50']:.0f}",
            f"{s['latency_ms_p95']:.0f}",
        )
    print_table(console, table)
    console.print(f"reports: {paths['report']}, {paths['summary']}, {paths['cases']}")
    return 0


# --- lokal bfcl -------------------------------------------------------------------------------


def _bfcl_arguments(parser: argparse.ArgumentParser) -> None:
    from lokal.bench.bfcl import PIPELINES
    from lokal.bench.bfcl_data import AST_CATEGORIES, EVAL_SAMPLE, FULL_UP_TO, SPLITS

    parser.add_argument("--model_config", default=None, help="model.yaml (default configs/)")
    parser.add_argument(
        "--profile",
        "--model_name",
        dest="profile",
        default=None,
        metavar="NAME",
        help="a profile of model.yaml (default: the default profile)",
    )
    parser.add_argument(
        "--categories",
        default=",".join(AST_CATEGORIES),
        help=f"comma list of BFCL v4 categories (default: all): {', '.join(AST_CATEGORIES)}",
    )
    parser.add_argument(
        "--pipelines", default=",".join(PIPELINES), help=f"comma list of {', '.join(PIPELINES)}"
    )
    parser.add_argument(
        "--split",
        choices=SPLITS,
        default="eval",
        help="eval (default): the questions to report, every position not a multiple of 5; "
        "dev: positions 0, 5, 10, ... (study and calibrate on these only); all: both",
    )
    parser.add_argument(
        "--sample",
        type=int,
        default=EVAL_SAMPLE,
        help=f"an evaluation split of more than {FULL_UP_TO} questions (live_multiple, "
        f"live_irrelevance) is run on a fixed-seed sample of this many (default "
        f"{EVAL_SAMPLE}; 0: the whole split)",
    )
    parser.add_argument(
        "--limit", type=int, default=None, help="the first N questions of each category's split"
    )
    parser.add_argument(
        "--ids",
        default=None,
        help="only these questions of the split (comma-separated ids, e.g. "
        "irrelevance_10,live_irrelevance_400-83-0): the ones a change can move",
    )
    parser.add_argument("--outdir", default="outputs/bfcl", help="where results go")
    parser.add_argument("--concurrency", type=int, default=1, help="questions in flight at once")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the results already in OUTDIR/results.jsonl and run only the missing ones",
    )


def bfcl_command(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from lokal.bench.bfcl import run_bfcl, write_scores
    from lokal.bench.bfcl_data import SAMPLE_SEED
    from lokal.config import load_profile

    console = Console()
    if args.concurrency < 1:
        raise ConfigError("--concurrency must be at least 1")
    if args.limit is not None and args.limit < 1:
        raise ConfigError("--limit must be at least 1")
    if args.sample < 0:
        raise ConfigError("--sample must be 0 (no sampling) or more")
    sample = args.sample or None
    ensure_output_folder(args.outdir, "--outdir", folder=True)  # before hours of questions
    categories = _split(args.categories)
    pipelines = _split(args.pipelines)
    profile = load_profile(args.model_config, args.profile)
    note = _concurrency_note({profile.backend}, args.concurrency)
    if note:
        console.print(f"[yellow]{note}[/yellow]")
    from lokal.bench.bfcl import plan_jobs, read_results

    outdir = Path(args.outdir)
    results = outdir / "results.jsonl"
    ids = set(_split(args.ids)) if args.ids else None
    jobs = plan_jobs(categories, pipelines, args.limit, split=args.split, sample=sample, ids=ids)
    if ids is not None:
        found = {e["id"] for _, _, e in jobs}
        if ids - found:
            raise ConfigError(
                f"--ids: not in the {args.split} split of {', '.join(categories)}: "
                + ", ".join(sorted(ids - found))
            )
    done = 0
    if args.resume:
        keys = {(p, c, e["id"]) for p, c, e in jobs}
        done = len({(r["pipeline"], r["category"], r["id"]) for r in read_results(results)} & keys)
        console.print(f"resuming: {done} of {len(jobs)} questions already in {results}")
    started = time.perf_counter()
    with _progress_bar("lokal bfcl", len(jobs) - done) as advance:
        rows = run_bfcl(
            profile,
            categories,
            pipelines,
            limit=args.limit,
            concurrency=args.concurrency,
            progress=advance,
            results_path=results,
            resume=args.resume,
            split=args.split,
            sample=sample,
            ids=ids,
        )
    meta = {
        "command": "lokal bfcl",
        "model": profile.display_name,
        "profile": profile.name,
        "split": args.split,
        "sample": sample,
        "sample_seed": SAMPLE_SEED,
        "limit": args.limit,
        "ids": sorted(ids) if ids is not None else None,
        "concurrency": args.concurrency,
        "wall_time_s": round(time.perf_counter() - started, 1),
        **_machine(),
    }
    scores = write_scores(outdir, rows, categories, meta)
    table = Table(title=f"BFCL v4 AST accuracy %, {profile.display_name}")
    table.add_column("pipeline", overflow="fold")
    for category in categories:
        table.add_column(category, justify="right", overflow="fold")
    table.add_column("overall", justify="right", overflow="fold")
    table.add_column("valid %", justify="right", overflow="fold")
    for pipeline, entry in scores["pipelines"].items():
        cells = [
            f"{entry['categories'][c]['accuracy']:.1f}" if c in entry["categories"] else "-"
            for c in categories
        ]
        table.add_row(
            pipeline,
            *cells,
            f"{entry['overall']['accuracy_mean_of_categories']:.1f}",
            f"{entry['overall']['valid_rate']:.1f}",
        )
    print_table(console, table)
    for pipeline, entry in scores["pipelines"].items():
        console.print(f"  {pipeline}: {entry['description']}")
    console.print(f"results: {results}, scores.json, scores.md")
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    """``lokal bench`` and ``lokal bfcl``."""
    add_command(
        commands,
        "bench",
        "batch benchmark: case files × profiles × modes → reports",
        _bench_arguments,
        bench_command,
    )
    add_command(
        commands,
        "bfcl",
        "BFCL v4 AST categories through several pipelines, scored",
        _bfcl_arguments,
        bfcl_command,
    )
