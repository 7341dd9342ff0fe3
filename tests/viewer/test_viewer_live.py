"""The live view: ``lokal serve`` lists the stored runs at ``/traces`` and follows a run still
being written over server-sent events; the page appends each step as it arrives."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from viewer_support import QUESTION, LiveServer, record_scripted_run

from helpers import MODEL_CONFIG
from lokal.config import load_profile
from lokal.llm.backends.scripted import ScriptedBackend
from lokal.serve.app import create_app

# starts MCP servers, a browser or an HTTP server: in `make test`, not `make test-fast`
pytestmark = pytest.mark.slow


@pytest.fixture
def served(tmp_path):
    folder = tmp_path / "traces"
    folder.mkdir()
    profile = load_profile(MODEL_CONFIG, "mock")
    app = create_app(
        profile, backend=ScriptedBackend([]), log=lambda entry: None, traces_dir=folder
    )
    server = LiveServer(app)
    yield server, folder
    server.stop()


def test_a_run_being_written_is_followed_step_by_step(served, page):
    server, folder = served
    trace = folder / "20261203-151200-a1b2c3.jsonl"
    run = threading.Thread(target=record_scripted_run, args=(trace,), kwargs={"pause_s": 0.35})
    run.start()
    try:
        deadline = time.monotonic() + 10
        while not trace.is_file() or not trace.stat().st_size:
            assert time.monotonic() < deadline, "the run wrote no trace"
            time.sleep(0.02)
        page.goto(f"{server.base}/traces")
        link = page.locator(f'#runs a[href="/traces/{trace.name}"]')
        assert link.text_content() == QUESTION
        link.click()
        page.wait_for_selector("li.step")
        seen = [page.locator("li.step").count()]
        assert page.locator("li.step.final").count() == 0  # the run is still going
        while page.locator("li.step.final").count() == 0:
            page.wait_for_function(
                f"document.querySelectorAll('li.step').length > {seen[-1]}", timeout=10_000
            )
            seen.append(page.locator("li.step").count())
        page.wait_for_selector("body[data-live=ended]")
    finally:
        run.join(timeout=30)
    assert len(seen) >= 4, seen  # the steps came one after another, not all at once
    assert page.locator("#live-status").text_content() == "run finished"
    kinds = page.eval_on_selector_all("li.step", "els => els.map(e => e.dataset.kind)")
    assert kinds == ["start", "decision", "tool", "tool", "tool", "decision", "final"]
    assert page.locator("li.step.pending").count() == 0
    assert page.locator("li.step.current").get_attribute("data-kind") == "final"


def test_the_event_stream_resumes_after_last_event_id_and_ends(served):
    server, folder = served
    trace = folder / "20261203-151300-d4e5f6.jsonl"
    record_scripted_run(trace)
    lines = trace.read_text(encoding="utf-8").splitlines()
    url = f"{server.base}/traces/{trace.name}/events"
    with httpx.stream("GET", url, headers={"Last-Event-ID": "9"}, timeout=10) as response:
        assert response.status_code == 200
        body = "".join(response.iter_text())
    ids = [int(line[3:]) for line in body.splitlines() if line.startswith("id:")]
    assert ids == list(range(10, len(lines) + 1))
    assert "event: end" in body
    for bad in ("../secret.jsonl", "nope.jsonl", "x.txt"):
        assert httpx.get(f"{server.base}/traces/{bad}", timeout=5).status_code == 404


def test_traces_ask_for_the_key_when_the_server_has_one(tmp_path):
    profile = load_profile(MODEL_CONFIG, "mock")
    app = create_app(
        profile, backend=ScriptedBackend([]), log=lambda e: None, traces_dir=tmp_path, api_key="k1"
    )
    server = LiveServer(app)
    try:
        assert httpx.get(f"{server.base}/traces", timeout=5).status_code == 401
        with httpx.Client(base_url=server.base, timeout=5) as client:
            response = client.get("/traces?key=k1", follow_redirects=True)
            assert response.status_code == 200 and "Runs" in response.text
            assert "key=" not in str(response.url)  # the cookie carries it from here
            headers = {"Authorization": "Bearer k1"}
            assert httpx.get(f"{server.base}/traces", headers=headers).status_code == 200
    finally:
        server.stop()
