"""Every ``lokal run`` is kept in ``$LOKAL_HOME/traces`` (``--trace FILE`` elsewhere,
``--no-trace`` none), and ``lokal traces list`` shows the recent ones."""

from __future__ import annotations

import json
import re

from viewer_support import QUESTION, record_scripted_run

from helpers import DATA, MOCK_YAML
from lokal.cli import main
from lokal.paths import traces_dir
from lokal.trace import read_trace
from lokal.viewer.store import list_traces, new_trace_path


def _run(tmp_path, *extra):
    config = tmp_path / "model.yaml"
    config.write_text(MOCK_YAML, encoding="utf-8")
    workspace = str(DATA / "workspace")
    argv = ["run", "Read the intro", "--model_config", str(config), "--workspace", workspace]
    return main([*argv, "--quiet", *extra])


def test_a_run_is_kept_in_the_traces_folder_by_default(tmp_path, capsys):
    assert _run(tmp_path) == 0
    (trace,) = traces_dir().iterdir()
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{6}\.jsonl", trace.name)
    events = read_trace(trace)
    assert events[0]["type"] == "run_start" and events[-1]["type"] == "final"
    capsys.readouterr()
    assert main(["traces", "list"]) == 0
    out = capsys.readouterr().out
    assert "Read the intro" in out and str(trace) in out and "final" in out


def test_trace_chooses_the_file_and_no_trace_keeps_none(tmp_path, capsys):
    chosen = tmp_path / "mine.jsonl"
    assert _run(tmp_path, "--trace", str(chosen)) == 0
    assert read_trace(chosen)[-1]["type"] == "final"
    # the chosen file is listed too: a link to it in the traces folder (issue 18)
    (link,) = traces_dir().iterdir()
    assert link.is_symlink() and link.resolve() == chosen.resolve()
    assert _run(tmp_path, "--no-trace") == 0
    assert list(traces_dir().iterdir()) == [link]  # --no-trace keeps nothing
    capsys.readouterr()
    assert _run(tmp_path, "--no-trace", "--trace", str(chosen)) == 2
    assert "--no-trace" in capsys.readouterr().err


def test_traces_list_shows_question_status_tokens_newest_first(tmp_path, capsys):
    folder = traces_dir()
    first = new_trace_path(now=1_800_000_000)
    record_scripted_run(first)
    unfinished = new_trace_path(now=1_800_000_100)
    unfinished.write_text(first.read_text(encoding="utf-8").splitlines(True)[0], "utf-8")
    runs = list_traces()
    assert [r["name"] for r in runs] == [unfinished.name, first.name]
    assert runs[1]["question"] == QUESTION and runs[1]["status"] == "final"
    assert runs[1]["tokens_in"] > 0 and runs[1]["tokens_out"] > 0 and runs[1]["decisions"] == 2
    assert runs[0]["status"] == "unfinished"
    assert main(["traces", "list", "--limit", "1", "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert listed["file"] == str(folder / unfinished.name)
    assert main(["traces", "list", "--limit", "0"]) == 2
    assert main(["traces"]) == 2  # a group needs its action
