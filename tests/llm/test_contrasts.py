"""A tool whose name does the opposite of what the question asks (lokal.llm.contrasts)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from lokal.llm.contrasts import contradiction


def named(name: str) -> SimpleNamespace:
    return SimpleNamespace(name=name, description="")


@pytest.mark.parametrize(
    ("question", "tool", "expected"),
    [
        # the kinds of BFCL's development no-call questions still called
        (
            "What do I get if I multiply 8.5 and 3.2 together?",
            "calculate_sum",
            ("multiplication", "addition"),
        ),
        (
            "Compute the derivative of the function '2x' at 1.",
            "calculus.compute_definite_integral",
            ("derivative", "integral"),
        ),
        (
            "What is the freezing point of water at 10 kPa?",
            "thermodynamics.calculate_boiling_point",
            ("freezing", "boiling"),
        ),
        ("I need to log out of the system.", "user_authentication.login", ("log out", "log in")),
        ("Please disable the alert config 7.", "enable_infra_alert_config", ("disable", "enable")),
        ("What is the median of 3, 5 and 9?", "calculateAverage", ("median", "average")),
        (
            "Find the least common multiple of 4 and 6.",
            "math.hcf",
            ("least common", "greatest common"),
        ),
        # the same member, or both, or none: no contradiction
        ("Add 5 and 3.", "calculate_sum", None),
        ("What is the sum of 5 and 3?", "calculate_sum", None),
        ("Log me in as john_doe.", "user_authentication.login", None),
        ("Compute the derivative and the integral of x^2.", "compute_definite_integral", None),
        ("What is 12 times 7?", "calculator", None),  # a name that names no member
        ("Add a user named Tom.", "multiply_numbers", None),  # "add" is no sum without a number
        ("Download the report and the sales figures.", "get_report", None),
    ],
)
def test_a_contradiction_is_a_member_the_question_did_not_ask(question, tool, expected):
    assert contradiction(question, named(tool)) == expected


def test_only_the_name_counts_not_what_the_description_lists():
    # lokal's calculator computes "sums, products, powers": a multiplication is its job
    calculator = SimpleNamespace(
        name="calculator", description="Calculate an arithmetic expression: sums, products."
    )
    assert contradiction("Multiply 6 by 7.", calculator) is None
