"""``pubsubml predict|evaluate|contributions`` refusals that need no customized model.

The end-to-end runs of these commands on a stored customized model live with ``customize`` in
``test_customize.py``, which builds the consortium they share.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pubsubml.cli.commands import app
from pubsubml.cli.customized_model import NOT_DP, _fmt

runner = CliRunner()


@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_a_folder_that_is_no_customized_model_is_one_error_line(
    command: str, tmp_path: Path
) -> None:
    data = tmp_path / "rows.csv"
    data.write_text("x0,y\n0.5,1\n")
    (tmp_path / "empty").mkdir()
    r = runner.invoke(app, [command, str(tmp_path / "empty"), str(data), "--quiet"])
    assert r.exit_code == 1 and r.stdout == ""
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("error:") and str(tmp_path / "empty") in line


def test_contributions_without_disclose_say_why_before_reading_anything(tmp_path: Path) -> None:
    r = runner.invoke(app, ["contributions", str(tmp_path / "absent")])
    assert r.exit_code == 1 and "--disclose" in r.stderr and "not differentially private" in NOT_DP


def test_scores_print_four_decimals_and_a_dash_where_undefined() -> None:
    assert _fmt(0.123456) == "0.1235" and _fmt(None) == "-" and _fmt(math.nan) == "-"
