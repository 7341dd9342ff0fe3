"""Staged decisions: a reply built by the model's likelihood, one stage at a time.

Two rooms: ``engine`` (the stages: answer or call, which tool, each argument, another call;
budgets and the trace) and ``candidates`` (the values a question offers, found in its text:
spans, numbers, clauses, value shapes, and their light normalisations). The names below are
the package's public API; ``lokal.llm.staged.candidates`` is public too.
"""

from lokal.llm.staged.engine import (
    ANSWER_OPENING,
    CALL_OPENING,
    DecisionTimeout,
    StagedEngine,
    args_schema,
    can_score,
    capped,
    does_arithmetic,
)

__all__ = [
    "ANSWER_OPENING",
    "CALL_OPENING",
    "DecisionTimeout",
    "StagedEngine",
    "args_schema",
    "can_score",
    "capped",
    "does_arithmetic",
]
