"""How the web dashboard writes privacy numbers: ε to 4 decimals, σ to 3 significant digits.

Accountants return ε with every digit of a float (``0.9613027471237212``) and cards carry σ as
their publishers wrote it; a page shows them rounded, with the unrounded value in the ``title``
attribute (shown on hover).  :func:`epsilon_html` and :func:`sigma_html` are the templates'
``epsilon`` and ``sigma`` filters; :func:`format_epsilon` and :func:`format_sigma` give the text
alone (SVG labels).
"""

from __future__ import annotations

import math

from markupsafe import Markup, escape

__all__ = [
    "EPSILON_DECIMALS",
    "SIGMA_DIGITS",
    "epsilon_html",
    "format_epsilon",
    "format_sigma",
    "sigma_html",
]

#: Decimals of a shown ε.
EPSILON_DECIMALS = 4
#: Significant digits of a shown noise multiplier σ.
SIGMA_DIGITS = 3

_MISSING = "—"


def format_epsilon(value: float) -> str:
    """ε rounded to :data:`EPSILON_DECIMALS` decimals.

    A positive ε that would round to zero is written ``<0.0001``, so that a spent budget never
    reads as nothing spent; ``inf`` stays ``inf``.

    Parameters
    ----------
    value : float

    Returns
    -------
    str

    Examples
    --------
    >>> format_epsilon(0.9613027471237212), format_epsilon(2.0), format_epsilon(3e-7)
    ('0.9613', '2.0000', '<0.0001')
    """
    value = float(value)
    if not math.isfinite(value):
        return str(value)
    smallest = 10.0**-EPSILON_DECIMALS
    if 0.0 < value < smallest / 2:
        return f"<{smallest:.{EPSILON_DECIMALS}f}"
    return f"{value:.{EPSILON_DECIMALS}f}"


def format_sigma(value: float) -> str:
    """A noise multiplier rounded to :data:`SIGMA_DIGITS` significant digits, without trailing
    zeros (and without an exponent from 10⁻⁴ to 10⁶).

    Parameters
    ----------
    value : float

    Returns
    -------
    str

    Examples
    --------
    >>> format_sigma(1.23456), format_sigma(5.0), format_sigma(1234.5), format_sigma(0.0004567)
    ('1.23', '5', '1230', '0.000457')
    """
    value = float(value)
    if not math.isfinite(value):
        return str(value)
    rounded = float(f"{value:.{SIGMA_DIGITS}g}")
    return f"{rounded:g}"


def _rounded(text: str, value: float, kind: str) -> Markup:
    """``<span class="rounded KIND" title="VALUE">TEXT</span>`` (the value unrounded)."""
    return Markup(
        f'<span class="rounded {kind}" title="{escape(repr(float(value)))}">{escape(text)}</span>'
    )


def epsilon_html(value: float | None) -> Markup:
    """ε for a page: :func:`format_epsilon` in a ``span`` whose ``title`` is the exact value
    (``—`` when there is none).

    Examples
    --------
    >>> str(epsilon_html(0.9613027471237212))
    '<span class="rounded epsilon" title="0.9613027471237212">0.9613</span>'
    """
    if value is None:
        return Markup(_MISSING)
    return _rounded(format_epsilon(value), value, "epsilon")


def sigma_html(value: float | None) -> Markup:
    """σ for a page: :func:`format_sigma` in a ``span`` whose ``title`` is the exact value
    (``—`` when there is none).

    Examples
    --------
    >>> str(sigma_html(1.23456))
    '<span class="rounded sigma" title="1.23456">1.23</span>'
    """
    if value is None:
        return Markup(_MISSING)
    return _rounded(format_sigma(value), value, "sigma")
