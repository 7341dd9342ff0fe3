"""``lokal trace view|export`` and ``lokal traces list``: a run's trace as a page, as
OpenTelemetry spans, and the runs kept in ``$LOKAL_HOME/traces`` (docs/tracing.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lokal.cli.common import add_command, ensure_output_folder
from lokal.errors import ConfigError

__all__ = ["register"]


def _trace_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="trace_command", required=True)
    view = sub.add_parser("view", help="write one self-contained HTML page of a run")
    view.add_argument("file", help="a trace (lokal run's JSON lines)")
    view.add_argument(
        "-o", "--output", default=None, metavar="HTML", help="the page (default FILE.html)"
    )
    export = sub.add_parser("export", help="the run as OpenTelemetry spans (OTLP JSON)")
    export.add_argument("file", help="a trace (lokal run's JSON lines)")
    export.add_argument(
        "--format", choices=["otlp-json"], default="otlp-json", help="OTLP/JSON (the only one)"
    )
    export.add_argument(
        "-o", "--output", default=None, metavar="JSON", help="write here (default stdout)"
    )
    export.add_argument(
        "--include-content",
        "--include_content",
        dest="include_content",
        action="store_true",
        help="add prompts, replies, tool arguments and results (gen_ai.*.messages)",
    )
    export.add_argument(
        "--otlp-endpoint",
        "--otlp_endpoint",
        dest="otlp_endpoint",
        default=None,
        metavar="URL",
        help="send to this OTLP/HTTP collector instead (e.g. http://127.0.0.1:4318/v1/traces)",
    )


def _traces_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="traces_command", required=True)
    listing = sub.add_parser("list", help="the runs kept in $LOKAL_HOME/traces, newest first")
    listing.add_argument("--limit", type=int, default=20, help="how many (20)")
    listing.add_argument("--json", action="store_true", help="print one JSON list")


def _events(path: str) -> list[dict]:
    from lokal.events import EventError
    from lokal.trace import TraceError
    from lokal.viewer.store import load_events

    if not Path(path).expanduser().is_file():
        raise ConfigError(f"no such trace file: {path!r}")
    try:
        events = load_events(Path(path).expanduser())
    except (TraceError, EventError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not a readable trace: {exc}") from None
    if not any(e.get("type") == "run_start" for e in events):
        raise ConfigError(f"{path} is not a lokal trace: no run_start event")
    return events


def trace_command(args: argparse.Namespace) -> int:
    events = _events(args.file)
    if args.trace_command == "view":
        from lokal.viewer.page import build_page

        target = Path(args.output or Path(args.file).expanduser().with_suffix(".html"))
        ensure_output_folder(target, "-o")
        target.write_text(build_page(events), encoding="utf-8")
        print(target)
        return 0
    from lokal.viewer.otlp import send_otlp, trace_to_otlp

    request = trace_to_otlp(events, include_content=args.include_content)
    if args.otlp_endpoint:
        if args.output:
            raise ConfigError("give -o or --otlp-endpoint, not both")
        count = send_otlp(request, args.otlp_endpoint)
        print(f"sent {count} spans to {args.otlp_endpoint}", file=sys.stderr)
        return 0
    text = json.dumps(request, ensure_ascii=False, indent=2) + "\n"
    if args.output:
        target = ensure_output_folder(args.output, "-o")
        target.write_text(text, encoding="utf-8")
        print(target)
    else:
        sys.stdout.write(text)
    return 0


def traces_command(args: argparse.Namespace) -> int:
    from lokal.paths import traces_dir
    from lokal.viewer.store import list_traces

    if args.limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {args.limit}")
    runs = list_traces(limit=args.limit)
    if args.json:
        print(json.dumps(runs, ensure_ascii=False, indent=2))
        return 0
    if not runs:
        print(f"no runs kept yet in {traces_dir()}", file=sys.stderr)
        return 0
    for run in runs:
        question = " ".join((run["question"] or "(no question)").split())
        question = question if len(question) <= 60 else question[:59] + "…"
        tokens = f"{run['tokens_in']}→{run['tokens_out']} tok"
        print(f"{run['started_at']}  {run['status']:<10} {tokens:>14}  {question}")
        print(f"    {run['file']}")
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    """``lokal trace view|export`` and ``lokal traces list``."""
    add_command(
        commands,
        "trace",
        "a run's trace as an HTML page (view) or OpenTelemetry spans (export)",
        _trace_arguments,
        trace_command,
    )
    add_command(
        commands,
        "traces",
        "the runs kept in $LOKAL_HOME/traces (list)",
        _traces_arguments,
        traces_command,
    )
