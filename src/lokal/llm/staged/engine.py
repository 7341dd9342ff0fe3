"""Staged decisions: a reply built step by step, each step chosen where the evidence is.

One grammar over every possible reply lets a 135M model wander: it may call three tools
nobody asked for, or put an invalid value in a field it did not need. Here the reply
``{"tool_calls": [{"name": ..., "args": {...}}, ...]}`` or ``{"content": ...}`` is built in
stages, on a backend that can score continuations (``capabilities`` holds ``score``). Every
weight is a profile setting (``tool_calling.staged``) calibrated on lokal's development cases
(``benchmarks/calibrate_staged.py``), never on evaluation sets; docs/decisions.md has the
measurements.

1. **Answer or call.** The model's log-probability of the two reply openings
   (``{"tool_calls": [{"name": "`` and ``{"content": "``, the prompt read once, its cache
   reused) is combined with how close the question is to an offered tool not yet called
   (the preselection's similarity and BM25), whether tool results are in, and a bias.
2. **Which tool.** Among the preselected tools: similarity and BM25 to the question (or to
   the part of it still to do), and the model's log-probability of each name.
3. **Arguments.** One parameter at a time: enums and booleans among their values, strings
   among the spans of the question and of this turn's results, numbers among the numbers
   found there, each chosen by the model's log-probability (objects, arrays and parameters
   without candidates are generated under their own schema). Optional parameters the
   question does not mention are left out (``optional_args: mentioned``).
4. **Another call?** When the profile allows parallel calls: the model's log-probability of
   opening another call against closing the list, and whether a part of the request ("…,
   then search for b") has not been used by a call yet.

A call that already succeeded in this turn is not made again (the reply becomes an answer).
An answer is generated under the answer-only schema. The result is the same JSON envelope a
constrained reply would be, so parsing, validation, merging of identical calls and retries
work as for every other mode. Each stage's evidence is kept in
``Completion.details["staged"]``.

The work is bounded: at most ``staged.max_candidates`` values are scored per argument (see
``capped``), a call repeated within the reply ends it, and with a ``deadline`` (the
profile's ``decision_budget_s``) the engine raises ``DecisionTimeout`` before a model call
past it, with the calls found so far (docs/decisions.md, "Budgets"). A step under way when
the budget itself runs out is stopped by the backend (the request's ``deadline``; llama.cpp
aborts inside its evaluation) and ends the decision the same way.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import time
import weakref
from dataclasses import dataclass, replace
from typing import Any

from lokal.config import ToolCallingSettings
from lokal.errors import BackendDeadline
from lokal.glosses import chinese_topic
from lokal.llm import grammar
from lokal.llm.backends import Backend, Completion, GenerationRequest
from lokal.llm.contrasts import contradiction
from lokal.llm.currencies import currency_codes, wants_currency
from lokal.llm.places import asks_city_state, city_state_forms, names_a_place
from lokal.llm.prompts import load_template
from lokal.llm.select import Selection, default_selector, name_words
from lokal.llm.signals import (
    asks_a_definition,
    asks_a_next_step,
    asks_a_tool_step,
    asks_for_writing,
    file_searches,
    fits_the_file,
    names_a_file,
    names_a_tool,
    only_social,
    question_signals,
    siblings_of_now,
)
from lokal.llm.staged.candidates import (
    FORMAT_WORDS,
    FORMATS,
    QUOTED,
    UNIT_NAME,
    asks_again,
    bare_ordinals,
    boolean_cue,
    clauses,
    clock_times,
    column_cue,
    compound_heads,
    counted_items,
    cued_again,
    date_form,
    described_number,
    described_switch,
    direction_cue,
    follow_up_candidates,
    formula_candidates,
    in_date_form,
    inferred_format,
    is_a_topic,
    is_chinese,
    is_expression,
    is_no_place,
    is_unit,
    iso_dates,
    later_values,
    leaf_strings,
    list_bound,
    list_candidates,
    mentioned_topic,
    named_switch,
    names_a_month,
    names_a_person,
    names_parameter,
    names_the_tool,
    names_the_tool_in,
    not_the_tool,
    number_candidates,
    opening_part,
    percent_form,
    refers_back,
    relative_dates,
    scaled_away,
    sibling_values,
    singular_names,
    stated_conditions,
    stated_numbers,
    stated_options,
    stated_units,
    states_a_period,
    states_a_secret,
    states_any,
    taken_number,
    takes_a_condition,
    text_numbers,
    text_spans,
    value_kinds,
    waiting_values,
    wants_a_number,
    wants_a_period,
    wants_a_person_name,
    wants_a_place,
    wants_a_place_name,
    wants_a_query,
    wants_a_secret,
    wants_expression,
    wants_numbers,
    whole_names,
    word_problem_candidates,
)
from lokal.llm.staged.lists import chained, cross_product
from lokal.messages import call_key
from lokal.tools.schema import ToolSpec, schema_validator

__all__ = [
    "ANSWER_OPENING",
    "CALL_OPENING",
    "DecisionTimeout",
    "StagedEngine",
    "args_schema",
    "can_score",
    "capped",
]

CALL_OPENING = '{"tool_calls": [{"name": "'
ANSWER_OPENING = '{"content": "'
_ARGS = '", "args": '
_NEXT_CALL = ', {"name": "'
_END_CALLS = "]}"
_CLOSE_CALL = "}"
_CLOSE_ARGS = "}"
_MAX_VALUE_TOKENS = 48
_SCORE_CHUNK = 32  # candidates scored per backend call, the time budget checked between


class DecisionTimeout(Exception):
    """The decision's time budget ran out: between two model calls, or (``inside``) during
    one, which the backend stopped. ``stage`` says where, ``calls`` holds the calls
    completed so far, ``pending`` the call being filled (its arguments chosen so far),
    ``trace`` the stages' evidence so far."""

    def __init__(
        self,
        stage: str,
        calls: list[dict[str, Any]],
        pending: dict[str, Any] | None,
        trace: dict[str, Any],
        *,
        inside: bool = False,
    ) -> None:
        super().__init__(f"time budget exceeded in stage: {stage}")
        self.inside = inside
        self.stage = stage
        self.calls = calls
        self.pending = pending
        self.trace = trace


# a tool that does arithmetic, not one that takes a function's expression ("sin(x)")
_ARITHMETIC = re.compile(r"\barithmetic\b|\bcalculator\b", re.IGNORECASE)
# a word problem's question: "how many bottles", "how much money", "in total", "多少"
_HOW_MUCH = re.compile(r"\bhow\s+(?:many|much)\b|\bin\s+total\b|\baltogether\b|多少|几", re.I)
# numbers joined by hyphens are a date or a code ("2026-03-14", "555-0100"), not a sum
_JOINED_NUMBERS = re.compile(r"\d+(?:-\d+)+$")
# a tool whose result is a procedure to follow, not an answer ("Read a skill's instructions")
_INSTRUCTIONS = re.compile(r"\binstructions?\b", re.IGNORECASE)


# tools whose result is how to do the task, never its answer: a skill's instructions
# (lokal.skills.agent_skills); read once, the next call is another tool's
INSTRUCTION_TOOLS = frozenset({"read_skill"})


def _computes(tool: ToolSpec) -> bool:
    """Whether the tool takes an arithmetic expression (the calculator)."""
    properties = tool.parameters.get("properties") or {}
    return any(wants_expression(p, spec) for p, spec in properties.items())


def does_arithmetic(tool: ToolSpec) -> bool:
    """Whether the tool is a calculator: it takes an expression and says it does arithmetic
    (not a tool that takes a function's expression, "sin(x)", to integrate)."""
    return _computes(tool) and bool(
        _ARITHMETIC.search(f"{name_words(tool.name)} {tool.description}")
    )


def can_score(backend: Backend) -> bool:
    """Whether ``backend`` scores continuations and continues a given reply prefix."""
    return "score" in backend.capabilities and callable(getattr(backend, "score", None))


def _log_softmax(values: list[float]) -> list[float]:
    top = max(values)
    total = math.log(sum(math.exp(v - top) for v in values))
    return [v - top - total for v in values]


# How questions ask for common operations without naming them: "units per region" asks to
# group by, "the highest price" for a top-k, "the average" for a mean. A parameter (or an
# enum value) whose words are one of these keys is mentioned when its cue is in the question.
CUES: dict[str, re.Pattern[str]] = {
    key: re.compile(pattern)
    for keys, pattern in (
        (
            ("groupby", "group by", "group", "aggregate"),
            r"\b(?:per|for each|each|every|group\w*|broken down by|breakdown)\b",
        ),
        (
            ("topk", "top k", "top", "rank", "sort", "order by"),
            r"\b(?:top|highest|largest|biggest|greatest|most|best|lowest|smallest|least|fewest"
            r"|rank\w*)\b",
        ),
        (("sum", "total"), r"\b(?:total|sum|overall|altogether)\b"),
        (("mean", "average", "avg"), r"\b(?:average|mean|avg)\b"),
        (("count",), r"\b(?:how many|count|number of)\b"),
        (("min", "minimum"), r"\b(?:min(?:imum)?|lowest|smallest|least|fewest)\b"),
        (("max", "maximum"), r"\b(?:max(?:imum)?|highest|largest|biggest|greatest|most)\b"),
        (("filter", "where"), r"\b(?:where|only those|filter\w*)\b"),
        (("ascending",), r"\b(?:lowest|smallest|least|fewest|ascending)\b"),
    )
    for key in keys
}


# backend -> seconds per generated token, last measured (weak: a backend's pace goes with it)
_PACE: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()


def _pace(backend: Backend) -> float:
    try:
        return _PACE.get(backend, 0.0)
    except TypeError:  # not weakly referable or not hashable: no pace kept
        return 0.0


def _set_pace(backend: Backend, seconds: float) -> None:
    with contextlib.suppress(TypeError):
        _PACE[backend] = seconds


CUE_BONUS = 1000.0  # added to an enum value the question cues: it ranks first


def _folded(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.casefold()))


def cued(value: Any, question: str) -> bool:
    """Whether ``question`` names ``value`` (a parameter name or an enum value) in its own
    words or by one of its cues ("per region" cues ``groupby``)."""
    words = _folded(name_words(str(value)))
    folded = _folded(question)
    if words and re.search(rf"\b{re.escape(words)}\b", folded):
        return True
    cue = CUES.get(words)
    return bool(cue and cue.search(folded))


def listed_options(
    spec: Any, question: str, *, exact_case: bool = False, least: int = 1
) -> list[str]:
    """The options a string parameter's description lists that the question states
    (``candidates.stated_options``: "'gas' refers to ..." in "a gas-powered vehicle"); none
    for a 'City, State' parameter, whose example ("e.g. Los Angeles, CA") is a form, not an
    option (lokal.llm.places shapes those values)."""
    if not isinstance(spec, dict) or asks_city_state(spec):
        return []
    if not value_kinds(spec) or not value_kinds(spec) <= {"string", "null"}:
        return []
    description = str(spec.get("description") or "")
    return stated_options(description, question, exact_case=exact_case, least=least)


def listed_items(
    spec: Any, question: str, *, exact_case: bool = False, least: int = 1
) -> list[str]:
    """The options a list-of-strings parameter's description lists that the question states,
    in the question's order, as one list ("Special dietary requirements, e.g. vegan,
    gluten-free" in "a vegan menu": ["vegan"]); none when its items have an enum
    (``cued_items``) or are not strings."""
    items = spec.get("items") if isinstance(spec, dict) else None
    if not isinstance(items, dict) or "enum" in items or value_kinds(items) != {"string"}:
        return []
    description = " ".join(str(d.get("description") or "") for d in (spec, items))
    stated = stated_options(description, question, exact_case=exact_case, least=least)
    folded = question.casefold()
    return sorted(stated, key=lambda o: folded.find(o.casefold()))


def cued_items(spec: Any, question: str) -> list[Any]:
    """The enum values of an array's items the question asks for, in the question's order
    ("Personal Info and Job History" for ``data_field``)."""
    items = spec.get("items") if isinstance(spec, dict) else None
    if not isinstance(items, dict) or not isinstance(items.get("enum"), list):
        return []
    folded = _folded(question)
    found = []
    for value in items["enum"]:
        words = _folded(name_words(str(value)))
        match = re.search(rf"\b{re.escape(words)}\b", folded) if words else None
        if match is None and words:  # "a guitar shop" for "Guitars"
            single = singular_names([words])[0]
            match = re.search(rf"\b{re.escape(single)}\b", folded)
        if match is not None or (words and cued(value, question)):
            found.append((match.start() if match else len(folded), value))
    return [value for _, value in sorted(found, key=lambda pair: pair[0])]


def _mentioned(name: str, spec: Any, question: str) -> bool:
    """Whether the question mentions an optional parameter: its name (as words, or loosely:
    ``candidates.names_parameter``) or one of its enum values, in so many words or by a cue
    (``CUES``); a date parameter, by stating a date; a time of day, by one with am/pm; a
    unit, by numbers that carry one."""
    if cued(name, question) or names_parameter(name, question):
        return True
    if isinstance(spec, dict) and inferred_format(name, spec) == "date" and iso_dates(question):
        return True  # a date the question states: "the weather in Fremont on March 1st 2023"
    if isinstance(spec, dict) and clock_times(name, spec, question):
        return True  # a time of day: "opens until at least 11 PM" for ``operating_hours``
    if UNIT_NAME.search(name) and stated_units(question):
        return True  # a unit the numbers carry: "a radius of 5cm"; "in kilometers"
    if isinstance(spec, dict) and names_a_month(name, spec, question):
        return True  # "the solar potential in December" for ``month``
    if isinstance(spec, dict) and described_switch(spec, question) is not None:
        return True  # "additional information like Director" for ``extra_info``
    if isinstance(spec, dict) and described_number(spec, question) is not None:
        return True  # "a 0.3 probability of winning" for ``p`` ("The probability of ...")
    if isinstance(spec, dict) and isinstance(spec.get("enum"), list):
        return any(cued(value, question) for value in spec["enum"])
    # an option its description lists, or an item its array takes, stated by the question:
    # "a single room" for room_type ("Options: 'single', ..."), "vegan" for a list of diets;
    # an option as the description writes it ("my bot" names no filter 'Bot'), of a list
    # (a single example shows a form: it does not ask for the parameter)
    options = listed_options(spec, question, exact_case=True, least=2)
    items = listed_items(spec, question, exact_case=True, least=2)
    return bool(options or items or cued_items(spec, question))


def _mentioned_with(properties: dict[str, Any], kept: set[str], question: str) -> set[str]:
    """The optional parameters that serve an enum value the question asks for: when
    ``operation`` is kept because "per region" cues its value ``groupby``, the parameters
    whose description names ``groupby`` (``group_by``, ``column``, ``agg``) come with it."""
    asked = {
        str(value).casefold()
        for name in kept
        for value in (
            properties[name].get("enum") or [] if isinstance(properties[name], dict) else []
        )
        if cued(value, question)
    }
    more = set()
    for name, spec in properties.items():
        description = str((spec or {}).get("description") or "").casefold()
        if name not in kept and any(
            re.search(rf"\b{re.escape(value)}\b", description) for value in asked
        ):
            more.add(name)
    return more


def args_schema(
    tool: ToolSpec, question: str, settings: ToolCallingSettings, *, optional: str = "mentioned"
) -> dict[str, Any]:
    """The schema the arguments of ``tool`` are generated under: bounded, and with the
    optional parameters the question does not mention removed (``optional="mentioned"``)."""
    params = grammar.bounded_schema(
        tool.parameters,
        max_string=settings.max_string_length,
        max_items=list_bound(question, settings.max_calls),
    )
    params = dict(params)
    params.setdefault("type", "object")
    properties = dict(params.get("properties") or {})
    required = list(params.get("required") or [])
    if optional == "mentioned":
        kept = {
            n for n, spec in properties.items() if n in required or _mentioned(n, spec, question)
        }
        kept |= _mentioned_with(properties, kept, question)
        properties = {name: spec for name, spec in properties.items() if name in kept}
    params["properties"] = properties
    params["required"] = [r for r in required if r in properties]
    params["additionalProperties"] = False
    params.pop("maxProperties", None)
    return params


_MAX_CANDIDATES = 48  # the default of tool_calling.staged.max_candidates


def capped(
    values: list[Any], cap: int, quoted: set[str] | frozenset[str] = frozenset()
) -> list[Any]:
    """At most ``cap`` of ``values`` (candidates in order of appearance), so that a long
    question does not cost hundreds of scored continuations: quoted passages and non-strings
    first, then strings by their number of words (every single word of the question before
    any pair of words; a name, every word capitalised, counts as one word: "Leonardo
    DiCaprio" was cut from a long question and "DiCaprio" chosen), ties in order of
    appearance; the kept ones in their original order."""
    if len(values) <= cap:
        return values

    def priority(item: tuple[int, Any]) -> tuple[int, int]:
        index, value = item
        if not isinstance(value, str) or value in quoted:
            return (0, index)
        words = value.split()
        if all(w[:1].isupper() for w in words):
            return (1, index)
        return (len(words), index)

    kept = sorted(sorted(enumerate(values), key=priority)[:cap])
    return [value for _, value in kept]


_WRITTEN_NUMBER = re.compile(r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w.]*\d)")


def _written_once(text: str, question: str) -> bool:
    """Whether ``text`` is a JSON number the question writes exactly once ("50", "50,000")."""
    try:
        number = json.loads(text)
    except json.JSONDecodeError:
        return False
    if isinstance(number, bool) or not isinstance(number, int | float):
        return False
    written = [
        m for m in _WRITTEN_NUMBER.finditer(question) if float(m.group().replace(",", "")) == number
    ]
    return len(written) == 1


def _is_date(value: Any, day: str | None) -> bool:
    """Whether ``value`` writes the date ``day`` (ISO), as it is or in words."""
    if not isinstance(value, str) or day is None:
        return False
    return value == day or iso_dates(value) == [day]


def _distinct_values(
    ranked: dict[str, list[tuple[str, float]]], question: str = ""
) -> dict[str, str]:
    """The chosen value text per parameter, no JSON string twice, nor a number ``question``
    writes once ("play 50 times, win exactly 15 times": trials 50, successes not 50 too): of
    two parameters with the same value, the one with the smaller lead over its next
    candidate takes that next one."""
    position = dict.fromkeys(ranked, 0)

    def value(name: str) -> str:
        return ranked[name][position[name]][0]

    def lead(name: str) -> float:
        options = ranked[name]
        i = position[name]
        return options[i][1] - options[i + 1][1] if i + 1 < len(options) else math.inf

    for _ in range(sum(len(r) for r in ranked.values())):
        clash = None
        names = list(ranked)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                if value(a) == value(b) and (
                    value(a).startswith('"') or _written_once(value(a), question)
                ):
                    clash = (a, b)
                    break
            if clash:
                break
        if clash is None:
            break
        loser = min(reversed(clash), key=lead)  # on a tie, the later parameter
        if lead(loser) == math.inf:
            break
        position[loser] += 1
    return {name: value(name) for name in ranked}


def _apart(values: dict[str, str], ranked: dict[str, list[tuple[str, float]]]) -> dict[str, str]:
    """No string value holds another parameter's: "La Liga 2020-2021" for the tournament when
    the season took "2020-2021" becomes "La Liga", where that rest is one of its candidates.
    A value the question writes with a comma is one value as written ("5 Elm St,
    Springfield" for an address beside its city) and stays."""
    texts = {name: _decoded(text) for name, text in values.items()}
    out = dict(values)
    for name, value in texts.items():
        if not isinstance(value, str) or "," in value:
            continue
        offered = {text for text, _ in ranked.get(name, [])}
        for other, part in texts.items():
            if other == name or not isinstance(part, str) or len(part) < 2 or part == value:
                continue
            match = re.search(rf"(?<!\w){re.escape(part)}(?!\w)", value)
            if match is None:
                continue
            rest = " ".join(f"{value[: match.start()]} {value[match.end() :]}".split())
            if rest and json.dumps(rest, ensure_ascii=False) in offered:
                out[name] = json.dumps(rest, ensure_ascii=False)
                break
    return out


@dataclass
class _Ranked:
    """A tool's similarity and BM25 to a text, as the selector's ranking gives them."""

    similarity: float
    bm25: float


@dataclass
class _Stage:
    completion_tokens: int = 0
    prompt_tokens: int = 0


class StagedEngine:
    """Runs the stages for one attempt of one decision."""

    def __init__(
        self,
        backend: Backend,
        request: GenerationRequest,
        tools: list[ToolSpec],
        selection: Selection | None,
        settings: ToolCallingSettings,
        *,
        purpose: str,
        has_results: bool,
        question: str,
        results: list[Any] | None = None,
        done: set[str] | None = None,
        deadline: float | None = None,
    ) -> None:
        self.backend = backend
        self.request = request
        self.tools = {t.name: t for t in tools}
        self.order = [t.name for t in tools]
        self.selection = selection
        self.settings = settings
        self.staged = settings.staged
        self.purpose = purpose
        self.has_results = has_results
        self.question = question
        self.results = results or []
        self.done = done or set()
        self.clauses = clauses(question)
        # the sentence a request of several opens with: its first call's values come first
        # (of a request in parts among several tools: one tool's parts are its one call's)
        several = len(self.clauses) > 1 and len(self.tools) > 1
        self._opening = opening_part(question) if several else None
        self.covered: set[int] = set()
        self._source = question
        self.usage = _Stage()
        self.reused: dict[str, int] = {}
        self.scored = 0
        self.capped = 0  # the most candidates one value had before the cap
        self.trace: dict[str, Any] = {}
        self._last: Completion | None = None
        self._cut: str | None = None
        self._param_name = ""
        # a candidate value → the words the question writes it in, where they differ
        # ("EUR" ← "euros"): where from and where to are read from those words
        self._written: dict[Any, str] = {}
        self.deadline = deadline  # time.perf_counter() value after which the decision stops
        self._per_continuation = 0.0  # seconds per scored continuation, last measured
        # seconds per generated token: measured by this decision's generations, until then
        # the pace of the backend's last generation in this process (else scoring's)
        self._per_token = _pace(backend)
        self._generated = self._per_token > 0  # whether _per_token is a generation's pace
        self.stage = "answer or call"
        self.found: list[dict[str, Any]] = []  # the calls completed so far
        self._ranked: dict[str, list[tuple[str, float]]] = {}  # the last call's values, best first
        self.pending: dict[str, Any] | None = None  # the call being filled
        self._later: list[Any] = []  # values stated after those of the calls so far
        # tool name → fillable: the question, results and calls done are fixed for the
        # engine's life, and stage 1, the answer filter and stage 3 all ask
        self._fillable: dict[str, bool] = {}

    def _timeout(self, *, inside: bool = False) -> DecisionTimeout:
        self.trace["continuations_scored"] = self.scored
        if self.capped:
            self.trace["candidates_capped"] = self.capped
        return DecisionTimeout(
            self.stage,
            list(self.found),
            self.pending,
            json.loads(json.dumps(self.trace)),
            inside=inside,
        )

    def _check_time(self) -> None:
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise self._timeout()

    # -- stages -------------------------------------------------------------------------

    def _score(self, prefix: str, continuations: list[str]) -> list[float]:
        self._check_time()
        started = time.perf_counter()
        try:
            scores = self.backend.score(replace(self.request, prefix=prefix), continuations)
        except BackendDeadline:  # the backend stopped inside the step at the hard deadline
            raise self._timeout(inside=True) from None
        if continuations and prefix:  # without a prefix the time is the prompt's reading
            spent = time.perf_counter() - started
            self._per_continuation = spent / len(continuations)
            if not self._generated:  # the pace per token until a generation measures it
                tokens = sum(max(1, len(c) // 4) for c in continuations)
                self._per_token = spent / tokens
        seen = getattr(self.backend, "last_score", None) or {}
        if not prefix and seen:  # the prompt itself, before any part of the reply
            self.usage.prompt_tokens = max(self.usage.prompt_tokens, seen["prompt_tokens"])
            self.reused.setdefault("reused_prompt_tokens", seen["reused_prompt_tokens"])
        self.scored += len(continuations)
        return scores

    def _generate(
        self,
        prefix: str,
        schema: dict[str, Any],
        max_tokens: int,
        suffix: str = "",
        messages: list[dict[str, Any]] | None = None,
    ) -> Completion:
        """A generation after ``prefix`` under ``schema``, from the decision's prompt (or
        from ``messages`` instead)."""
        self._check_time()
        limit = min(self.request.settings.max_new_tokens, max_tokens)
        shortened = False
        if self.deadline is not None and self._per_token > 0:
            # a generation is not interrupted: it gets the tokens the time left allows (at
            # the pace of the last generation; a scored continuation costs more than a token)
            fit = int((self.deadline - time.perf_counter()) / self._per_token)
            if fit < limit:
                limit, shortened = max(1, fit), True
        settings = self.request.settings.model_copy(update={"max_new_tokens": limit})
        started = time.perf_counter()
        try:
            completion = self.backend.generate(
                replace(
                    self.request,
                    messages=self.request.messages if messages is None else messages,
                    prefix=prefix,
                    response_schema=schema,
                    response_suffix=suffix,
                    settings=settings,
                )
            )
        except BackendDeadline:
            raise self._timeout(inside=True) from None
        if completion.completion_tokens:
            self._per_token = (time.perf_counter() - started) / completion.completion_tokens
            self._generated = True
            _set_pace(self.backend, self._per_token)
        if shortened and completion.finish_reason == "length":
            self.trace["continuations_scored"] = self.scored
            self.trace["stopped_generation"] = completion.text
            raise DecisionTimeout(
                f"{self.stage} (generation shortened to {limit} tokens by the time budget)",
                list(self.found),
                self.pending,
                json.loads(json.dumps(self.trace)),
            )
        self.usage.completion_tokens += completion.completion_tokens or 0
        self.usage.prompt_tokens = max(self.usage.prompt_tokens, completion.prompt_tokens or 0)
        self._last = completion
        return completion

    def call_margin(self) -> dict[str, float]:
        """Stage 1: the features and the margin of calling (> 0) over answering. Before
        any result, the similarity and BM25 are those of the offered tools that can be
        filled (``fillable``)."""
        call, answer = self._score("", [CALL_OPENING, ANSWER_OPENING])
        s = self.staged
        similarity = bm25 = 0.0
        if self.selection is not None and self.has_results:
            # once results are in: how close the question is to what has not been done yet
            similarity = self.selection.similarity_uncalled
            bm25 = self.selection.bm25(uncalled=True)
        elif self.selection is not None:
            # before: to a tool the run could call. A tool whose required values the
            # question does not hold is no reason to call ("How many days are in a week?"
            # is close to the weather skill's forecast, which needs a place)
            fillable = {name for name in self.order if self.fillable(name)}
            similarity = self.selection.similarity_among(fillable)
            bm25 = self.selection.bm25(among=fillable)
        lm = call - answer
        # checkable signals, of the question only: once results are in, the request that
        # named the file or the tool has been acted on
        signals = {} if self.has_results else question_signals(self.question, self.tools.values())
        if not self.has_results:
            signals["arithmetic"] = self._states_arithmetic()
        if self.has_results:
            # ...except a computation with a value the results now hold ("then multiply
            # that number by 3") that no tool has done yet
            signals = {"follow_up": bool(self._follow_up_tools())}
        signal = float(any(signals.values()))
        margin = (
            s.lm_weight * lm
            + s.similarity_weight * (similarity - s.similarity_center)
            + s.bm25_weight * bm25
            + s.signal_weight * signal
            + s.call_bias
            + (s.results_bias if self.has_results else 0.0)
        )
        return {
            "lm": lm,
            "similarity": similarity,
            "bm25": bm25,
            "signal": signal,
            **{f"signal_{k}": float(v) for k, v in signals.items()},
            "margin": margin,
        }

    def _the_model_s_own(self) -> str | None:
        """``"definition"`` when the question only asks what something is or means
        (``asks_a_definition``), ``"writing"`` when it asks for a piece of writing
        (``asks_for_writing``), with none of the checkable signals of a call: it names no
        file a tool takes, asks for no tool, names none, states no computation, and no
        result is in. What the model answers from its own knowledge or composes itself."""
        if self.has_results:
            return None
        kind = (
            "definition"
            if asks_a_definition(self.question)
            else "writing"
            if asks_for_writing(self.question)
            else None
        )
        if kind is None:
            return None
        signals = question_signals(self.question, self.tools.values())
        return None if any(signals.values()) or self._states_arithmetic() else kind

    def _next_tool_after(self, name: str, passed_over: list[str]) -> bool:
        """Whether, the first call of this reply having repeated a done call of ``name``,
        another tool is tried: the question asks for a tool's step after another ("...,
        then read the file you find": ``asks_a_tool_step``; "..., then tell me what it
        says" asks for the answer) or the repeated call read a skill's instructions (the
        skill's own tools come after: ``INSTRUCTION_TOOLS``), this is the first tool passed
        over, and another tool can be filled from the question and the results."""
        return (
            not passed_over
            and (name in INSTRUCTION_TOOLS or asks_a_tool_step(self.question))
            and any(n != name and self.fillable(n) for n in self.order)
        )

    def _states_arithmetic(self) -> bool:
        """Whether a calculator is on offer and the question states its computation: a
        formula ("144 divided by 12", "9 乘以 12") or a word problem that asks how many or
        how much of two numbers ("A crate holds 35 bottles. How many bottles fit in 8
        crates?"). Both were answered from the model's memory with invented numbers."""
        if not any(does_arithmetic(tool) for tool in self.tools.values()):
            return False
        if any(not _JOINED_NUMBERS.match(f) for f in formula_candidates(self.question)):
            return True
        return bool(word_problem_candidates(self.question)) and bool(
            _HOW_MUCH.search(self.question)
        )

    def _clause_ranking(self, text: str) -> dict[str, Any]:
        ranking, _ = default_selector().rank(text, list(self.tools.values()))
        return {t.name: t for t in ranking}

    def _follow_up_tools(self) -> list[str]:
        """The tools that take an expression, when the question computes with a value the
        results hold ("read notes.txt..., then add 5 to it": ``5 + 20``) and no call of
        this turn has computed it yet; empty otherwise."""
        if not self.has_results:
            return []
        results = [json.dumps(r, ensure_ascii=False) for r in self.results]
        formulas = follow_up_candidates(self.question, results)
        if not formulas or any(json.dumps(f) in key for key in self.done for f in formulas):
            return []
        return [name for name, tool in self.tools.items() if _computes(tool)]

    def _follow_up_done(self) -> bool:
        """Whether the question's last step, a computation with a value the results hold
        ("..., then add 7 to that number"), has been made in this turn: the request is
        done, and another call would only bury its result."""
        if not self.has_results or not refers_back(self.question):
            return False
        results = [json.dumps(r, ensure_ascii=False) for r in self.results]
        formulas = follow_up_candidates(self.question, results)
        return any(json.dumps(f) in key for key in self.done for f in formulas)

    def _nothing_next(self) -> bool:
        """Whether, every call of the turn having succeeded, the question asks for nothing
        after them: no computation with their values (``_follow_up_tools``), no word of a
        further step ("then", "and read it": ``asks_a_next_step``), and no call of a tool
        that gives instructions to follow (``read_skill``: "then run the skill's scripts").
        "Open notes.txt and tell me the time of the quarterly review" called
        ``get_current_datetime`` after the read, "Find the file that mentions where the
        sales table is kept" ``table_analyzer`` after the search; a failed call may still
        be followed by another way."""
        if not self.has_results or len(self.done) < len(self.results):
            return False
        if self._follow_up_tools() or asks_a_next_step(self.question):
            return False
        called = {key.split(" ", 1)[0] for key in self.done}
        return not any(
            _INSTRUCTIONS.search(self.tools[name].description)
            for name in called
            if name in self.tools
        )

    def tool_scores(self, prefix: str, focus: str | None = None) -> dict[str, dict[str, float]]:
        """Stage 2: per tool, the model's log-probability of its name (normalised over the
        candidates), the similarity and BM25 to the question (or to the part of it still to
        do, ``focus``), and the fused score."""
        names = self.order
        lm = _log_softmax(self._score(prefix, [name + '"' for name in names]))
        if focus is not None:
            scored = self._clause_ranking(focus)
        elif self.selection:
            scored = {t.name: t for t in self.selection.ranking}
            if len(self.clauses) > 1 and not self.has_results:
                # the first call of a request in parts is about its first part as much as
                # about the whole ("the capital of Australia, the population of Canada, and
                # the largest city in Brazil" called largest_city first, then again)
                first = self._clause_ranking(self.clauses[0])
                top = [
                    max((r.bm25 for r in t.values()), default=0.0) or 1.0 for t in (scored, first)
                ]
                scored = {
                    name: _Ranked(
                        (ranked.similarity + first[name].similarity) / 2,
                        (ranked.bm25 / top[0] + first[name].bm25 / top[1]) / 2,
                    )
                    for name, ranked in scored.items()
                    if name in first
                }
        else:
            scored = {}
        top_bm25 = max((scored[n].bm25 for n in names if n in scored), default=0.0)
        s = self.staged
        # a file the question names is a checkable signal for the tools that read that kind of
        # file, as in stage 1: before any result (then the file has been acted on)
        files = [] if self.has_results else names_a_file(self.question)
        # after results, the computation the question still asks for ("then add 5 to it")
        # is the signal, for the tools that compute
        signalled = set(self._follow_up_tools())
        # before results, a computation the question states is the signal for the
        # calculator ("How many bottles fit in 8 crates?" ranked count_letter_in_string first)
        if not self.has_results and self._states_arithmetic():
            signalled |= {n for n, tool in self.tools.items() if does_arithmetic(tool)}
        # a tool the part of the request this call is about names ("..., then the time
        # difference using the 'timezones.get_difference' function"); the first part for
        # the first call
        part = focus if focus is not None else (self.clauses[0] if self.clauses else "")
        signalled |= set(names_a_tool(part, self.tools.values()))
        # "Is there a file in the workspace that talks about the weather?" is for the tool
        # that searches files, not the weather skill's
        if not self.has_results:
            signalled |= set(file_searches(part or self.question, self.tools.values()))
        # a question about the present passes over the siblings of a tool about the present
        # ("What's the weather in London right now?": weather_forecast_forecast, whose
        # description says more about weather, beside weather_forecast_current), before
        # results and after them (the skill read first, the call still to make)
        passed_over = set(siblings_of_now(part or self.question, self.tools.values()))
        out = {}
        for name, lm_score in zip(names, lm, strict=True):
            ranked = scored.get(name)
            similarity = ranked.similarity if ranked else 0.0
            bm25 = ranked.bm25 / top_bm25 if ranked and top_bm25 > 0 else 0.0
            fillable = self.fillable(name)
            file = float(
                (bool(files) and fits_the_file(self.tools[name], files)) or name in signalled
            )
            fused = (
                s.name_lm_weight * lm_score
                + s.name_similarity_weight * similarity
                + s.name_bm25_weight * bm25
                + s.name_file_weight * file
                - (0.0 if fillable else s.name_unfillable_weight)
                - (s.name_file_weight if name in passed_over else 0.0)
            )
            out[name] = {
                "lm": lm_score,
                "similarity": similarity,
                "bm25": bm25,
                "file": file,
                "fillable": fillable,
                "fused": fused,
            }
        return out

    def fillable(self, name: str) -> bool:
        """Whether every required parameter of tool ``name`` can take a value the run
        holds: one that wants a path, e-mail, URL or date (by its name or declared format)
        a value of that shape in the question or this turn's tool results ("Which file
        mentions the review?" names no file), one that wants a number (or a list of them)
        a number there ("What type of personality am I?" gives no answers to score), and
        several such numbers as many stated numbers; an expression a number in the question
        (or, after results, the follow-up computation it asks for); a place (``city``,
        ``location``) a name that can be one (``places.names_a_place``); a person
        (``player``, ``author``) a name that can be one (``candidates.names_a_person``); a
        season or year written as text a year, a season or "this season"
        (``states_a_period``); a secret (``password``, ``api_key``) a stated value that
        can be one (``states_a_secret``). A tool that does
        the opposite of what each part of the question asks ("log out" beside ``login``:
        ``contrasts.contradiction``) can be filled with nothing."""
        if name not in self._fillable:
            self._fillable[name] = self._can_fill(name)
        return self._fillable[name]

    def _can_fill(self, name: str) -> bool:
        tool = self.tools.get(name)
        if tool is None:
            return True
        if self.clauses and all(contradiction(part, tool) for part in self.clauses):
            # "multiply 8.5 and 3.2" beside calculate_sum: no value makes it what was asked
            # (each part of a request: "the area under the curve ..., and the derivative
            # at x=3" leaves the integral to its first part)
            return False
        if not self.results and _computes(tool) and refers_back(self.question):
            # "then multiply that number by 3": the number comes from a result not in yet
            return False
        properties = tool.parameters.get("properties") or {}
        required = tool.parameters.get("required") or []
        sources = [self.question, *(s for r in self.results for s in leaf_strings(r))]
        # one stated number for each number it takes: calculateFinalPrice(price,
        # discount_rate, sales_tax) has no price in "the final price after a 25% discount
        # and 10% sales tax" (the same number may fill two: "2 bedrooms and 2 bathrooms")
        numbers = [p for p in required if wants_a_number(properties.get(p) or {})]
        if len(numbers) > 1 and sum(map(stated_numbers, sources)) < len(numbers):
            return False
        for param in required:
            spec = properties.get(param) or {}
            if wants_numbers(spec) and not any(
                [*text_numbers(source), *number_candidates(source)] for source in sources
            ):
                return False
            if (
                wants_expression(param, spec)
                and does_arithmetic(tool)
                and not [*text_numbers(self.question), *number_candidates(self.question)]
                and not self._follow_up_tools()
            ):
                # "What is the calculator for?" asks about it: nothing to compute
                return False
            declared = (
                spec.get("format") if spec.get("format") in ("email", "date", "uri") else None
            )
            shape_name = declared or next(
                (shape for shape, words in FORMAT_WORDS if words.search(name_words(param))), None
            )
            shape = FORMATS.get(shape_name or "")
            if value_kinds(spec) - {"string", "null"} or "enum" in spec:
                continue
            if wants_a_secret(param) and not any(map(states_a_secret, sources)):
                # "I've forgotten my password. Could you help me log in?": a password
                # nobody gave would be invented
                return False
            if shape is None:
                # a place is named: "How many days are in a week?" and "I need help
                # looking for a bus" give a location nothing but an invented value
                if wants_a_place_name(param) and not any(map(names_a_place, sources)):
                    return False
                # so is a person ("Who won the chess tournament in 2015?" has no player)
                # and a season ("the assist average of LeBron James" has none)
                if wants_a_person_name(param) and not any(map(names_a_person, sources)):
                    return False
                if wants_a_period(param, spec) and not any(map(states_a_period, sources)):
                    return False
                continue
            spans = [v for source in sources for v in text_spans(source)]
            if shape_name == "date":  # "March 10th, 2023" is a date, as "2023-03-10"
                spans += [d for source in sources for d in iso_dates(source)]
                spans += relative_dates(self.question)[0]
            if not any(
                isinstance(v, str)
                and shape.search(v)
                # a path the tool can read: table_analyzer does not take notes.txt
                and (shape_name != "path" or fits_the_file(tool, [v]))
                for v in spans
            ):
                return False
        return True

    def continue_evidence(
        self, prefix: str, called: set[str], args: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """Stage 4: the model's log-probability of opening another call minus closing the
        list; the best similarity between a part of the request no call has used yet and a
        tool not called in this reply (``pending``); whether such a part is a bare item of a
        list (``listed``: "…of GOOG, AMZN and META" after the call for GOOG); whether the
        question states values of the kinds the calls took after the last one they used and
        no call has used yet, or marked like a used one anywhere (``later``: "the factorial
        of 5, the factorial of 7" after the call for 5; ``candidates.sibling_values``), and
        whether such a value follows the same word as a used one (``cued``: both after
        "factorial"); whether, with such values, the question has a word that asks again
        (``again``: "another flight", "also list", "respectively"; ``asks_again``).
        ``args``: the arguments of this reply's calls (default: those found)."""
        if args is None:
            args = [c["args"] for c in self.found if isinstance(c.get("args"), dict)]
        # a value the question writes in other words has used those words ("EUR" used
        # "euros"): they are no value stated later
        args = [
            *args,
            *(
                {"as_written": self._written[v]}
                for a in args
                for v in a.values()
                if isinstance(v, str) and v in self._written
            ),
        ]
        values = later_values(self.question, args, self.tools)
        # and those marked like a used one wherever they stand ("Pop song ... Rock song in
        # Australia" after the call for Pop in Australia)
        values += [v for v in sibling_values(self.question, args) if v not in values]
        later = 1.0 if values else 0.0
        cued = 1.0 if values and cued_again(self.question, args, values) else 0.0
        again = 1.0 if values and asks_again(self.question) else 0.0
        more, stop = self._score(prefix, [_NEXT_CALL, _END_CALLS])
        remaining = [i for i in range(len(self.clauses)) if i not in self.covered]
        pending = 0.0
        listed = 0.0
        closest = remaining[0] if remaining else None  # the part pending comes from
        if len(self.clauses) > 1:
            for i in remaining:
                ranking = self._clause_ranking(self.clauses[i])
                other = [t.similarity for n, t in ranking.items() if n not in called]
                if max(other, default=0.0) > pending:
                    pending = max(other)
                    closest = i
                if len(re.findall(r"\w+", self.clauses[i])) <= 2:
                    listed = 1.0
        s = self.staged
        margin = (
            s.continue_lm_weight * (more - stop)
            + s.continue_clause_weight * pending
            + s.continue_list_weight * listed
            + s.continue_later_weight * later
            + s.continue_cue_weight * cued
            + s.continue_again_weight * again
            + s.continue_bias
        )
        return {
            "lm": more - stop,
            "pending": pending,
            "listed": listed,
            "later": later,
            "cued": cued,
            "again": again,
            "later_values": values,
            "margin": margin,
            "remaining": remaining,
            "closest": closest,
        }

    def cover(self, args_text: str) -> None:
        """Mark the parts of the request this call's argument values come from as done (the
        first open part when none matches)."""
        try:
            args = json.loads(args_text)
        except json.JSONDecodeError:
            args = {}
        # a number as written, a name ignoring case: 5 is not stated by "15cm"
        values = [
            v
            for v in args.values()
            if isinstance(v, str | int | float) and not isinstance(v, bool) and str(v).strip()
        ]
        counts = {
            i: sum(1 for v in values if states_any(clause, [v]))
            for i, clause in enumerate(self.clauses)
            if i not in self.covered
        }
        best = max(counts.values(), default=0)
        hit = {i for i, n in counts.items() if n == best and n > 0}
        if not hit:
            hit = {next((i for i in range(len(self.clauses)) if i not in self.covered), 0)}
        self.covered |= hit

    def answer(self) -> Completion:
        budget = self.request.settings.max_new_tokens
        schema = grammar.reply_schema([], settings=self.settings, max_new_tokens=budget)
        if self.has_results or not only_social(self.question):
            return self._generate("", schema, budget)
        # a message that only thanks or greets is answered from itself: the tools and
        # skills of the system prompt are nothing to reply to ("Thank you, that was
        # helpful!" was answered with the weather skill's description, development task m10)
        self.trace["social_prompt"] = True
        social = [
            {"role": "system", "content": load_template("social").strip()},
            {"role": "user", "content": "Thanks a lot!"},  # one turn shows the reply's kind
            {"role": "assistant", "content": '{"content": "You\'re welcome, glad to help!"}'},
            {"role": "user", "content": self.question},
        ]
        return self._generate("", schema, budget, messages=social)

    # -- stage 3: arguments ------------------------------------------------------------

    def value_candidates(self, spec: dict[str, Any], used: list[Any]) -> list[Any] | None:
        """The values a parameter may take, to be scored; None: generate it under its schema.

        Enums and booleans offer their values; strings the spans of the question and the
        short strings of this turn's tool results; numbers the numbers found there. A value
        already given to another parameter of the call comes last (origin != destination).
        """
        if "const" in spec:
            return [spec["const"]]
        if isinstance(spec.get("enum"), list) and spec["enum"]:
            return list(spec["enum"])
        kinds = value_kinds(spec)
        sources = [self._source, *(s for r in self.results for s in leaf_strings(r))]
        if self._source != self.question:
            sources.append(self.question)
        expression = wants_expression(self._param_name, spec)
        tool = self.tools.get((self.pending or {}).get("name", ""))  # the call being filled
        values: list[Any] = []
        options = listed_options(spec, self.question)
        if kinds == {"boolean"}:
            values = [True, False]
        elif kinds and kinds <= {"string", "null"}:
            for source in sources:
                values += [v for v in text_spans(source) if v not in values]
            # "19th century", not "19th" (candidates.bare_ordinals); "Apple Inc.", not
            # "Apple" (candidates.whole_names); "gas" of "gas-fueled"
            said = f"{self._param_name} {spec.get('description') or ''}"
            if tool is not None:
                said += f" {name_words(tool.name)} {tool.description}"
            values = whole_names(
                bare_ordinals(values), "\n".join(sources), re.findall(r"[^\W_]+", said)
            )
            if tool is not None:
                # "Safeway" is no location for safeway.order (candidates.not_the_tool)
                values = not_the_tool(values, tool.name, self._param_name)
            values += [h for s in sources for h in compound_heads(s) if h not in values]
            if takes_a_condition(self._param_name, spec):
                # "the rows where the region is West": region == "West", first
                stated = stated_conditions(self.question)
                values = [*stated, *(v for v in values if v not in stated)]
            if expression:
                # "2.5 times 40" offered as "2.5 * 40" too (lokal.llm.staged.candidates)
                values += [f for s in sources for f in formula_candidates(s) if f not in values]
                # "then multiply that number by 3" after a read: 20 * 3; a word problem with
                # two numbers and no operator: "7 boxes with 13 pens each" → 7 * 13
                results = [json.dumps(r, ensure_ascii=False) for r in self.results]
                values += [
                    f
                    for f in follow_up_candidates(self.question, results)
                    or word_problem_candidates(self.question)
                    if f not in values
                ]
            if asks_city_state(spec):
                # "in the format of 'City, State'": "Chicago" is offered as "Chicago, IL"
                # (lokal.llm.places), the bare name no longer
                values = [
                    f
                    for v in values
                    for f in ((isinstance(v, str) and city_state_forms(v, spec)) or [v])
                ]
                values = list(dict.fromkeys(values))
            if inferred_format(self._param_name, spec) == "date":
                # "March 10th, 2023" offered as "2023-03-10" too (lokal.llm.staged.candidates)
                values += [d for s in sources for d in iso_dates(s) if d not in values]
                # "the upcoming Saturday? Today is Tuesday April 25th 2023": that Saturday,
                # first; the date of today is what it counts from, no value of its own
                later, today = relative_dates(self.question)
                if later:
                    values = [
                        *later,
                        *(v for v in values if v not in later and not _is_date(v, today)),
                    ]
                form = date_form(str(spec.get("description") or ""))
                if form is not None:
                    # "in the format DD/MM/YYYY": "2024-03-16" as "16/03/2024"
                    values = list(
                        dict.fromkeys(
                            in_date_form(v, form) if isinstance(v, str) else v for v in values
                        )
                    )
            # an option the description lists, as it spells it: 'gas' for "gas-powered"
            values += [o for o in options if o not in values]
            # "at 5:30 pm" for a time: "17:30" (candidates.clock_times)
            values += [
                t for t in clock_times(self._param_name, spec, self.question) if t not in values
            ]
            if wants_currency(self._param_name, spec):
                # "200 euros" for a currency: "EUR" (lokal.llm.currencies)
                for code, words in currency_codes(" ".join(sources)):
                    self._written[code] = words
                    if code not in values:
                        values.append(code)
        elif kinds and kinds <= {"number", "integer", "null"}:
            for source in sources:
                # digits first, then the normalised forms: "three" → 3, "5%" → 0.05, "9.8
                # m/s^2" → 9.8, "dropped" → 0 (lokal.llm.staged.candidates)
                for number in [*text_numbers(source), *number_candidates(source)]:
                    if "integer" in kinds and "number" not in kinds and not isinstance(number, int):
                        continue
                    if number not in values:
                        values.append(number)
            # "until at least 11 PM" for an hour counted in 24: 23, not 11 (the hour as the
            # question writes it is another time of day for such a parameter)
            hours = clock_times(self._param_name, spec, self.question)
            values = [
                *hours,
                *(
                    v
                    for v in values
                    if v not in hours and not (isinstance(v, int) and v + 12 in hours)
                ),
            ]
            values = percent_form(self._param_name, spec, values, " ".join(sources))
            # a number the question writes once that an earlier call of this reply gave to
            # another parameter is that one's value ("invested $8000 in Microsoft" made 8000
            # the next call's expected return)
            given = {
                value
                for call in self.found
                for key, value in (call.get("args") or {}).items()
                if key != self._param_name
                and isinstance(value, int | float)
                and not isinstance(value, bool)
            }
            values = [
                v
                for v in values
                if not (v in given and _written_once(json.dumps(v), self.question))
            ] or values
            # "213 million" is 213000000, not 213, unless the parameter counts in millions
            said = f"{self._param_name} {spec.get('description') or ''}"
            if not _SCALE_NAMED.search(said):
                away = [v for s in sources for v in scaled_away(s)]
                values = [v for v in values if v not in away] or values
        elif kinds and kinds <= {"array", "null"}:
            # a list the question writes out, whole (the model's own list stopped early);
            # items that do not fit the schema fail its check below
            values = [v for s in sources[:1] for v in list_candidates(s)]
            if self._source != self.question:
                values += [v for v in list_candidates(self.question) if v not in values]
            # the items of an enum the question names: ["Personal Info", "Job History"]
            asked = cued_items(spec, self._source) or cued_items(spec, self.question)
            if asked and asked not in values:
                values.insert(0, asked)
            # the options its description lists that the question states: ["vegan"]
            stated = listed_items(spec, self.question)
            if stated and stated not in values:
                values.append(stated)
            # an order's items and their quantities: "two Big Macs and one McFlurry" gives
            # ["Big Macs", "McFlurry"] (and "Big Mac") or [2, 1] (candidates.counted_items)
            counted = counted_items(self._source) or counted_items(self.question)
            if counted:
                names = [name for _, name in counted]
                item_kinds = value_kinds(spec.get("items") or {})
                if item_kinds & {"integer", "number"}:
                    values.append([count for count, _ in counted])
                elif item_kinds & {"string"}:
                    values += [v for v in (names, singular_names(names)) if v not in values]
            if not values:
                return None
        else:
            return None
        checker = schema_validator(spec)
        values = [v for v in values if checker.is_valid(v)]
        shape = FORMATS.get(inferred_format(self._param_name, spec) or "")
        if shape is not None and any(isinstance(v, str) and shape.search(v) for v in values):
            # a path, e-mail, date or URL parameter takes only values of that shape
            values = [v for v in values if isinstance(v, str) and shape.search(v)]
        if UNIT_NAME.search(self._param_name) and kinds <= {"string", "null"}:
            # a unit is a unit ("units", "cm", "meters"), not the number or the word beside
            # it ("10", "height"); the units the numbers carry are offered ("5cm": "cm")
            values += [u for u in stated_units(self.question) if u not in values]
            values = [v for v in values if isinstance(v, str) and is_unit(v)] or values
        # a tool's name is no argument: "use the 'run_linear_regression' function" names
        # the tool, not its target; "using the 'geodistance.find' function" is no city
        names = {n.casefold() for n in self.tools}
        values = [v for v in values if not (isinstance(v, str) and v.casefold() in names)]
        if wants_a_place(self._param_name) and kinds <= {"string", "null"}:
            # a place is no amount, number, date or time ("$300" for a city), nor holds the
            # tool's own thing ("Safeway in Palo Alto" for safeway.order's location)
            values = [v for v in values if not is_no_place(v)] or values
            if tool is not None:
                values = [
                    v for v in values if not names_the_tool(v, tool.name, self._param_name)
                ] or values
        if tool is not None and inferred_format(self._param_name, spec) == "path":
            # a table tool takes the table the question names, not the notes beside it
            values = [v for v in values if fits_the_file(tool, [str(v)])] or values
        if tool is not None and wants_a_query(self._param_name):
            # a search looks for the question's topic, not for "file" or "workspace"
            said = {
                w.lower()
                for w in re.findall(r"[^\W_]+", f"{name_words(tool.name)} {tool.description}")
            }
            values = [v for v in values if not isinstance(v, str) or is_a_topic(v, said)] or values
            # a Chinese request's topic, not its whole clause: "在工作区里找出提到团队出游的文件"
            # looks for 团队出游 (lokal.glosses.chinese_topic); not 文件, which the tool
            # names ("file")
            topics = [t for t in chinese_topic(self.question) if not names_the_tool_in(t, said)]
            if len(topics) > 1:  # "销售表的位置": the whole topic, and each part
                topics.insert(0, " ".join(topics))
            if topics:
                values = [*topics, *(v for v in values if v not in topics and not is_chinese(v))]
            # what the file is asked to mention: "Find the file that mentions the quarterly
            # review and tell me what time it starts" looks for "quarterly review", not for
            # "time" (the model's likelier word)
            topic = mentioned_topic(self.question)
            if topic and is_a_topic(topic, said) and not topics:
                values = [topic, *(v for v in values if v != topic)]
        if expression and any(isinstance(v, str) and is_expression(v) for v in values):
            # an expression parameter takes whole expressions when the question states one:
            # "2.5" is a number of "2.5 * 40", not the calculation asked for
            whole = [v for v in values if isinstance(v, str) and is_expression(v)]
            # and the longest: "144 / 12" is a part of "144 / 12 - 3", not what was asked
            values = [v for v in whole if not any(v != w and v in w for w in whole)]
        cap = getattr(self.staged, "max_candidates", _MAX_CANDIDATES)
        if len(values) > cap:
            quoted = (
                {g for source in sources for m in QUOTED.finditer(source) for g in m.groups() if g}
                | set(options)
                | set(self._written)
            )
            self.capped = max(self.capped, len(values))
            values = capped(values, cap, quoted)
        fresh = [v for v in values if v not in used]
        return fresh + [v for v in values if v in used]

    def choose_value(
        self, prefix: str, spec: dict[str, Any], tail: str, used: list[Any]
    ) -> tuple[list[tuple[str, float]], dict[str, Any]]:
        """The JSON texts one argument value may take, best first with their scores: the
        candidates by likelihood (the model's own greedy value under the schema competes as
        one more candidate), or the generated value alone; and the trace."""
        candidates = self.value_candidates(spec, used)
        texts = [json.dumps(v, ensure_ascii=False) for v in candidates or []]
        own = ""
        if candidates is None or not texts or self.staged.generated_values:
            budget = min(_MAX_VALUE_TOKENS, self.request.settings.max_new_tokens)
            fitted = grammar.fit_schema(
                spec,
                budget,
                max_string=self.settings.max_string_length,
                max_items=list_bound(self.question, self.settings.max_calls),
            )
            free = self._generate(prefix, fitted, budget, suffix=tail)
            own = free.text[: -len(tail)] if free.text.endswith(tail) else free.text
            own = own.strip()
            if candidates is None or not texts:
                if free.finish_reason in ("length", "repetition"):
                    self._cut = free.finish_reason
                return [(own, 0.0)], {"generated": own, "finish_reason": free.finish_reason}
            if own and own not in texts and free.finish_reason not in ("length", "repetition"):
                texts.append(own)
        scores: list[float] = []
        while len(scores) < len(texts):  # in chunks, the time budget checked between
            size = _SCORE_CHUNK
            if self.deadline is not None and self._per_continuation > 0:
                # no chunk that would run far past the deadline: what fits, at least one
                left = self.deadline - time.perf_counter()
                size = max(1, min(size, int(left / self._per_continuation)))
            chunk = texts[len(scores) : len(scores) + size]
            scores += self._score(prefix, [t + tail for t in chunk])
        weight = self.staged.value_length_weight
        adjusted = [
            s + weight * math.log(max(1, len(t))) for s, t in zip(scores, texts, strict=True)
        ]
        if isinstance(spec.get("enum"), list):
            # an enum value the question asks for in its own words ("per region": groupby)
            # comes before the others; the model's likelihood orders each group. Where the
            # question asks for several, one an earlier call of this tool took waits for
            # the others, as listed options do ("the Euclidean algorithm ... this time the
            # binary algorithm" gave Euclidean twice: BFCL parallel_multiple_85)
            asked = [
                i
                for i, value in enumerate(_decoded(text) for text in texts)
                if value is not None and cued(value, self.question)
            ]
            before = self._taken_before()
            fresh = [i for i in asked if _decoded(texts[i]) not in before]
            for i in fresh or asked:
                adjusted[i] += CUE_BONUS
        elif value_kinds(spec) - {"null"} == {"string"}:
            # "units for each product": group_by "product", column "units", whatever the
            # model's likelihood of "row" or "region" (lokal.llm.staged.candidates.column_cue)
            column = column_cue(self._param_name, self.question)
            # an option the description lists and the question states: 'single' of
            # "Options: 'single', 'double'" in "a single room", as for an enum value; not
            # one an earlier call of this reply took ("e.g. HSBC" for HSBC, then Wells Fargo)
            taken = [v for c in self.found for v in (c.get("args") or {}).values()]
            cues = {
                json.dumps(o, ensure_ascii=False)
                for o in listed_options(spec, self.question)
                if o not in taken
            }
            if column is not None:
                cues.add(json.dumps(column).casefold())
            if takes_a_condition(self._param_name, spec):  # stated in words, as an option
                cues |= {json.dumps(c).casefold() for c in stated_conditions(self.question)}
            topic = mentioned_topic(self.question) if wants_a_query(self._param_name) else None
            if topic:  # what a file is asked to mention, as a stated option
                cues.add(json.dumps(topic, ensure_ascii=False).casefold())
            for i, text in enumerate(texts):
                if text in cues or text.casefold() in cues:
                    adjusted[i] += CUE_BONUS
        elif value_kinds(spec) - {"null"} and value_kinds(spec) - {"null"} <= {"number", "integer"}:
            # "a 0.3 probability of winning" for "The probability of success": 0.3
            cue = described_number(spec, self._source)
            for i, text in enumerate(texts):
                if cue is not None and _decoded(text) == cue:
                    adjusted[i] += CUE_BONUS
        elif value_kinds(spec) == {"boolean"}:
            # "with tax" for include_tax: True first, "without tax": False first; a switch
            # the question names, True unless negated
            cue = boolean_cue(self._param_name, self.question)
            if cue is None:  # "with detailed description" for detail: True
                cue = named_switch(self._param_name, self.question)
            if cue is None:  # "using current exchange rate": "use the latest exchange rate"
                cue = described_switch(spec, self.question)
            for i, text in enumerate(texts):
                if cue is not None and text == json.dumps(cue):
                    adjusted[i] += CUE_BONUS
        if self.staged.direction_value_bonus and not isinstance(spec.get("enum"), list):
            # "Convert 150 Euros to Canadian dollars": "Canadian" is where to, not from
            # (candidates.direction_cue)
            for i, item in enumerate(_decoded(text) for text in texts):
                written = self._written.get(item, item) if isinstance(item, str) else item
                cue = direction_cue(self._param_name, written, self._source)
                adjusted[i] += cue * self.staged.direction_value_bonus
        favoured = False
        if self._later and self.staged.later_value_bonus:
            # a call after the first takes the values stated after the earlier calls' ones,
            # those of the part of the request it is about first (``later_value_bonus``)
            for i, item in enumerate(_decoded(text) for text in texts):
                if item is None:
                    continue
                # the part states it as written: 700000 as "$700,000"
                if states_any(_as_text(item), self._later) and (
                    self._source == self.question or states_any(self._source, [item])
                ):
                    adjusted[i] += self.staged.later_value_bonus
                    favoured = True
            if favoured and self._source != self.question and self.pending is not None:
                # the value this parameter took in an earlier call of the tool, where the
                # part of the request this call is about states another and not it: "ARIMA
                # for Apple, and then ... for Microsoft using the LSTM model"
                before = self._taken_before()
                for i, item in enumerate(_decoded(text) for text in texts):
                    if item in before and not states_any(self._source, [item]):
                        adjusted[i] -= self.staged.later_value_bonus
        if self._opening and not self.found and not self.has_results:
            # the first call of a request in several sentences takes the values of the
            # first one first ("First, the power of 7 raised to 3. Then ... 52 playing cards
            # ... upstream 5" gave the power a base of 5), as its tool is ranked against it
            for i, item in enumerate(_decoded(text) for text in texts):
                if item is not None and states_any(self._opening, [item]):
                    adjusted[i] += self.staged.later_value_bonus
        waiting: list[int] = []
        if self.staged.waiting_value_penalty and len(texts) > 1:
            # a request repeated with new values: this call takes the first of them not
            # taken yet, a later one waits for its own call (candidates.waiting_values)
            decoded = [_decoded(text) for text in texts]
            taken = [*used, *(v for c in self.found for v in (c.get("args") or {}).values())]
            waiting = sorted(waiting_values(self.question, decoded, taken))
            for i in waiting:
                adjusted[i] -= self.staged.waiting_value_penalty
        ranked = sorted(zip(texts, adjusted, strict=True), key=lambda pair: -pair[1])
        trace = {
            "chosen": ranked[0][0],
            "generated": own,
            "candidates": len(texts),
            "top": [[t, round(v, 3)] for t, v in ranked[:3]],
        }
        if waiting:
            trace["waiting"] = [texts[i] for i in waiting]
        return ranked, trace

    def _taken_before(self) -> list[Any]:
        """The values the parameter being filled took in this reply's earlier calls of the
        tool being called."""
        name = self.pending["name"] if self.pending is not None else None
        return [
            c["args"][self._param_name]
            for c in self.found
            if c["name"] == name and self._param_name in (c.get("args") or {})
        ]

    def fill_args(
        self, head: str, schema: dict[str, Any], optional: dict[str, Any] | None = None
    ) -> str:
        """The arguments object, one parameter at a time, after ``head`` (which ends with
        ``"args": ``). Two string parameters do not get the same value (text and letter,
        origin and destination): the one whose choice was closer switches to its next best.

        ``optional`` (``optional_args: likely``): parameters the question does not name,
        each added after the others when the model finds its key likelier than closing the
        object there (``optional_margin`` + ``optional_bias`` > 0) and the question or the
        results hold a value for it; left out otherwise."""
        properties = dict(schema.get("properties") or {})
        names = list(properties)
        extras = [n for n in optional or {} if n not in properties]
        close = _CLOSE_ARGS + _CLOSE_CALL + _END_CALLS
        text = "{"
        required = set(schema.get("required") or [])
        used: list[Any] = []
        chosen: dict[str, Any] = {}
        ranked: dict[str, list[tuple[str, float]]] = {}
        for name in [*names, *extras]:
            key = ("" if text == "{" else ", ") + json.dumps(name, ensure_ascii=False) + ": "
            # (an optional parameter left out below shortens ``names``)
            tail = ", " if name in names[:-1] else close
            self._param_name = name
            if name in extras:
                spec = (optional or {})[name]
                margin = self._optional_margin(head + text, key, close)
                fresh = [v for v in self.value_candidates(spec, used) or [] if v not in used]
                if margin <= 0 or not fresh:
                    self.trace.setdefault("optional_left_out", {})[name] = round(margin, 3)
                    continue
                # a value no other parameter took: the question's own words for this one
                properties[name] = {**spec, "enum": fresh}
                names.append(name)
            ranked[name], chosen[name] = self.choose_value(
                head + text + key, properties[name], tail, used
            )
            if name in extras:
                chosen[name]["optional_margin"] = round(margin, 3)
            elif name not in required and (
                why := _left_out(_decoded(ranked[name][0][0]), used, self.question)
            ):
                # an optional parameter whose best value is a number another one took, the
                # question writing it once ("for 2 nights": no_of_rooms 2), or empty: left out
                self.trace.setdefault("optional_left_out", {})[name] = why
                names.remove(name)
                del ranked[name], chosen[name]
                continue
            text += key + ranked[name][0][0]
            with contextlib.suppress(json.JSONDecodeError):
                used.append(json.loads(ranked[name][0][0]))
                if self.pending is not None:
                    self.pending["args"][name] = used[-1]
        distinct = _distinct_values({n: r for n, r in ranked.items()}, self.question)
        values = _apart(distinct, ranked)
        for name, value in values.items():
            if value != ranked[name][0][0]:
                chosen[name]["chosen"] = value
                chosen[name]["switched"] = (
                    "same value as another parameter"
                    if value == distinct[name]
                    else "holds another parameter's value"
                )
        self.trace.setdefault("args", []).append(chosen)
        self._ranked = {n: ranked[n] for n in names}
        body = ", ".join(f"{json.dumps(n, ensure_ascii=False)}: {values[n]}" for n in names)
        return "{" + body + _CLOSE_ARGS

    def next_values(self, text: str, later: list[Any]) -> str | None:
        """The arguments ``text`` (a call identical to an earlier one of this reply) with the
        one value changed that costs least: a parameter's best-scored alternative among the
        values the question states later (``later``, stage 4's evidence): "the factorial of
        5, the factorial of 7" filled 5 again for the second call; 7 is its next value. None
        when no parameter has such an alternative."""
        try:
            args = json.loads(text)
        except json.JSONDecodeError:
            return None
        best: tuple[float, str, Any] | None = None
        for name, ranked in self._ranked.items():
            if name not in args or len(ranked) < 2:
                continue
            top = ranked[0][1]
            for option, score in ranked[1:]:
                try:
                    value = json.loads(option)
                except json.JSONDecodeError:
                    continue
                if value != args[name] and states_any(_as_text(value), later):
                    if best is None or score - top > best[0]:
                        best = (score - top, name, value)
                    break
        if best is None:
            return None
        _, name, value = best
        self.trace.setdefault("next_values", []).append({name: value})
        return json.dumps({**args, name: value}, ensure_ascii=False)

    def _optional_margin(self, prefix: str, key: str, close: str) -> float:
        """How much likelier the model finds adding ``key`` than closing the arguments,
        per token of each (the key is a few tokens, the closing one or two)."""
        added, closed = self._score(prefix, [key, close])
        per_token = added / max(1, len(key) // 4) - closed / max(1, len(close) // 4)
        return per_token + self.staged.optional_bias

    # -- the whole reply ----------------------------------------------------------------

    def answer_instead(self) -> str | None:
        """Why a call stage 1 wants becomes an answer, if it does (the trace key): the
        message only thanks or greets; it only asks what something is or means, or for a
        piece of writing; the follow-up computation is done; nothing is left to do; no
        offered tool can be filled (a call would carry an invented value)."""
        if only_social(self.question):
            return "only_social"  # "Thanks, that's all I needed!": nothing asked
        own = self._the_model_s_own()
        if own is not None:
            return own  # "Explain ... what a tool call is.", "Write a thank-you note to Tom."
        if self._follow_up_done():
            return "follow_up_done"
        if self._nothing_next():
            return "nothing_next"
        if not any(self.fillable(n) for n in self.order):
            return "no_fillable_tool"
        return None

    def run(self, *, force: str | None = None) -> Completion:
        """The reply as a Completion whose text is the JSON envelope. ``force`` is
        ``"answer"`` or ``"call"`` to skip stage 1 (tools off; a call is required)."""
        choice = force
        if choice is None:
            if not self.tools:
                choice = "answer"
            else:
                stage1 = self.call_margin()
                self.trace["answer_or_call"] = _rounded(stage1)
                choice = "call" if stage1["margin"] > 0 else "answer"
                why = self.answer_instead() if choice == "call" else None
                if why is not None:
                    self.trace[why] = True
                    choice = "answer"
        self.trace["choice"] = choice
        if choice == "answer":
            self.stage = "answer"
            completion = self.answer()
            return self._result(completion.text, completion.finish_reason, completion)
        prefix = CALL_OPENING
        calls: list[dict[str, Any]] = []
        finish = "stop"
        focus: str | None = None
        later: list[Any] = []
        passed_over: list[str] = []  # tools whose call repeated a done one, for a next step
        while True:
            self.stage = f"tool of call {len(calls) + 1}"
            scores = self.tool_scores(prefix, focus)
            name = max(
                [n for n in self.order if n not in passed_over],
                key=lambda n: (scores[n]["fused"], -self.order.index(n)),
            )
            self.stage = f"arguments of call {len(calls) + 1} ({name})"
            self.pending = {"name": name, "args": {}}
            likely = self.staged.optional_args == "likely"
            schema = args_schema(
                self.tools[name],
                self.question,
                self.settings,
                optional="mentioned" if likely else self.staged.optional_args,
            )
            optional = None
            if likely:
                every = args_schema(self.tools[name], self.question, self.settings, optional="all")
                optional = {
                    n: spec
                    for n, spec in every["properties"].items()
                    if n not in schema["properties"]
                }
            head = prefix + name + _ARGS
            text = self.fill_args(head, schema, optional)
            with contextlib.suppress(json.JSONDecodeError):
                self.found.append({"name": name, "args": json.loads(text)})
            self.pending = None
            if self._cut:
                finish = self._cut
            calls.append({"name": name, "scores": {n: _rounded(v) for n, v in scores.items()}})
            if call_key(name, text) in self.done:
                # the same call already succeeded in this turn: its result is in hand
                calls[-1]["repeat_of_a_done_call"] = True
                if len(calls) == 1 and self._next_tool_after(name, passed_over):
                    # "search for files about X, then read the file you find": the step
                    # after the search is another tool's, the next best that can be filled
                    passed_over.append(name)
                    if self.found and self.found[-1]["name"] == name:
                        self.found.pop()
                    self.trace.setdefault("passed_over", []).append(calls.pop())
                    continue
                if len(calls) == 1:
                    self.trace["calls"] = calls
                    self.trace["choice"] = "answer"
                    self.stage = "answer"
                    completion = self.answer()
                    return self._result(completion.text, completion.finish_reason, completion)
                break
            earlier = {call_key(c["name"], c["args"]) for c in self.found[:-1]}
            if call_key(name, text) in earlier and later:
                # another call for the values stated later, filled with the first call's
                # values again: the next of them where it costs least
                changed = self.next_values(text, later)
                if changed is not None:
                    text = changed
                    self.found[-1] = {"name": name, "args": json.loads(text)}
            if self.settings.merge_duplicate_calls and call_key(name, text) in earlier:
                # the same call again in this reply: kept (the decision merges it) but no
                # more calls, they would only repeat it (a long question made four of them)
                calls[-1]["repeat_in_this_reply"] = True
                prefix = head + text + _CLOSE_CALL
                self.found.pop()
                break
            prefix = head + text + _CLOSE_CALL
            self.cover(text)
            if finish != "stop":
                break
            if not self.settings.parallel_calls or len(calls) >= self.settings.max_calls:
                break
            self.stage = f"another call after call {len(calls)}"
            more = self.continue_evidence(prefix, {c["name"] for c in calls})
            calls[-1]["continue"] = _rounded(
                {k: v for k, v in more.items() if k not in ("remaining", "later_values", "closest")}
            )
            if more["margin"] <= 0:
                break
            later = self._later = more["later_values"]
            prefix += _NEXT_CALL
            if more["remaining"]:  # the next call is about the next part of the request:
                # the first that states a value no call has used, else the one closest to
                # a tool not called yet ("..., how long will it take to prepare and cook,
                # and what nutritional information": not "cook" after the preparation time)
                ahead = [
                    i
                    for i in more["remaining"]
                    if states_any(self.clauses[i], more["later_values"])
                ]
                focus = self.clauses[ahead[0] if ahead else more["closest"]]
                self._source = focus
        self.trace["calls"] = calls
        if finish == "stop":
            prefix = self._cross_product(prefix)
        return self._result(prefix + _END_CALLS, finish, self._last)

    def _cross_product(self, prefix: str) -> str:
        """The reply's calls (``prefix``) with those the legs of a journey and the
        question's written-out lists ask for added (``lists.chained``: "from New York to Los
        Angeles, then from Los Angeles to Miami" after the first leg's call gives the second;
        ``lists.cross_product``: "water and iron at 0 meters and 1000 meters" after two
        calls gives four); none that already succeeded this turn."""
        parameters = {name: tool.parameters for name, tool in self.tools.items()}
        journey = chained(self.found, self.question)
        product = cross_product(journey, self.question, parameters)
        if len(product) == len(self.found):
            return prefix
        product = [
            c for c in product if c in self.found or call_key(c["name"], c["args"]) not in self.done
        ]
        if len(journey) > len(self.found):  # calls added for the legs of a journey
            self.trace["legs"] = len(journey) - len(self.found)
        # calls added in all (legs and lists)
        self.trace["cross_product"] = len(product) - len(self.found)
        self.found = product
        return CALL_OPENING + _NEXT_CALL.join(
            c["name"] + _ARGS + json.dumps(c["args"], ensure_ascii=False) + _CLOSE_CALL
            for c in product
        )

    def _result(self, text: str, finish: str | None, last: Completion | None) -> Completion:
        """The Completion of the whole staged reply. ``completion_tokens`` counts the reply's
        tokens, whether generated or chosen by scoring (``continuations_scored`` says how many
        candidates were read to choose them)."""
        self.trace["continuations_scored"] = self.scored
        if self.capped:
            self.trace["candidates_capped"] = self.capped
        details: dict[str, Any] = {"staged": self.trace, **self.reused}
        if last is not None:
            details.update(
                {k: v for k, v in last.details.items() if k not in ("prompt_text", "staged")}
            )
        counter = getattr(self.backend, "count_tokens", None)
        completion_tokens = counter(text) if counter else self.usage.completion_tokens
        return Completion(
            text=text,
            prompt_tokens=self.usage.prompt_tokens or None,
            completion_tokens=completion_tokens,
            finish_reason=finish,
            details=details,
        )


def _left_out(value: Any, used: list[Any], question: str) -> str | None:
    """Why an optional parameter's best value is no reason to give it: a number another
    parameter took that the question writes once (``taken_number``), or nothing at all (an
    empty list, object or string: "in the deck" named ``deck`` and gave it ``[]``)."""
    if taken_number(value, used, question):
        return "taken number"
    if value in ([], {}, ""):
        return "empty"
    return None


_SCALE_NAMED = re.compile(r"(?i)thousand|million|billion|trillion|\bin\s+(?:k|m|bn)\b")


def _decoded(text: str) -> Any:
    """A candidate's JSON text as its value; None when it is no JSON (a generated value)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _rounded(values: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in values.items()}
