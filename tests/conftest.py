"""Test-wide settings: user state goes to a temporary LOKAL_HOME, never ~/.local/share."""

import sys

import pytest


@pytest.fixture(autouse=True, scope="session")
def shared_model_cache(tmp_path_factory):
    """One folder for the ONNX graphs of MiniLM for the whole session (each test's home would
    build its own, 90 MB and a second or two each; commands run in subprocesses inherit it).
    Tests of the cache itself set LOKAL_MODEL_CACHE to a folder of their own."""
    folder = tmp_path_factory.mktemp("model-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LOKAL_MODEL_CACHE", str(folder))
        yield folder


@pytest.fixture(autouse=True)
def isolated_lokal_home(tmp_path_factory, monkeypatch):
    """Every test gets its own LOKAL_HOME (conversations, memory, document index), and starts
    with no profile's embedding settings in force (a command line run in the test process
    sets them for the process: lokal.rag.embeddings.configure)."""
    home = tmp_path_factory.mktemp("lokal-home")
    monkeypatch.setenv("LOKAL_HOME", str(home))
    yield home
    embeddings = sys.modules.get("lokal.rag.embeddings")
    if embeddings is not None:
        embeddings.configure(None)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Print the output parser's recovery rate over tests/data/parser_corpus.json."""
    counts = {"recover": [0, 0], "error": [0, 0]}  # kind -> [recovered, total]
    for outcome in ("passed", "failed"):
        for report in terminalreporter.stats.get(outcome, []):
            properties = dict(getattr(report, "user_properties", ()) or ())
            kind = properties.get("parser_corpus")
            if getattr(report, "when", "call") != "call" or kind not in counts:
                continue
            counts[kind][1] += 1
            counts[kind][0] += bool(properties.get("parser_recovered"))
    (recovered, expected), (raised, errors) = counts["recover"], counts["error"]
    if expected + errors == 0:
        return
    rate = 100.0 * recovered / expected if expected else 100.0
    terminalreporter.write_line(
        f"parser corpus: {recovered}/{expected} recovered ({rate:.1f}%), "
        f"{raised}/{errors} expected errors raised ({expected + errors} entries)"
    )
