"""The floors of the house: every module of ``src/lokal`` is read with ``ast`` (nothing is
imported) and its imports of lokal modules become a graph, which must have no circles and
no import that runs up the floors declared in ``LAYERS``.

Three kinds of edges:

- module level: an ``import`` run when the module is imported (top level, class bodies,
  ``try``/``if`` blocks);
- function level: an ``import`` inside a function, run on first call;
- by name: a string constant naming a lokal module (``"lokal.rag.cli"``,
  ``"lokal.llm.backends.llamacpp:LlamaCppBackend"``), loaded with ``import_module`` or
  ``__import__`` (the CLI's ``COMMANDS``, the backend registry, ``lokal``'s lazy names).

Imports under ``if TYPE_CHECKING:`` run never and are not edges.

Circles are refused at module level and also counting function-level imports (a function
import is no licence to import in a circle). Edges by name are registries, where the
registered module imports the registry back by design; they are checked against the floors
only. Every edge, of any kind, must go down or sideways: ``ALLOWED_UPWARD`` lists the
exceptions known, each with why it is still there.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from helpers import REPO

SRC = REPO / "src"

# module (or package prefix) -> floor; the longest declared prefix wins; the root package
# ``lokal`` is declared for itself only, so a new module must be given its floor here.
LAYERS: dict[str, int] = {
    # 0, the ground floor: errors, where files live, how SQLite is opened, where the bundled
    # models are, progress callbacks. Imports nothing of lokal but each other.
    "lokal.errors": 0,
    "lokal.paths": 0,
    "lokal.sqlite": 0,
    "lokal.models": 0,
    "lokal.progress": 0,
    # English glosses of Chinese text (CC-CEDICT): read by the decision and the file search
    "lokal.glosses": 0,
    # 1, contracts and configuration: profiles, messages, JSON schema, tools, run events,
    # traces
    "lokal.config": 1,
    "lokal.events": 1,
    "lokal.messages": 1,
    "lokal.records": 1,
    "lokal.tools": 1,
    "lokal.trace": 1,
    # the trace viewer: the page, the stored runs, the OTLP export (they read traces and
    # events); its /traces routes stand on FastAPI and are included by lokal serve
    "lokal.viewer": 1,
    "lokal.viewer.routes": 5,
    # 2, documents (load, chunk, embed, store, retrieve) and skills
    "lokal.rag": 2,
    "lokal.skills": 2,
    # 3, what stands on retrieval: the language model (backends, prompts, parsing,
    # decisions; it ranks tools with rag's embeddings and BM25) and memory (conversations,
    # and notes selected with the same)
    "lokal.llm": 3,
    "lokal.memory": 3,
    "lokal.mcp": 3,  # MCP: stands on tools and skills; never imports the agent loop
    # 4, the agent loop
    "lokal.runtime": 4,
    # 5, the faces: the command line (and each package's subcommands), benchmarks, the live
    # status line, and the package root with its lazy public names
    "lokal.cli": 5,  # one module per command group, and their shared helpers
    "lokal.bench": 5,
    "lokal.live": 5,
    "lokal.serve": 5,
    "lokal": 5,
}

# (importer, imported) -> why this upward import is still there
ALLOWED_UPWARD: dict[tuple[str, str], str] = {}

# circles allowed, as sorted tuples of their modules; none
ALLOWED_CYCLES: set[tuple[str, ...]] = set()


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    kind: str  # "module", "function" or "name"
    line: int

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} ({self.kind} level, line {self.line})"


def modules() -> dict[str, tuple[Path, bool]]:
    """Every module of lokal: name -> (file, is a package)."""
    found = {}
    for path in sorted((SRC / "lokal").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if package else parts)] = (path, package)
    return found


def _owner(name: str, known: dict) -> str | None:
    """The lokal module that ``name`` (a module, or a name inside one) lives in."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _is_type_checking(test: ast.expr) -> bool:
    return "TYPE_CHECKING" in ast.unparse(test)


def imports(name: str, path: Path, package: bool, known: dict) -> list[Edge]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    edges: list[Edge] = []

    def add(target: str, kind: str, line: int) -> None:
        owner = _owner(target, known) if target.startswith("lokal") else None
        if owner and owner != name:
            edges.append(Edge(name, owner, kind, line))

    def visit(node: ast.AST, kind: str) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child, kind)
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            kind = "function"
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, kind, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if package else name.split(".")[:-1]
                here = here[: len(here) - (node.level - 1)]
                base = ".".join([*here, base] if base else here)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                add(full if full in known else base, kind, node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value.partition(":")[0]
            if text in known and text.startswith("lokal."):
                add(text, "name", node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child, kind)

    visit(tree, "module")
    return edges


def graph() -> list[Edge]:
    known = modules()
    edges: set[Edge] = set()
    for name, (path, package) in known.items():
        edges.update(imports(name, path, package, known))
    return sorted(edges, key=lambda e: (e.source, e.target, e.kind, e.line))


def layer(module: str) -> int | None:
    if module in LAYERS:
        return LAYERS[module]
    prefixes = [p for p in LAYERS if p != "lokal" and module.startswith(p + ".")]
    return LAYERS[max(prefixes, key=len)] if prefixes else None


def cycles(edges: list[Edge], kinds: set[str]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    nexts: dict[str, set[str]] = {}
    for e in edges:
        if e.kind in kinds:
            nexts.setdefault(e.source, set()).add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(nexts.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(nexts):
        if v not in index:
            connect(v)
    return found


def _describe(component: list[str], edges: list[Edge], kinds: set[str]) -> str:
    inside = [str(e) for e in edges if e.kind in kinds and {e.source, e.target} <= {*component}]
    return " / ".join(component) + ":\n    " + "\n    ".join(inside)


# -- the tests -------------------------------------------------------------------------------


def test_the_graph_is_read():
    edges = graph()
    kinds = {e.kind for e in edges}
    assert kinds == {"module", "function", "name"}
    assert any(e.source == "lokal.memory.db" and e.target == "lokal.sqlite" for e in edges)
    assert any(e.source == "lokal.cli" and e.target == "lokal.cli.rag" for e in edges)


def test_every_module_has_a_floor():
    missing = [m for m in modules() if layer(m) is None]
    assert not missing, f"declare the floor of these modules in LAYERS: {missing}"


def test_no_circle_at_module_level():
    edges = graph()
    found = [c for c in cycles(edges, {"module"}) if tuple(c) not in ALLOWED_CYCLES]
    assert not found, "\n".join(_describe(c, edges, {"module"}) for c in found)


def test_no_circle_even_through_imports_inside_functions():
    edges = graph()
    kinds = {"module", "function"}
    found = [c for c in cycles(edges, kinds) if tuple(c) not in ALLOWED_CYCLES]
    assert not found, "\n".join(_describe(c, edges, kinds) for c in found)


def test_no_import_runs_up_the_floors():
    upward = [
        str(e)
        for e in graph()
        if layer(e.target) > layer(e.source) and (e.source, e.target) not in ALLOWED_UPWARD
    ]
    assert not upward, "imports that run up the floors:\n" + "\n".join(upward)


def test_the_allow_lists_hold_only_what_is_still_there():
    pairs = {(e.source, e.target) for e in graph() if layer(e.target) > layer(e.source)}
    stale = set(ALLOWED_UPWARD) - pairs
    assert not stale, f"no longer imported upward, remove from ALLOWED_UPWARD: {stale}"
    circles = {tuple(c) for c in cycles(graph(), {"module", "function"})}
    gone = ALLOWED_CYCLES - circles
    assert not gone, f"no longer a circle, remove from ALLOWED_CYCLES: {gone}"


def test_the_ground_floor_imports_only_the_ground_floor():
    """Storage stands on nothing: paths, the SQLite opener and the model finder can be
    imported by any module without pulling in another floor."""
    ground = {m for m in modules() if layer(m) == 0}
    above = [str(e) for e in graph() if e.source in ground and e.target not in ground]
    assert not above, above
