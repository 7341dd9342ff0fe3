"""A scorer for BFCL's single-turn AST categories, following the rules of BFCL's AST checker.

``decoded`` is BFCL's own output format: a list of ``{function_name: {param: value}}``.
``ground_truth`` is BFCL's possible answers: a list of ``{function_name: {param: [allowed
values]}}`` where an allowed value ``""`` marks an optional parameter that may be left out.

The rules (as in ``bfcl_eval/eval_checker/ast_eval/ast_checker.py``):

- irrelevance categories pass when no call is made (prose, or a reply that does not decode);
- relevance categories pass when at least one call is made (any function, any arguments);
- ``parallel`` categories: as many calls as answers, matched in any order;
- ``multiple`` categories and the rest: exactly as many calls as answers (one);
- a call passes when its name is the expected one (a model may have seen dots replaced by
  underscores), every required parameter is present, no parameter is outside the schema or
  the possible answer, each value has the schema type (an int is accepted for a float, not
  the reverse; a value of the possible answer's own type is accepted as a "variable"), and
  the value is among the possible answers: strings after BFCL's normalisation (lowercase,
  spaces and ``,./-_*^`` removed, ``'`` turned into ``"``), lists element-wise, dicts key by
  key, lists of dicts dict by dict; a parameter left out needs ``""`` among its answers.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["check", "check_call", "is_irrelevance", "is_relevance", "standardize_string"]

_PY_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "number": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "object": dict,
    "any": str,
}
_NESTED = ("array", "tuple")
_PUNCTUATION = re.compile(r"[ ,./\-_*^]")


class _Fail(Exception):
    pass


def standardize_string(text: str) -> str:
    """BFCL's string normalisation: no spaces or ``,./-_*^``, lowercase, ``'`` → ``"``."""
    return _PUNCTUATION.sub("", text).lower().replace("'", '"')


def is_irrelevance(category: str) -> bool:
    return "irrelevance" in category


def is_relevance(category: str) -> bool:
    return "relevance" in category and not is_irrelevance(category)


def _answer_type(answers: list[Any]) -> type | None:
    """The type of the first non-optional possible answer (None when all are optional)."""
    for answer in answers:
        if answer != "":
            return type(answer)
    return None


def _type_ok(value: Any, answers: list[Any], expected: type, nested: type | None) -> bool:
    """Returns whether the type is acceptable; raises _Fail when it is not.

    The result says whether the value is a "variable" (the possible answer's own type instead
    of the schema's), which is then compared as is.
    """
    answer_type = _answer_type(answers)
    variable = answer_type is not None and answer_type is not expected
    if type(value) is expected:
        if nested is None:
            return variable
        for answer in answers:
            if not isinstance(answer, list):
                return variable  # nothing to check the items against (an optional marker)
            if all(_item_type_ok(item, answer, nested) for item in value):
                return variable
        raise _Fail(f"items of {type(value).__name__} are not all {nested.__name__}")
    if answer_type is not None and type(value) is answer_type:
        return True
    raise _Fail(f"expected {expected.__name__}, got {type(value).__name__}")


def _item_type_ok(item: Any, answer: list[Any], nested: type) -> bool:
    if type(item) is nested:
        return True
    return type(item) is _answer_type(answer)


def _norm(value: Any) -> Any:
    return standardize_string(value) if isinstance(value, str) else value


def _dict_ok(value: dict[str, Any], answers: list[Any]) -> bool:
    for answer in answers:
        if answer == "" or not isinstance(answer, dict):
            continue
        if any(
            key not in answer or _norm(item) not in [_norm(a) for a in answer[key]]
            for key, item in value.items()
        ):
            continue
        if any(key not in value and "" not in allowed for key, allowed in answer.items()):
            continue
        return True
    return False


def _list_of_dicts_ok(value: list[Any], answers: list[Any]) -> bool:
    for answer in answers:
        if not isinstance(answer, list) or len(answer) != len(value):
            continue
        if all(
            isinstance(item, dict) and _dict_ok(item, [expected])
            for item, expected in zip(value, answer, strict=True)
        ):
            return True
    return False


def _list_ok(value: list[Any], answers: list[Any]) -> bool:
    mine = [_norm(item) for item in value]
    return any(
        isinstance(answer, list) and mine == [_norm(item) for item in answer] for answer in answers
    )


def _value_ok(param: str, value: Any, answers: list[Any], schema: dict[str, Any]) -> None:
    type_name = schema.get("type", "any")
    expected = _PY_TYPES.get(type_name, str)
    nested = None
    if type_name in _NESTED:
        nested = _PY_TYPES.get((schema.get("items") or {}).get("type", "any"), str)
    if type_name == "tuple" and isinstance(value, tuple):
        value = list(value)
    if type_name in ("float", "number") and type(value) is int:
        value = float(value)  # Python's int → float conversion is allowed
    try:
        variable = _type_ok(value, answers, expected, nested)
    except _Fail as exc:
        raise _Fail(f"parameter {param!r}: {exc}") from None
    if not variable:
        if expected is dict:
            if not _dict_ok(value, answers):
                raise _Fail(f"parameter {param!r}: {value!r} matches no possible answer")
            return
        if expected is list and nested is dict:
            if not _list_of_dicts_ok(value, answers):
                raise _Fail(f"parameter {param!r}: {value!r} matches no possible answer")
            return
        if expected is str:
            allowed = [standardize_string(a) for a in answers if isinstance(a, str)]
            if standardize_string(value) not in allowed:
                raise _Fail(f"parameter {param!r}: {value!r} not in {answers!r}")
            return
        if expected is list:
            if not _list_ok(value, answers):
                raise _Fail(f"parameter {param!r}: {value!r} not in {answers!r}")
            return
    if value not in answers:
        raise _Fail(f"parameter {param!r}: {value!r} not in {answers!r}")


def _names_match(model_name: str, expected: str) -> bool:
    return model_name == expected or model_name == expected.replace(".", "_")


def check_call(
    function: dict[str, Any] | None, call: dict[str, Any], answer: dict[str, Any]
) -> str | None:
    """None when one decoded call matches one possible answer; otherwise the reason."""
    expected_name, allowed = next(iter(answer.items()))
    if function is None:
        return f"no function description for {expected_name!r}"
    if not isinstance(call, dict) or len(call) != 1:
        return f"malformed call {call!r}"
    name, args = next(iter(call.items()))
    if not _names_match(name, expected_name):
        return f"function {expected_name!r} expected, got {name!r}"
    if not isinstance(args, dict):
        return f"arguments of {name!r} are not a mapping"
    parameters = function.get("parameters") or {}
    properties = parameters.get("properties") or {}
    for param in parameters.get("required") or []:
        if param not in args:
            return f"missing required parameter {param!r}"
    try:
        for param, value in args.items():
            if param not in properties or param not in allowed:
                return f"unexpected parameter {param!r}"
            _value_ok(param, value, allowed[param], properties[param])
    except _Fail as exc:
        return str(exc)
    for param, values in allowed.items():
        if param not in args and "" not in values:
            return f"parameter {param!r} left out but not optional"
    return None


def _describe(functions: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((f for f in functions if f.get("name") == name), None)


def check(
    category: str,
    functions: list[dict[str, Any]],
    decoded: list[dict[str, Any]],
    ground_truth: list[dict[str, Any]] | None,
) -> tuple[bool, str | None]:
    """(correct, reason) for one BFCL case."""
    if is_irrelevance(category):
        if decoded:
            return False, f"irrelevance: expected no call, got {len(decoded)}"
        return True, None
    if is_relevance(category):
        if not decoded or not any(decoded):
            return False, "relevance: expected a call, got none"
        return True, None
    answers = ground_truth or []
    if len(decoded) != len(answers):
        return False, f"wrong number of calls: expected {len(answers)}, got {len(decoded)}"
    if "parallel" not in category:
        answer = answers[0]
        reason = check_call(_describe(functions, next(iter(answer))), decoded[0], answer)
        return reason is None, reason
    used: set[int] = set()
    for answer in answers:
        function = _describe(functions, next(iter(answer)))
        reasons = []
        for index, call in enumerate(decoded):
            if index in used:
                continue
            reason = check_call(function, call, answer)
            if reason is None:
                used.add(index)
                break
            reasons.append(reason)
        else:
            return False, f"no call matches {next(iter(answer))!r}: " + "; ".join(reasons[:3])
    return True, None
