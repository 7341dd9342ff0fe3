"""Test-wide settings: user state goes to a temporary LOKAL_HOME, never ~/.local/share."""

import pytest


@pytest.fixture(autouse=True)
def isolated_lokal_home(tmp_path_factory, monkeypatch):
    """Every test gets its own LOKAL_HOME (conversations, memory, document index)."""
    home = tmp_path_factory.mktemp("lokal-home")
    monkeypatch.setenv("LOKAL_HOME", str(home))
    return home


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
