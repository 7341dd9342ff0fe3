"""``lokal trace view``: the page of a recorded run, opened in headless chromium and checked
through its DOM (steps, lanes, replay, error filter, search, keys, phone width)."""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest
from viewer_support import recorded_run

from helpers import REPO
from lokal.cli import main
from lokal.trace import read_trace
from lokal.viewer.page import build_page

# starts MCP servers, a browser or an HTTP server: in `make test`, not `make test-fast`
pytestmark = pytest.mark.slow

SCREENSHOT = REPO / "docs" / "img" / "trace-viewer.png"


def _expected(trace):
    events = read_trace(trace)
    decisions = [e for e in events if e["type"] == "decision"]
    tools = [e for e in events if e["type"] == "tool_end"]
    return events, decisions, tools


def _open(page, tmp_path, trace=None):
    trace = trace or recorded_run()
    out = tmp_path / "run.html"
    assert main(["trace", "view", str(trace), "-o", str(out)]) == 0
    page.goto(out.as_uri())
    page.wait_for_selector("body[data-ready=true]")
    return out


def test_the_page_is_one_file_that_needs_no_network(tmp_path, capsys):
    trace = tmp_path / "run.jsonl"
    shutil.copy(recorded_run(), trace)
    assert main(["trace", "view", str(trace)]) == 0
    out = trace.with_suffix(".html")
    assert capsys.readouterr().out.strip() == str(out)
    html = out.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert not re.search(r"<link[^>]*href=\"(?!data:)", html) and "@import" not in html
    assert html.count("<script") == 2  # the data and the viewer, both inline


def test_text_of_the_run_cannot_end_the_script(tmp_path):
    events = read_trace(recorded_run())
    evil = "</script><script>alert(1)</script><!-- \u2028"
    events[0] = {**events[0], "question": evil}
    html = build_page(events)
    data = html.split('id="lokal-trace">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data and ">" not in data
    assert json.loads(data)["events"][0]["question"] == evil


def test_the_page_shows_every_step_with_lanes_and_links(page, tmp_path):
    events, decisions, tools = _expected(recorded_run())
    _open(page, tmp_path)
    kinds = page.eval_on_selector_all("li.step", "els => els.map(e => e.dataset.kind)")
    assert kinds.count("decision") == len(decisions)
    assert kinds.count("tool") == len(tools)
    assert kinds[0] == "start" and kinds[-1] == "final"
    assert page.locator("#question").text_content() == events[0]["question"]
    header = page.locator("#run-meta").text_content()
    final = events[-1]
    assert final["stop_reason"] in header and str(final["usage"]["prompt_tokens"]) in header
    # a turn of parallel calls: one lane each, each linked to the decision that asked
    turns = {}
    for tool in tools:
        turns.setdefault(tool["iteration"], []).append(tool)
    parallel = max(turns.values(), key=len)
    assert len(parallel) >= 2, "the recorded run must have a parallel tool turn"
    rows = page.locator("li.step.tool")
    lanes = {}
    for i in range(rows.count()):
        row = rows.nth(i)
        lanes[row.get_attribute("data-call-id")] = (
            row.get_attribute("data-lane"),
            row.get_attribute("data-parent"),
        )
    for tool in parallel:
        lane, parent = lanes[tool["call_id"]]
        assert lane == str(tool["index"])
        asker = page.locator(f"#{parent}")
        assert asker.get_attribute("data-kind") == "decision"
        assert asker.locator(f'li[data-call="{tool["call_id"]}"] a.to-tool').count() == 1
    assert len({lanes[t["call_id"]][1] for t in parallel}) == 1  # one decision asked for all
    # a failed tool is marked, with its error quoted
    failed = [t for t in tools if t["status"] != "success"]
    assert failed, "the recorded run must have a tool error"
    row = page.locator(f'li.step.tool[data-call-id="{failed[0]["call_id"]}"]')
    assert row.get_attribute("data-error") == "true"
    row.locator("details.more > summary").click()
    assert failed[0]["error"] in row.locator("blockquote.error-text").text_content()
    # a retried decision: its retries counted, the error of the failed attempt quoted
    retried = [i for i, d in enumerate(decisions) if len(d["attempts"]) > 1]
    assert retried, "the recorded run must have a retried decision"
    decision = decisions[retried[0]]
    row = page.locator("li.step.decision").nth(retried[0])
    assert row.get_attribute("data-retries") == str(len(decision["attempts"]) - 1)
    assert "retr" in row.locator(".label").text_content()
    row.locator("details.more > summary").first.click()
    quoted = row.locator(".attempt.failed blockquote").first.text_content()
    assert quoted == decision["attempts"][0]["error"]["message"]
    prompt = row.locator("details.prompt-fold")
    assert prompt.get_attribute("open") is None  # the prompt is collapsed
    assert f"({len(decision['prompt'])} messages)" in prompt.locator("summary").text_content()
    assert page.locator("li.step.final blockquote.answer").text_content() == final["answer"]


def _visible(page):
    return page.eval_on_selector_all(
        "li.step", "els => els.filter(e => e.offsetParent !== null).map(e => e.dataset.step)"
    )


def test_replay_steps_back_and_forth_plays_and_scrubs(page, tmp_path):
    _open(page, tmp_path)
    total = page.locator("li.step").count()
    assert page.locator("#step-counter").text_content() == f"step {total} of {total}"
    assert len(_visible(page)) == total
    page.click("#btn-prev")
    assert page.locator("#step-counter").text_content() == f"step {total - 1} of {total}"
    assert len(_visible(page)) == total - 1
    assert page.locator("li.step.current").get_attribute("data-step") == str(total - 1)
    page.click("#btn-first")
    assert _visible(page) == ["1"]
    assert page.locator("#btn-prev").is_disabled()
    page.click("#btn-next")
    assert _visible(page) == ["1", "2"]
    page.fill("#scrubber", "3")  # the scrubber: step 4
    assert page.locator("#step-counter").text_content() == f"step 4 of {total}"
    page.click("#btn-play")
    assert page.locator("#btn-play").get_attribute("aria-pressed") == "true"
    page.wait_for_function(f"document.querySelectorAll('li.step:not(.future)').length === {total}")
    page.wait_for_selector("#btn-play[aria-pressed=false]")
    assert page.locator("#btn-next").is_disabled()


def test_the_keyboard_alone_drives_the_page(page, tmp_path):
    _open(page, tmp_path)
    total = page.locator("li.step").count()
    page.keyboard.press("Home")
    assert _visible(page) == ["1"]
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert page.locator("#step-counter").text_content() == f"step 3 of {total}"
    page.keyboard.press("ArrowLeft")
    assert page.locator("#step-counter").text_content() == f"step 2 of {total}"
    page.keyboard.press("End")
    # every control is reached with Tab, in order
    focused = []
    page.locator("body").focus()
    for _ in range(12):
        page.keyboard.press("Tab")
        focused.append(
            page.evaluate("document.activeElement.id || document.activeElement.className")
        )
    for control in ("btn-prev", "btn-play", "scrubber", "errors-only", "search"):
        assert control in focused, focused
    # a step opens with Enter
    step = page.locator("li.step.decision").first
    step.focus()
    page.keyboard.press("Enter")
    assert step.locator("details.more").get_attribute("open") is not None
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "search"


def test_errors_only_and_search_filter_the_steps(page, tmp_path):
    _, decisions, tools = _expected(recorded_run())
    _open(page, tmp_path)
    total = page.locator("li.step").count()
    page.check("#errors-only")
    shown = page.eval_on_selector_all(
        "li.step:not(.filtered-out)", "els => els.map(e => [e.dataset.kind, e.dataset.error])"
    )
    assert shown and all(error == "true" for _, error in shown)
    failed_tools = [t for t in tools if t["status"] != "success"]
    retried = [d for d in decisions if any(a.get("error") for a in d["attempts"])]
    assert [k for k, _ in shown].count("tool") == len(failed_tools)
    assert [k for k, _ in shown].count("decision") == len(retried)
    assert page.locator("#match-count").text_content() == f"{len(shown)} of {total} match"
    # stepping moves through the errors only
    page.keyboard.press("Home")
    first = page.locator("li.step.current")
    assert first.get_attribute("data-error") == "true"
    page.uncheck("#errors-only")
    name = failed_tools[0]["name"]
    page.fill("#search", name.upper())
    matched = page.eval_on_selector_all(
        "li.step:not(.filtered-out)", "els => els.map(e => e.textContent)"
    )
    assert matched and len(matched) < total
    page.fill("#search", "no step says this 9f8e7d")
    assert page.locator("#empty").is_visible()
    page.press("#search", "Escape")
    page.click("#btn-last")
    assert len(_visible(page)) == total


def test_phone_width_and_screenshots(page, tmp_path):
    _open(page, tmp_path)
    page.set_viewport_size({"width": 400, "height": 860})
    assert page.evaluate("document.documentElement.scrollWidth") <= 400
    controls = page.locator("#controls button, #scrubber, #errors-only, #search")
    for i in range(controls.count()):
        box = controls.nth(i).bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 400
    page.screenshot(path=str(tmp_path / "trace-viewer-phone.png"), full_page=True)
    page.set_viewport_size({"width": 1000, "height": 760})
    page.screenshot(path=str(tmp_path / "trace-viewer.png"), full_page=True)
    assert (tmp_path / "trace-viewer.png").stat().st_size > 10_000
    if os.environ.get("LOKAL_UPDATE_SCREENSHOT") == "1":  # the README's picture
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOT), clip={"x": 0, "y": 0, "width": 1000, "height": 760})
        assert SCREENSHOT.stat().st_size < 400_000


def test_the_header_says_where_the_answer_came_from(page, tmp_path):
    events = read_trace(recorded_run())
    events[-1] = {**events[-1], "source": "extracted"}
    trace = tmp_path / "extracted.jsonl"
    trace.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    _open(page, tmp_path, trace)
    field = page.locator('#run-meta [data-field="answer"]').text_content()
    assert field == "answerextracted"
