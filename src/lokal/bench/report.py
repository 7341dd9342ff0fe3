"""Reports of ``lokal bench``: summary.json, cases.jsonl, PNG charts and a self-contained
report.html (charts embedded as base64 PNG, no external assets).

Charts (matplotlib, Agg backend): latency per case, tool_calls per case, success rate by mode,
correctness by mode and profile.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

__all__ = ["CHARTS", "LATENCY_HEADERS", "write_report"]

# the summary's latency columns (latency_ms_mean, _p50, _p95), in the report and the CLI table
LATENCY_HEADERS = ("mean latency (ms)", "p50 latency (ms)", "p95 latency (ms)")

CHARTS = {
    "latency_per_case": "Latency per case (ms)",
    "tool_calls_per_case": "tool_calls per case",
    "success_rate_by_mode": "Success rate by mode (%)",
    "correctness_by_mode": "Correctness by mode and profile (%)",
}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _per_case_chart(plt, records: list[dict], field: str, title: str, ylabel: str, path: Path):
    cases = list(dict.fromkeys(r["case"] for r in records))
    series = list(dict.fromkeys(f"{r['profile']}/{r['mode']}" for r in records))
    values = {(f"{r['profile']}/{r['mode']}", r["case"]): r[field] for r in records}
    width = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(max(8, 0.45 * len(cases) * max(1, len(series)) ** 0.5), 4.5))
    for i, name in enumerate(series):
        xs = [x + i * width - 0.4 + width / 2 for x in range(len(cases))]
        ax.bar(xs, [values.get((name, c), 0) for c in cases], width, label=name)
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels(cases, rotation=60, ha="right", fontsize=7)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _rate_chart(plt, summary: dict[str, Any], field: str, title: str, path: Path) -> None:
    profiles = list(dict.fromkeys(s["profile"] for s in summary.values()))
    modes = list(dict.fromkeys(s["mode"] for s in summary.values()))
    width = 0.8 / max(1, len(profiles))
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(modes) * max(1, len(profiles))), 4))
    for i, profile in enumerate(profiles):
        xs = [x + i * width - 0.4 + width / 2 for x in range(len(modes))]
        ys = [summary.get(f"{profile}/{m}", {}).get(field, 0) for m in modes]
        bars = ax.bar(xs, ys, width, label=profile)
        ax.bar_label(bars, fmt="%.1f", fontsize=7)
    ax.set_xticks(range(len(modes)))
    ax.set_xticklabels(modes)
    ax.set_ylim(0, 105)
    ax.set_ylabel("%")
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _charts(records: list[dict], summary: dict[str, Any], outdir: Path) -> dict[str, Path]:
    plt = _pyplot()
    paths = {name: outdir / f"{name}.png" for name in CHARTS}
    _per_case_chart(
        plt, records, "latency_ms", CHARTS["latency_per_case"], "ms", paths["latency_per_case"]
    )
    _per_case_chart(
        plt,
        records,
        "tool_calls_count",
        CHARTS["tool_calls_per_case"],
        "tool_calls",
        paths["tool_calls_per_case"],
    )
    _rate_chart(
        plt, summary, "success_rate", CHARTS["success_rate_by_mode"], paths["success_rate_by_mode"]
    )
    _rate_chart(
        plt, summary, "correct_rate", CHARTS["correctness_by_mode"], paths["correctness_by_mode"]
    )
    return paths


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_STYLE = (
    "body{font-family:sans-serif;margin:2em;max-width:1200px}"
    "table{border-collapse:collapse;font-size:13px;margin:1em 0}"
    "th,td{border:1px solid #ccc;padding:3px 6px;text-align:left}"
    "th{background:#f0f0f0}img{max-width:100%;display:block;margin:1em 0}"
    ".bad{color:#b00}"
)


def _html(records, summary, meta, images: dict[str, Path]) -> str:
    summary_rows = [
        [
            key,
            s["cases"],
            s["success_rate"],
            s["correct_rate"],
            s["latency_ms_mean"],
            s["latency_ms_p50"],
            s["latency_ms_p95"],
            s["prompt_tokens_total"],
            s["completion_tokens_total"],
            s["retries_total"],
        ]
        for key, s in summary.items()
    ]
    case_rows = [
        [
            r["case"],
            r["profile"],
            r["mode"],
            r["status"],
            r["valid"],
            r["correct"],
            r["latency_ms"],
            r["tool_calls_count"],
            r["parse_format"],
            r["retries"],
            r["judgement"] or "",
        ]
        for r in records
    ]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>lokal bench report</title>',
        f"<style>{_STYLE}</style></head><body>",
        "<h1>lokal bench report</h1>",
        f"<p>{html.escape(json.dumps(meta, ensure_ascii=False))}</p>",
        "<h2>Summary per profile × mode</h2>",
        _table(
            [
                "profile/mode",
                "cases",
                "success %",
                "correct %",
                *LATENCY_HEADERS,
                "prompt tokens",
                "completion tokens",
                "retries",
            ],
            summary_rows,
        ),
    ]
    for name, path in images.items():
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        parts.append(f"<h2>{html.escape(CHARTS[name])}</h2>")
        parts.append(f'<img alt="{name}" src="data:image/png;base64,{data}">')
    parts += [
        "<h2>Cases</h2>",
        _table(
            [
                "case",
                "profile",
                "mode",
                "status",
                "valid",
                "correct",
                "latency ms",
                "tool_calls",
                "format",
                "retries",
                "why not correct",
            ],
            case_rows,
        ),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def write_report(
    outdir: str | Path,
    records: list[dict[str, Any]],
    summary: dict[str, Any],
    meta: dict[str, Any] | None = None,
) -> dict[str, Path]:
    """Write summary.json, cases.jsonl, the PNG charts and report.html; return their paths."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    meta = meta or {}
    paths = {"summary": outdir / "summary.json", "cases": outdir / "cases.jsonl"}
    paths["summary"].write_text(
        json.dumps({**meta, "summary": summary}, ensure_ascii=False, indent=2) + "\n",
        encoding="utf-8",
    )
    with paths["cases"].open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    images = _charts(records, summary, outdir)
    paths["report"] = outdir / "report.html"
    paths["report"].write_text(_html(records, summary, meta, images), encoding="utf-8")
    return {**paths, **images}
