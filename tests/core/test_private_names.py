"""No private name crosses a module (issue 22): code in ``src/lokal`` and ``benchmarks``
imports only public names (no leading underscore) from lokal's modules. Tests may reach in."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import REPO


def _private_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lokal"):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(
                        f"{path.relative_to(REPO)}:{node.lineno} {node.module}.{alias.name}"
                    )
    return found


def test_no_private_name_is_imported_across_modules():
    files = [*(REPO / "src" / "lokal").rglob("*.py"), *(REPO / "benchmarks").glob("*.py")]
    assert len(files) > 100  # the sources were found
    crossing = [hit for path in files for hit in _private_imports(path)]
    assert crossing == []


def test_the_check_sees_a_private_import(tmp_path):
    sample = REPO / "outputs" / "private_import_sample.py"
    sample.parent.mkdir(exist_ok=True)
    sample.write_text("from lokal.llm.decide import _Unusable\n", encoding="utf-8")
    try:
        assert _private_imports(sample) == [
            "outputs/private_import_sample.py:1 lokal.llm.decide._Unusable"
        ]
    finally:
        sample.unlink()


def test_nothing_outside_the_command_line_imports_it():
    """The command line is a package (``lokal.cli``, issue 22) that nothing else imports."""
    importers = []
    for path in (REPO / "src" / "lokal").rglob("*.py"):
        if (REPO / "src" / "lokal" / "cli") in path.parents:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            if any(n == "lokal.cli" or n.startswith("lokal.cli.") for n in names):
                importers.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert importers == []
