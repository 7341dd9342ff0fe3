"""Workspace confinement and the built-in tools."""

from __future__ import annotations

import csv
import json
import math
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import DATA
from lokal.errors import ConfigError
from lokal.messages import read_tool_result
from lokal.skills import Workspace, WorkspaceError, builtin_tools, register_builtin_tools
from lokal.skills.builtin import calculate, parse_filter
from lokal.tools import ToolRegistry

SAMPLE = DATA / "workspace"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    shutil.copytree(SAMPLE, root)
    return root


@pytest.fixture
def tools(ws: Path) -> dict[str, Any]:
    return {t.name: t for t in builtin_tools(ws)}


def _sales() -> list[dict[str, Any]]:
    with (SAMPLE / "data" / "sales.csv").open() as handle:
        return [
            {**row, "units": int(row["units"]), "price": float(row["price"])}
            for row in csv.DictReader(handle)
        ]


# --- Workspace -------------------------------------------------------------------------------


def test_workspace_resolves_inside_paths(ws: Path) -> None:
    space = Workspace(ws)
    assert space.resolve("docs/agent_intro.txt") == (ws / "docs/agent_intro.txt").resolve()
    assert space.resolve(str(ws / "notes.txt")) == (ws / "notes.txt").resolve()
    assert space.resolve("docs/../notes.txt") == (ws / "notes.txt").resolve()
    assert space.resolve(".") == ws.resolve()
    assert space.resolve("new.txt", must_exist=False) == ws.resolve() / "new.txt"
    assert space.relative(ws / "docs" / "agent_guide.md") == "docs/agent_guide.md"


def test_workspace_rejects_escapes(ws: Path, tmp_path: Path) -> None:
    space = Workspace(ws)
    with pytest.raises(WorkspaceError) as info:
        space.resolve("../x", must_exist=False)
    assert str(info.value) == f"path '../x' is outside the workspace {ws.resolve()}"
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        space.resolve("/etc/passwd")
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    (ws / "link.txt").symlink_to(outside)
    with pytest.raises(WorkspaceError, match=r"'link\.txt' is outside the workspace"):
        space.resolve("link.txt")
    (ws / "dirlink").symlink_to(tmp_path)
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        space.resolve("dirlink/secret.txt")
    with pytest.raises(WorkspaceError, match="NUL"):
        space.resolve("a\x00b")
    assert not space.contains("../ws2")


def test_workspace_missing_and_wrong_kind(ws: Path) -> None:
    space = Workspace(ws)
    with pytest.raises(WorkspaceError, match=r"no such file or directory: 'docs/none\.txt'"):
        space.resolve("docs/none.txt")
    with pytest.raises(WorkspaceError, match="is a directory"):
        space.resolve("docs", kind="file")
    with pytest.raises(ConfigError, match="not an existing directory"):
        Workspace(ws / "nope")


# --- file_reader -----------------------------------------------------------------------------


def test_file_reader_reads_and_truncates(tools: dict[str, Any], ws: Path) -> None:
    full = (ws / "docs/agent_intro.txt").read_text(encoding="utf-8")
    out = tools["file_reader"](path="docs/agent_intro.txt")
    assert out["path"] == "docs/agent_intro.txt"
    assert out["content"] == full and out["truncated"] is False
    assert out["chars"] == len(full) == out["total_chars"]
    short = tools["file_reader"](path="docs/agent_intro.txt", max_chars=10)
    assert short["content"] == full[:10] and short["truncated"] is True and short["chars"] == 10


def test_file_reader_refuses_binary_escapes_and_missing(tools: dict[str, Any], ws: Path) -> None:
    (ws / "blob.bin").write_bytes(b"\x89PNG\x00\x00data")
    with pytest.raises(ValueError, match="binary file"):
        tools["file_reader"](path="blob.bin")
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        tools["file_reader"](path="../../etc/passwd")
    with pytest.raises(WorkspaceError, match="no such file"):
        tools["file_reader"](path="missing.txt")
    with pytest.raises(ValueError, match="max_chars"):
        tools["file_reader"](path="notes.txt", max_chars=0)


def test_file_reader_replaces_bad_utf8(tools: dict[str, Any], ws: Path) -> None:
    (ws / "latin.txt").write_bytes("café".encode("latin-1"))
    assert tools["file_reader"](path="latin.txt")["content"] == "caf\ufffd"


# --- local_file_search -----------------------------------------------------------------------


def test_search_finds_agent_files(tools: dict[str, Any]) -> None:
    out = tools["local_file_search"](query="Agent")
    paths = [r["path"] for r in out["results"]]
    assert paths == ["docs/agent_guide.md", "docs/agent_intro.txt"]
    assert out["files_matched"] == 2 and out["truncated"] is False
    intro = out["results"][1]
    assert intro["name_match"] is True
    assert intro["line"] == 1 and "Agent" in intro["snippet"]
    scoped = tools["local_file_search"](query="widget", root_dir="data")
    assert [r["path"] for r in scoped["results"]] == ["data/sales.csv"]
    hit = scoped["results"][0]
    assert hit["name_match"] is False and hit["line"] == 2 and hit["snippet"].startswith("East")
    assert hit["line_matches"] == 7


def test_search_skips_hidden_binary_and_big_files(tools: dict[str, Any], ws: Path) -> None:
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("needle")
    (ws / ".env").write_text("needle")
    (ws / "bin.dat").write_bytes(b"needle\x00\x01")
    (ws / "big.txt").write_text("needle\n" + "x" * (2 * 1024 * 1024 + 10))
    (ws / "ok.txt").write_text("first\nthe NEEDLE here\n")
    out = tools["local_file_search"](query="needle")
    assert [r["path"] for r in out["results"]] == ["ok.txt"]
    assert out["results"][0]["line"] == 2


def test_search_limits_and_confinement(tools: dict[str, Any], ws: Path) -> None:
    for i in range(7):
        (ws / f"hit{i}.txt").write_text("zebra")
    out = tools["local_file_search"](query="zebra", max_results=3)
    assert len(out["results"]) == 3 and out["files_matched"] == 7 and out["truncated"] is True
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        tools["local_file_search"](query="x", root_dir="..")
    with pytest.raises(ValueError, match="query must not be empty"):
        tools["local_file_search"](query="  ")


def test_a_chinese_query_over_english_files_is_looked_for_by_its_senses(
    tools: dict[str, Any], ws: Path
) -> None:
    # the development task z01_search: "在工作区里找出提到团队出游的文件" searched the English
    # workspace for 团队出游 and found nothing; the English senses of its words find the file
    (ws / "trip.txt").write_text("We went on a tour of the city.\n")
    out = tools["local_file_search"](query="团队出游")
    # notes.txt holds senses of both words (team, outing), trip.txt of one (tour)
    assert [r["path"] for r in out["results"]] == ["notes.txt"]
    assert "outing" in out["results"][0]["snippet"]
    assert out["searched_for"] == "team, tour, outing"
    one_word = tools["local_file_search"](query="出游")
    assert [r["path"] for r in one_word["results"]] == ["notes.txt", "trip.txt"]
    # found as written: no senses are looked for
    (ws / "zh.txt").write_text("团队出游定在周五。\n")
    written = tools["local_file_search"](query="团队出游")
    assert [r["path"] for r in written["results"]] == ["zh.txt"]
    assert "searched_for" not in written
    # an English query that finds nothing finds nothing
    none = tools["local_file_search"](query="walrus")
    assert none["results"] == [] and "searched_for" not in none


def test_a_search_for_several_senses_reads_each_file_once(
    tools: dict[str, Any], ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the sense search looks for up to a dozen English words at once: each file is read
    # once for all of them (it was read once per word)
    import lokal.skills.builtin as builtin

    reads: dict[str, int] = defaultdict(int)
    search_file = builtin._search_file

    def counted(handle: Any, name: str, needles: list[str]) -> dict[str, Any]:
        reads[name] += 1
        return search_file(handle, name, needles)

    monkeypatch.setattr(builtin, "_search_file", counted)
    out = tools["local_file_search"](query="团队出游")
    assert len(out["searched_for"].split(", ")) == 3
    assert reads and set(reads.values()) == {2}  # as written, then every sense together
    # each needle keeps its own first line and count
    with (ws / "notes.txt").open("rb") as handle:
        found = search_file(handle, "notes.txt", ["team", "outing", "walrus"])
    assert list(found) == ["team", "outing"]
    assert "outing" in found["outing"]["snippet"].casefold()
    assert all(hit["line_matches"] >= 1 and not hit["name_match"] for hit in found.values())


# --- calculator ------------------------------------------------------------------------------


def test_calculator_values(tools: dict[str, Any]) -> None:
    calc = tools["calculator"]
    assert calc(expression="3.14 * 5") == {"expression": "3.14 * 5", "result": 15.7}
    assert calc(expression="3.14 * 5 - 2.5")["result"] == 13.2
    assert calc(expression="212312123 * 13")["result"] == 2760057599
    assert calc(expression="sqrt(16) + 2**10")["result"] == 1028.0
    assert calc(expression="2^10")["result"] == 1024
    assert calc(expression="sin(pi / 2) + log(e) + log(8, 2)")["result"] == 5.0
    assert calc(expression="6 × 7 ÷ 2")["result"] == 21.0
    assert calc(expression="factorial(5) // 7 % 4")["result"] == 17 % 4


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1 / 0", "division by zero"),
        ("2 +", "invalid syntax"),
        ("9 ** 9 ** 9", "too large"),
        ("factorial(100000)", "too large"),
        ("(factorial(1000) ** 10000) ** 10000", "too large"),
        ("__import__('os').system('id')", "cannot evaluate"),
        ("(1).__class__", "cannot evaluate"),
        ("x + 1", "cannot evaluate"),
        ("'a' * 3", "does not evaluate to a number"),
        ("1" * 600, "longer than"),
        ("", "empty"),
        ("10.0 ** 400", "too large"),
    ],
)
def test_calculator_errors(expression: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        calculate(expression)


@settings(max_examples=60, deadline=None)
@given(
    a=st.integers(-(10**6), 10**6),
    b=st.integers(-(10**6), 10**6),
    op=st.sampled_from(["+", "-", "*", "//", "%"]),
)
def test_calculator_matches_python_integer_arithmetic(a: int, b: int, op: str) -> None:
    if op in {"//", "%"} and b == 0:
        with pytest.raises(ValueError, match="division by zero"):
            calculate(f"{a} {op} ({b})")
        return
    expected = {
        "+": a + b,
        "-": a - b,
        "*": a * b,
        "//": a // b if b else 0,
        "%": a % b if b else 0,
    }
    assert calculate(f"{a} {op} ({b})") == expected[op]


# --- table_analyzer --------------------------------------------------------------------------


def test_table_summary(tools: dict[str, Any]) -> None:
    out = tools["table_analyzer"](path="data/sales.csv")
    assert out["rows"] == 20 and out["columns"] == ["region", "product", "units", "price"]
    assert out["overview"] == "a table of 20 rows and 4 columns: region, product, units, price"
    assert out["dtypes"]["units"] == "int64"
    stats = {row["column"]: row for row in out["describe"]}
    units = [r["units"] for r in _sales()]
    assert stats["units"]["count"] == 20
    assert stats["units"]["mean"] == pytest.approx(sum(units) / 20)
    assert stats["units"]["max"] == max(units)
    assert len(out["head"]) == 5 and out["head"][0]["region"] == "East"
    json.dumps(out, allow_nan=False)


def test_table_filter(tools: dict[str, Any]) -> None:
    rows = _sales()
    out = tools["table_analyzer"](path="data/sales.csv", operation="filter", filter="units > 10")
    assert out["matched_rows"] == sum(r["units"] > 10 for r in rows)
    assert all(r["units"] > 10 for r in out["rows"])
    east = tools["table_analyzer"](
        path="data/sales.csv", operation="filter", filter='region == "East"'
    )
    assert east["matched_rows"] == sum(r["region"] == "East" for r in rows)
    gad = tools["table_analyzer"](
        path="data/sales.csv", operation="filter", filter="product contains gad"
    )
    assert gad["matched_rows"] == sum(r["product"] == "Gadget" for r in rows)


def test_table_groupby_and_topk(tools: dict[str, Any]) -> None:
    rows = _sales()
    totals: dict[str, int] = defaultdict(int)
    for r in rows:
        totals[r["region"]] += r["units"]
    out = tools["table_analyzer"](
        path="data/sales.csv", operation="groupby", group_by="region", column="units", agg="sum"
    )
    assert {g["region"]: g["sum_units"] for g in out["groups"]} == totals
    # a column named as the question says it: "the mean prices for every product"
    plural = tools["table_analyzer"](
        path="data/sales.csv", operation="groupby", group_by="Regions", column="unit", agg="sum"
    )
    assert {g["region"]: g["sum_units"] for g in plural["groups"]} == totals
    count = tools["table_analyzer"](
        path="data/sales.csv", operation="groupby", group_by="product", agg="count"
    )
    per_product: dict[str, int] = defaultdict(int)
    for r in rows:
        per_product[r["product"]] += 1
    assert {g["product"]: g["count"] for g in count["groups"]} == per_product
    top = tools["table_analyzer"](path="data/sales.csv", operation="topk", column="units", k=3)
    assert [r["units"] for r in top["rows"]] == sorted((r["units"] for r in rows), reverse=True)[:3]
    low = tools["table_analyzer"](
        path="data/sales.csv",
        operation="topk",
        column="units",
        k=2,
        ascending=True,
        filter='region == "West"',
    )
    west = sorted(r["units"] for r in rows if r["region"] == "West")
    assert [r["units"] for r in low["rows"]] == west[:2]


def test_table_xlsx_and_tsv(tools: dict[str, Any], ws: Path) -> None:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(["city", "temp"])
    for city, temp in [("Beijing", 15), ("London", 11), ("Shenzhen", 26)]:
        sheet.append([city, temp])
    book.save(ws / "data" / "temps.xlsx")
    out = tools["table_analyzer"](path="data/temps.xlsx", operation="topk", column="temp", k=1)
    assert out["rows"] == [{"city": "Shenzhen", "temp": 26}]
    (ws / "t.tsv").write_text("a\tb\n1\tx\n2\ty\n")
    assert tools["table_analyzer"](path="t.tsv")["rows"] == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"operation": "filter"}, "needs a filter"),
        ({"operation": "filter", "filter": "__import__('os')"}, "cannot parse filter"),
        ({"operation": "filter", "filter": "units > 'many'"}, "numeric"),
        ({"operation": "filter", "filter": "colour == red"}, "unknown column 'colour'"),
        (
            {"operation": "groupby", "group_by": "region", "column": "units", "agg": "median"},
            "unknown agg",
        ),
        ({"operation": "topk"}, "column is required"),
        ({"operation": "pivot"}, "unknown operation"),
    ],
)
def test_table_errors(tools: dict[str, Any], kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        tools["table_analyzer"](path="data/sales.csv", **kwargs)


def test_table_rejects_other_files(tools: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="unsupported table type"):
        tools["table_analyzer"](path="docs/agent_guide.md")
    with pytest.raises(WorkspaceError):
        tools["table_analyzer"](path="../sales.csv")


def test_parse_filter_grammar() -> None:
    assert parse_filter("units > 10") == ("units", ">", 10)
    assert parse_filter('region == "East"') == ("region", "==", "East")
    assert parse_filter("price <= 7.25") == ("price", "<=", 7.25)
    assert parse_filter("`unit price` != 2") == ("unit price", "!=", 2)
    assert parse_filter("product CONTAINS dg") == ("product", "contains", "dg")
    assert parse_filter("region = West") == ("region", "==", "West")
    with pytest.raises(ValueError, match="cannot parse filter"):
        parse_filter("units")


# --- datetime and letters --------------------------------------------------------------------


def test_get_current_datetime(tools: dict[str, Any]) -> None:
    utc = tools["get_current_datetime"]()
    assert utc["timezone"] == "UTC" and utc["utc_offset"] == "+0000"
    shanghai = tools["get_current_datetime"](timezone="Asia/Shanghai")
    assert shanghai["utc_offset"] == "+0800"
    assert shanghai["datetime"].endswith("+08:00")
    with pytest.raises(ValueError, match="unknown timezone 'Mars/Olympus'"):
        tools["get_current_datetime"](timezone="Mars/Olympus")
    with pytest.raises(ValueError, match="unknown timezone"):
        tools["get_current_datetime"](timezone="../../etc/passwd")


def test_count_letter_in_string(tools: dict[str, Any]) -> None:
    count = tools["count_letter_in_string"]
    assert count(text="strawberry", letter="r")["count"] == 3
    assert count(text="Strawberry", letter="s")["count"] == 0  # case-sensitive
    assert count(text="banana", letter="an")["count"] == 2
    with pytest.raises(ValueError, match="empty"):
        count(text="abc", letter="")


# --- registry integration --------------------------------------------------------------------


def test_register_builtin_tools_and_execute_many(ws: Path) -> None:
    registry = ToolRegistry()
    names = register_builtin_tools(registry, ws)
    assert names == [
        "file_reader",
        "local_file_search",
        "calculator",
        "table_analyzer",
        "get_current_datetime",
        "count_letter_in_string",
    ]
    schema = {s["name"]: s for s in registry.schemas("flat")}
    reader = schema["file_reader"]["parameters"]["properties"]
    assert reader["max_chars"]["default"] == 2000 and "description" in reader["path"]
    assert (
        "contains" in schema["table_analyzer"]["parameters"]["properties"]["filter"]["description"]
    )
    messages = registry.execute_many(
        [
            {"id": "call_001", "name": "file_reader", "args": {"path": "docs/agent_intro.txt"}},
            {"id": "call_002", "name": "calculator", "args": {"expression": "3.14 * 5"}},
            {"id": "call_003", "name": "local_file_search", "args": {"query": "Agent"}},
            {"id": "call_004", "name": "file_reader", "args": {"path": "x", "max_chars": "abc"}},
        ]
    )
    results = [read_tool_result(m) for m in messages]
    assert "Agent" in results[0]["output"]["content"]
    assert results[1]["output"]["result"] == 15.7
    assert results[2]["output"]["files_matched"] == 2
    assert results[3]["error"] == (
        "invalid arguments for tool 'file_reader': argument 'max_chars' must be integer, got 'abc'"
    )
    assert math.isclose(results[1]["output"]["result"], 15.7)


def test_a_missing_file_names_the_workspace_files_it_may_have_meant(tmp_path):
    from lokal.skills.workspace import Workspace, WorkspaceError

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "sales.csv").write_text("a,b\n")
    (tmp_path / "notes.txt").write_text("x\n")
    (tmp_path / ".hidden.txt").write_text("x\n")
    workspace = Workspace(tmp_path)
    with pytest.raises(WorkspaceError, match=r"did you mean 'data/sales.csv'\?"):
        workspace.resolve("sales.csv")
    with pytest.raises(WorkspaceError, match=r"did you mean 'notes.txt'\?"):
        workspace.resolve("note.txt")
    with pytest.raises(WorkspaceError) as refused:
        workspace.resolve("zzz")
    assert "did you mean" not in str(refused.value)
