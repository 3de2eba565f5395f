"""Tests of pubsubml.registry.ui.formatting: ε to 4 decimals, σ to 3 significant digits, the
exact value kept in a ``title``."""

from __future__ import annotations

import math

import pytest

from pubsubml.registry.ui.formatting import (
    epsilon_html,
    format_epsilon,
    format_sigma,
    sigma_html,
)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.9613027471237212, "0.9613"),
        (1.23456, "1.2346"),
        (2.0, "2.0000"),
        (0.0, "0.0000"),
        (0.00005, "0.0001"),
        (0.00004, "<0.0001"),
        (12345.678911, "12345.6789"),
        (math.inf, "inf"),
    ],
)
def test_format_epsilon_rounds_to_four_decimals(value: float, text: str) -> None:
    assert format_epsilon(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.23456, "1.23"),
        (5.0, "5"),
        (0.5, "0.5"),
        (0.98765, "0.988"),
        (12.3456, "12.3"),
        (1234.5, "1230"),
        (0.0004567, "0.000457"),
    ],
)
def test_format_sigma_rounds_to_three_significant_digits(value: float, text: str) -> None:
    assert format_sigma(value) == text


def test_html_keeps_the_exact_value_in_the_title() -> None:
    assert str(epsilon_html(0.9613027471237212)) == (
        '<span class="rounded epsilon" title="0.9613027471237212">0.9613</span>'
    )
    assert str(sigma_html(1.23456)) == '<span class="rounded sigma" title="1.23456">1.23</span>'
    assert (
        str(epsilon_html(3e-7)) == '<span class="rounded epsilon" title="3e-07">&lt;0.0001</span>'
    )


def test_html_of_a_missing_value_is_a_dash() -> None:
    assert str(epsilon_html(None)) == str(sigma_html(None)) == "—"
