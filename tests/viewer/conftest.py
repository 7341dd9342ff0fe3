"""Fixtures of the trace viewer tests: headless chromium (Debian's, through Playwright; never
skipped: without it the tests fail saying how to install it) and the recorded run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from viewer_support import CHROMIUM_HINT, SCRIPTED_RUN, chromium_path, record_scripted_run


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    # module, not session: Playwright's sync API keeps an event loop running in this thread
    # while it is open, which would break asyncio.run in the tests collected after these
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(CHROMIUM_HINT, pytrace=False)
    executable = chromium_path()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True, args=["--no-sandbox"]
        )
        yield browser
        browser.close()


@pytest.fixture
def page(chromium) -> Iterator[Any]:
    """A fresh page; the page's script errors fail the test."""
    context = chromium.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield page
    context.close()
    assert not errors, errors


@pytest.fixture(scope="session")
def scripted_trace(tmp_path_factory) -> Any:
    """The scripted run recorded now (its fixture copy is SCRIPTED_RUN)."""
    path = tmp_path_factory.mktemp("scripted") / "run.jsonl"
    record_scripted_run(path)
    if not SCRIPTED_RUN.is_file():  # the fixture, made once and kept in the repository
        SCRIPTED_RUN.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    return path
