"""Built-in tools, all confined to one workspace given at start-up.

``builtin_tools(workspace)`` returns the tools (``lokal.tools.Tool`` objects, callable like the
functions they wrap); ``register_builtin_tools(registry, workspace)`` adds them to a registry.
Every path argument is resolved through ``Workspace.resolve`` so no tool reads outside it.

pandas and openpyxl (``table_analyzer``) and simpleeval (``calculator``) are imported when a
tool is first called, with an install hint when missing.
"""

from __future__ import annotations

import math
import operator
import os
import re
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from annotated_types import Interval

from lokal.glosses import search_senses
from lokal.skills.workspace import Workspace, WorkspaceError
from lokal.tools.registry import Tool, ToolRegistry, tool

__all__ = [
    "BINARY_SNIFF_BYTES",
    "MAX_SEARCH_FILE_BYTES",
    "builtin_tools",
    "calculate",
    "count_letter_in_string",
    "get_current_datetime",
    "parse_filter",
    "register_builtin_tools",
]

BINARY_SNIFF_BYTES = 8192
MAX_SEARCH_FILE_BYTES = 2 * 1024 * 1024
MAX_READ_BYTES = 8 * 1024 * 1024
MAX_READ_CHARS = 100_000
MAX_TABLE_BYTES = 64 * 1024 * 1024
MAX_TABLE_ROWS = 50
SKIPPED_DIRS = {"__pycache__", "node_modules", "venv", "site-packages"}


def _require(module: str, package: str) -> Any:
    """Import an optional dependency or raise ImportError saying how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"this tool needs the '{package}' package: pip install {package}"
        ) from exc


def _is_binary(path: Path) -> bool:
    with path.open("rb") as handle:
        return b"\x00" in handle.read(BINARY_SNIFF_BYTES)


# --- calculator -------------------------------------------------------------------------------

MAX_EXPRESSION_CHARS = 500
MAX_EXPONENT = 10_000
MAX_FACTORIAL = 1_000
MAX_RESULT_BITS = 1_000_000


def _power(base: Any, exponent: Any) -> Any:
    if isinstance(exponent, int | float) and abs(exponent) > MAX_EXPONENT:
        raise ValueError(f"exponent {exponent} is too large (limit {MAX_EXPONENT})")
    whole = isinstance(base, int) and isinstance(exponent, int) and exponent > 0
    if whole and base.bit_length() * exponent > MAX_RESULT_BITS:  # the result would be huge
        raise OverflowError("integer result too large")
    return operator.pow(base, exponent)


def _factorial(n: Any) -> int:
    if not isinstance(n, int) or n < 0:
        raise ValueError("factorial() takes a non-negative integer")
    if n > MAX_FACTORIAL:
        raise ValueError(f"factorial({n}) is too large (limit {MAX_FACTORIAL})")
    return math.factorial(n)


def _log(x: float, base: float | None = None) -> float:
    return math.log(x) if base is None else math.log(x, base)


_CALC_FUNCTIONS: dict[str, Any] = {
    "sqrt": math.sqrt,
    "cbrt": lambda x: math.copysign(abs(x) ** (1 / 3), x),
    "exp": math.exp,
    "log": _log,
    "ln": math.log,
    "log10": math.log10,
    "log2": math.log2,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "atan2": math.atan2,
    "sinh": math.sinh,
    "cosh": math.cosh,
    "tanh": math.tanh,
    "degrees": math.degrees,
    "radians": math.radians,
    "hypot": math.hypot,
    "floor": math.floor,
    "ceil": math.ceil,
    "trunc": math.trunc,
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "pow": _power,
    "factorial": _factorial,
    "gcd": math.gcd,
    "int": int,
    "float": float,
}
_CALC_NAMES = {"pi": math.pi, "e": math.e, "tau": math.tau, "True": True, "False": False}


# Arithmetic in words, as small models copy it from the question ("48 divided by 6, plus 7",
# "15% of 240", "2 to the power of 10", "125 乘以 8"): turned into symbols when the text as
# written does not evaluate.
_WORD_OPERATORS = (
    (r"(\d+(?:\.\d+)?)\s*(?:%|percent)\s+of\b", r"(\1/100)*"),
    (r"\bsquare root of\s*\(?\s*(\d+(?:\.\d+)?)\s*\)?", r"sqrt(\1)"),
    (r"\bcube root of\s*\(?\s*(\d+(?:\.\d+)?)\s*\)?", r"cbrt(\1)"),
    (r"\b(?:raised )?to the power of\b", "**"),
    (r"\bsquared\b", "**2"),
    (r"\bcubed\b", "**3"),
    (r"\bplus\b|\band\b|加上|加", "+"),
    (r"\bminus\b|减去|减", "-"),
    (r"\b(?:times|multiplied by)\b|乘以|乘", "*"),
    (r"\b(?:divided by|over)\b|除以", "/"),
)
_KNOWN_NAMES = "|".join(sorted({*_CALC_FUNCTIONS, *_CALC_NAMES}, key=len, reverse=True))
_NOT_ARITHMETIC = re.compile(
    rf"(?<![A-Za-z_])(?!(?:{_KNOWN_NAMES})\b)[A-Za-z_]\w*|[^\w\s.+\-*/%^()]"
)


def arithmetic_from_words(text: str) -> str | None:
    """``text`` with arithmetic words turned into operators and the other words dropped;
    None when it holds no arithmetic word (then nothing is guessed: ``x + 1`` stays an
    error, it does not become ``1``)."""
    out = text.casefold()
    changed = False
    for pattern, replacement in _WORD_OPERATORS:
        out, count = re.subn(pattern, replacement, out)
        changed = changed or count > 0
    if not changed:
        return None
    out = _NOT_ARITHMETIC.sub(" ", out)
    return " ".join(out.split()) or None


def calculate(expression: str) -> int | float | bool:
    """Evaluate an arithmetic expression with simpleeval (never ``eval``); raise ValueError.

    An expression that does not evaluate as written is read once more with its arithmetic
    words turned into operators (``arithmetic_from_words``)."""
    try:
        return _calculate(expression)
    except ValueError:
        spoken = arithmetic_from_words(str(expression))
        if spoken is None or spoken == str(expression).strip():
            raise
        try:
            return _calculate(spoken)
        except ValueError:
            pass
        raise


def _calculate(expression: str) -> int | float | bool:
    simpleeval = _require("simpleeval", "simpleeval")
    import ast

    text = str(expression).strip()
    if not text:
        raise ValueError("the expression is empty")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    text = text.replace("×", "*").replace("÷", "/").replace("−", "-").replace("，", ",")
    operators = dict(simpleeval.DEFAULT_OPERATORS)
    operators[ast.Pow] = _power
    operators[ast.BitXor] = _power  # models write 2^10 for powers; bitwise xor is never meant
    evaluator = simpleeval.SimpleEval(
        operators=operators, functions=dict(_CALC_FUNCTIONS), names=dict(_CALC_NAMES)
    )
    try:
        result = evaluator.eval(text)
    except SyntaxError as exc:
        raise ValueError(f"invalid syntax in {text!r}: {exc.msg}") from None
    except ZeroDivisionError:
        raise ValueError(f"division by zero in {text!r}") from None
    except OverflowError:
        raise ValueError(f"the result of {text!r} is too large") from None
    except simpleeval.InvalidExpression as exc:
        raise ValueError(f"cannot evaluate {text!r}: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise ValueError(f"cannot evaluate {text!r}: {exc}") from None
    if isinstance(result, bool):
        return result
    if isinstance(result, int):
        if result.bit_length() > 160:
            try:
                return float(result)
            except OverflowError:
                raise ValueError(f"the result of {text!r} is too large") from None
        return result
    if isinstance(result, float):
        if math.isnan(result) or math.isinf(result):
            raise ValueError(f"the result of {text!r} is not a finite number")
        return float(f"{result:.15g}")  # 3.14 * 5 → 15.7, not 15.700000000000001
    raise ValueError(f"{text!r} does not evaluate to a number (got {type(result).__name__})")


# --- table filters ----------------------------------------------------------------------------

_FILTER_RE = re.compile(
    r"""^\s*
    (?P<column>`[^`]+`|"[^"]+"|'[^']+'|[^\s=!<>]+)
    \s*(?P<op>==|!=|>=|<=|>|<|=|\s(?i:contains)\s)\s*
    (?P<value>.+?)\s*$""",
    re.VERBOSE,
)
FILTER_OPS = ("==", "!=", ">", ">=", "<", "<=", "contains")


def _literal(text: str) -> Any:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    lowered = text.lower()
    if lowered in {"true", "false"}:
        return lowered == "true"
    if lowered in {"null", "none", "nan"}:
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text  # a bare word: compare as text


def parse_filter(expression: str) -> tuple[str, str, Any]:
    """``'units > 10'`` → ``("units", ">", 10)``; raise ValueError on anything else.

    The grammar is one condition: a column name (bare, or quoted with ``"``, ``'`` or
    backticks), an operator out of ``== != > >= < <= contains`` and a literal (number, quoted
    text, true/false/null, or a bare word taken as text).
    """
    match = _FILTER_RE.match(expression or "")
    if not match:
        raise ValueError(
            f"cannot parse filter {expression!r}; write `column op value` with op one of "
            f'{", ".join(FILTER_OPS)}, e.g. units > 10 or region == "East"'
        )
    column = match.group("column")
    if column[0] in "`\"'":
        column = column[1:-1]
    op = match.group("op").strip().lower()
    return column, "==" if op == "=" else op, _literal(match.group("value"))


# --- the tools ----------------------------------------------------------------------------------


def get_current_datetime(timezone: str = "UTC") -> dict[str, Any]:
    """Get the current date and time in a time zone (what time is it, today's date;
    现在几点、今天日期、时间).

    Args:
        timezone: An IANA time zone name such as "UTC", "Asia/Shanghai" or "Europe/London".
    """
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    name = (timezone or "UTC").strip()
    try:
        zone = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown timezone {name!r}; use an IANA name such as 'UTC' or 'Asia/Shanghai'"
        ) from None
    now = datetime.now(zone)
    return {
        "timezone": name,
        "datetime": now.isoformat(timespec="seconds"),
        "date": now.date().isoformat(),
        "time": now.strftime("%H:%M:%S"),
        "weekday": now.strftime("%A"),
        "utc_offset": now.strftime("%z"),
    }


def count_letter_in_string(text: str, letter: str) -> dict[str, Any]:
    """Count how often a letter occurs in a word or text (统计字母出现次数、有几个字母).

    Case-sensitive; ``letter`` may be any substring.

    Args:
        text: The text to search in.
        letter: The letter or substring to count.
    """
    if not letter:
        raise ValueError("letter must not be empty")
    return {"text": text, "letter": letter, "count": text.count(letter)}


def builtin_tools(workspace: Workspace | str | os.PathLike[str]) -> list[Tool]:
    """The built-in tools bound to ``workspace``."""
    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)

    @tool
    def file_reader(
        path: str, max_chars: Annotated[int, Interval(ge=1, le=MAX_READ_CHARS)] = 2000
    ) -> dict[str, Any]:
        """Read a text file from the workspace and return its content (open, show, view a
        file; 读取、查看、打开文件内容).

        Args:
            path: File path relative to the workspace root, e.g. "docs/agent_intro.txt".
            max_chars: Return at most this many characters of the file.
        """
        if max_chars < 1:
            raise ValueError("max_chars must be at least 1")
        target = ws.resolve(path, kind="file")
        with ws.open_file(path) as handle:  # the file checked is the file read
            size = os.fstat(handle.fileno()).st_size
            data = handle.read(min(size, MAX_READ_BYTES))
        if b"\x00" in data[:BINARY_SNIFF_BYTES]:
            raise ValueError(
                f"'{path}' is a binary file; file_reader reads text files only "
                "(use table_analyzer for .xlsx/.csv tables)"
            )
        text = data.decode("utf-8", errors="replace")
        whole = size <= MAX_READ_BYTES
        content = text[:max_chars]
        return {
            "path": ws.relative(target),
            "content": content,
            "truncated": len(text) > max_chars or not whole,
            "chars": len(content),
            "total_chars": len(text) if whole else None,
        }

    @tool
    def local_file_search(
        query: str, root_dir: str = ".", max_results: Annotated[int, Interval(ge=1, le=100)] = 5
    ) -> dict[str, Any]:
        """Search the workspace for files whose name or text contains a query (find files;
        搜索、查找文件).

        The match is case-insensitive. Files with more than one hard link are skipped (they
        may be files from outside the workspace) and counted in ``hard_links_skipped``.

        Args:
            query: The text to look for.
            root_dir: Directory to search, relative to the workspace root.
            max_results: Maximum number of matching files to return.
        """
        needle = (query or "").strip().casefold()
        if not needle:
            raise ValueError("query must not be empty")
        if max_results < 1:
            raise ValueError("max_results must be at least 1")
        base = ws.resolve(root_dir, kind="dir")
        hits, scanned, hard_links = _search_workspace(ws, base, [needle])
        glossed: dict[str, list[str]] = {}
        if not hits:
            # a Chinese query over files in English: "团队出游" finds "team outing" by the
            # English senses of its words (CC-CEDICT, lokal.glosses); the files that hold
            # senses of the most words
            for word, senses in search_senses(query):
                glossed[word] = [_sense_needle(sense) for sense in senses]
            if glossed:
                needles = [n for found in glossed.values() for n in found]
                hits, _, _ = _search_workspace(ws, base, needles)
                hits = _by_words_matched(hits, glossed)
        results = [{"path": ws.relative(path), **hit} for path, hit, _ in hits[:max_results]]
        out = {
            "query": query,
            "root_dir": ws.relative(base),
            "results": results,
            "files_matched": len(hits),
            "files_scanned": scanned,
            "truncated": len(hits) > len(results),
        }
        if glossed:  # what the Chinese query was looked for as: "team, tour, outing"
            out["searched_for"] = ", ".join(n for found in glossed.values() for n in found)
        if hard_links:
            out["hard_links_skipped"] = hard_links
        return out

    @tool
    def calculator(expression: str) -> dict[str, Any]:
        """Calculate (compute) the value of an arithmetic expression: sums, products, powers,
        percentages (计算、算一下、等于多少).

        Examples of expressions: "3.14 * 5", "sqrt(2) * sin(pi / 4)".

        Supports + - * / // % ** (also ^ for power), parentheses, the functions sqrt, exp,
        log, log10, log2, sin, cos, tan, asin, acos, atan, floor, ceil, abs, round, min, max,
        factorial and the constants pi and e.

        Args:
            expression: The arithmetic expression to evaluate.
        """
        result = calculate(expression)
        try:
            _calculate(expression)
            return {"expression": expression, "result": result}
        except ValueError:
            return {
                "expression": expression,
                "read_as": arithmetic_from_words(expression),
                "result": result,
            }

    @tool
    def table_analyzer(
        path: str,
        operation: Literal["summary", "filter", "groupby", "topk"] = "summary",
        column: str | None = None,
        filter: str | None = None,
        group_by: str | None = None,
        agg: Literal["sum", "mean", "count", "min", "max"] = "sum",
        k: Annotated[int, Interval(ge=1, le=1000)] = 5,
        ascending: bool = False,
    ) -> dict[str, Any]:
        """Analyze a CSV, TSV or XLSX table in the workspace (summary, filter, group by, top
        rows; 分析表格数据、统计、摘要).

        Operations: "summary" (shape, columns, types, statistics, first rows), "filter" (rows
        matching the filter), "groupby" (aggregate column per group_by value) and "topk" (the
        k rows with the largest, or smallest, values of column). A filter given with another
        operation is applied first.

        Args:
            path: Table file relative to the workspace root, e.g. "data/sales.csv".
            operation: One of "summary", "filter", "groupby", "topk".
            column: The column to aggregate (groupby) or rank by (topk).
            filter: One condition `column op value`, op one of == != > >= < <= contains,
                e.g. units > 10 or region == "East".
            group_by: The column to group by (groupby).
            agg: Aggregation for groupby: "sum", "mean", "count", "min" or "max".
            k: Number of rows for topk.
            ascending: For topk, return the smallest values instead of the largest.
        """
        return _analyze_table(ws, path, operation, column, filter, group_by, agg, k, ascending)

    return [
        file_reader,
        local_file_search,
        calculator,
        table_analyzer,
        tool(get_current_datetime),
        tool(count_letter_in_string),
    ]


def register_builtin_tools(
    registry: ToolRegistry, workspace: Workspace | str | os.PathLike[str]
) -> list[str]:
    """Register the built-in tools for ``workspace``; return their names."""
    names = []
    for item in builtin_tools(workspace):
        names.append(registry.register(item, replace=True).name)
    return names


def _search_workspace(
    ws: Workspace, base: Path, needles: list[str]
) -> tuple[list[tuple[Path, dict[str, Any], list[str]]], int, int]:
    """The files under ``base`` that hold any of ``needles`` (each with the match of the
    first needle it holds and every needle it holds), the number of files scanned and the
    number skipped for their hard links."""
    hits: list[tuple[Path, dict[str, Any], list[str]]] = []
    scanned = hard_links = 0
    for current, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS)
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = Path(current) / name
            if not ws.contains(path) or not path.is_file():
                continue  # a symlink pointing out of the workspace
            try:
                if ws.hard_link_problem(path.stat(), name) is not None:
                    hard_links += 1
                    continue  # may be a file from outside the workspace
                handle = ws.open_file(path)
            except (OSError, WorkspaceError):
                continue  # changed since the walk
            with handle:
                found = _search_file(handle, name, needles)  # read once for every needle
            scanned += 1
            if found:
                hits.append((path, next(iter(found.values())), list(found)))
    return hits, scanned, hard_links


def _sense_needle(sense: str) -> str:
    """What a search looks for of an English sense: the sense itself when it is one word,
    else its longest word ("have an outing" → "outing", "quarter of a year" → "quarter")."""
    words = sense.casefold().split()
    return words[0] if len(words) == 1 else max(words, key=len)


def _by_words_matched(
    hits: list[tuple[Path, dict[str, Any], list[str]]], glossed: dict[str, list[str]]
) -> list[tuple[Path, dict[str, Any], list[str]]]:
    """The ``hits`` that hold a sense of the most Chinese words of the query ("销售表的位置":
    a file with "sales" and "place" leaves out one with "sales" alone)."""

    def words(found: list[str]) -> int:
        return sum(1 for needles in glossed.values() if set(found) & set(needles))

    best = max((words(found) for _, _, found in hits), default=0)
    return [hit for hit in hits if words(hit[2]) == best]


def _search_file(handle: Any, name: str, needles: list[str]) -> dict[str, dict[str, Any]]:
    """The matches of one file (open, binary), read once: for each needle it holds, by name
    and/or by its first matching line, in the order of ``needles``."""
    import io

    name = name.casefold()
    lines: dict[str, int | None] = dict.fromkeys(needles)
    snippets: dict[str, str | None] = dict.fromkeys(needles)
    counts = dict.fromkeys(needles, 0)
    try:
        if os.fstat(handle.fileno()).st_size <= MAX_SEARCH_FILE_BYTES:
            head = handle.read(BINARY_SNIFF_BYTES)
            if b"\x00" not in head:
                handle.seek(0)
                text = io.TextIOWrapper(handle, encoding="utf-8", errors="replace")
                for number, line in enumerate(text, start=1):
                    folded = line.casefold()
                    for needle in needles:
                        if needle in folded:
                            counts[needle] += 1
                            if lines[needle] is None:
                                lines[needle], snippets[needle] = number, line.strip()[:200]
                text.detach()
    except OSError:
        return {}
    return {
        needle: {
            "name_match": needle in name,
            "line": lines[needle],
            "snippet": snippets[needle],
            "line_matches": counts[needle],
        }
        for needle in needles
        if needle in name or counts[needle]
    }


# --- table_analyzer internals --------------------------------------------------------------------


def _records(frame: Any) -> list[dict[str, Any]]:
    import json

    return json.loads(frame.to_json(orient="records", date_format="iso", force_ascii=False))


def _load_table(ws: Workspace, path: str) -> Any:
    pd = _require("pandas", "pandas")
    target = ws.resolve(path, kind="file")
    suffix = target.suffix.lower()
    if suffix not in {".csv", ".txt", ".tsv", ".tab", ".xlsx", ".xlsm"}:
        raise ValueError(f"unsupported table type '{suffix}'; use .csv, .tsv or .xlsx")
    with ws.open_file(path) as handle:  # the file checked is the file read
        if os.fstat(handle.fileno()).st_size > MAX_TABLE_BYTES:
            raise ValueError(f"'{path}' is larger than {MAX_TABLE_BYTES // (1024 * 1024)} MB")
        if suffix == ".csv":
            return pd.read_csv(handle, encoding_errors="replace")
        if suffix == ".txt":
            return pd.read_csv(handle, sep=None, engine="python", encoding_errors="replace")
        if suffix in {".tsv", ".tab"}:
            return pd.read_csv(handle, sep="\t", encoding_errors="replace")
        _require("openpyxl", "openpyxl")
        return pd.read_excel(handle, engine="openpyxl")


def _column(frame: Any, name: str | None, role: str) -> str:
    if not name:
        raise ValueError(f"{role} is required for this operation")
    columns = [str(c) for c in frame.columns]
    if name in columns:
        return name
    folded = {c.casefold().strip(): c for c in columns}
    key = name.casefold().strip()
    # "prices" for price, "unit" for units: the plural the question used
    for form in (key, key.removesuffix("s"), key.removesuffix("es"), key + "s"):
        if form in folded:
            return folded[form]
    raise ValueError(f"unknown column {name!r}; columns are: {', '.join(columns)}")


def _apply_filter(frame: Any, expression: str) -> Any:
    pd = _require("pandas", "pandas")
    name, op, value = parse_filter(expression)
    column = _column(frame, name, "filter column")
    series = frame[column]
    if op == "contains":
        return frame[series.astype(str).str.contains(str(value), case=False, regex=False)]
    numeric = pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)
    if value is None:
        mask = series.isna() if op == "==" else series.notna()
        if op not in {"==", "!="}:
            raise ValueError("null can only be compared with == or !=")
        return frame[mask]
    if numeric:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"column {column!r} is numeric; compare it with a number")
    elif op in {">", ">=", "<", "<="} and isinstance(value, int | float):
        series = pd.to_numeric(series, errors="coerce")
    else:
        series = series.astype(str)
        value = str(value)
    compare = {
        "==": operator.eq,
        "!=": operator.ne,
        ">": operator.gt,
        ">=": operator.ge,
        "<": operator.lt,
        "<=": operator.le,
    }[op]
    return frame[compare(series, value).fillna(False).astype(bool)]


def _analyze_table(
    ws: Workspace,
    path: str,
    operation: str,
    column: str | None,
    filter: str | None,
    group_by: str | None,
    agg: str,
    k: int,
    ascending: bool,
) -> dict[str, Any]:
    operation = (operation or "summary").strip().lower()
    if operation not in {"summary", "filter", "groupby", "topk"}:
        raise ValueError(f"unknown operation {operation!r}; use summary, filter, groupby or topk")
    frame = _load_table(ws, path)
    out: dict[str, Any] = {"path": ws.relative(ws.resolve(path)), "operation": operation}
    if filter:
        frame = _apply_filter(frame, filter)
        out["filter"] = filter
    elif operation == "filter":
        raise ValueError('operation "filter" needs a filter such as units > 10')
    if operation == "summary":
        numeric = frame.select_dtypes("number")
        columns = ", ".join(str(c) for c in frame.columns)
        out.update(
            # the summary in one line, for "analyse this table" (one field said too little)
            overview=f"a table of {frame.shape[0]} rows and {frame.shape[1]} columns: {columns}",
            rows=int(frame.shape[0]),
            columns=[str(c) for c in frame.columns],
            dtypes={str(c): str(t) for c, t in frame.dtypes.items()},
            missing={str(c): int(v) for c, v in frame.isna().sum().items()},
            describe=_records(numeric.describe().T.reset_index(names="column"))
            if not numeric.empty
            else [],
            head=_records(frame.head(5)),
        )
    elif operation == "filter":
        out.update(
            matched_rows=len(frame),
            rows=_records(frame.head(MAX_TABLE_ROWS)),
            truncated=len(frame) > MAX_TABLE_ROWS,
        )
    elif operation == "groupby":
        agg = (agg or "sum").strip().lower()
        if agg not in {"sum", "mean", "count", "min", "max"}:
            raise ValueError(f"unknown agg {agg!r}; use sum, mean, count, min or max")
        key = _column(frame, group_by, "group_by")
        if agg == "count" and not column:
            series = frame.groupby(key, dropna=False).size()
            label = "count"
        else:
            value_column = _column(frame, column, "column")
            grouped = frame.groupby(key, dropna=False)[value_column]
            series = getattr(grouped, agg)()
            label = f"{agg}_{value_column}"
        table = series.reset_index(name=label)
        out.update(
            group_by=key,
            column=column,
            agg=agg,
            groups=_records(table.head(MAX_TABLE_ROWS)),
            truncated=len(table) > MAX_TABLE_ROWS,
        )
    else:  # topk
        value_column = _column(frame, column, "column")
        if k < 1:
            raise ValueError("k must be at least 1")
        ordered = frame.sort_values(value_column, ascending=ascending, kind="stable")
        out.update(
            column=value_column,
            k=min(k, MAX_TABLE_ROWS),
            ascending=ascending,
            rows=_records(ordered.head(min(k, MAX_TABLE_ROWS))),
        )
    return out
