"""``pubsubml audit``: a correct learner passes, a broken one is flagged, bad options exit 2."""

from __future__ import annotations

from typer.testing import CliRunner

from pubsubml.cli import app

runner = CliRunner()
SMALL = ["--canaries", "300", "--rows", "300"]


def test_a_correct_learner_is_consistent_with_its_claim() -> None:
    result = runner.invoke(app, ["audit", "--learner", "linear", *SMALL])
    assert result.exit_code == 0, result.output
    assert "dpsgd-linear (one-run, 300 canaries, correct): claimed ε = 0.9999" in result.output
    assert "consistent" in result.output


def test_a_broken_mechanism_exits_1_with_a_violation() -> None:
    result = runner.invoke(app, ["audit", "--variant", "noise-off", *SMALL])
    assert result.exit_code == 1
    assert "VIOLATED" in result.output


def test_bad_options_exit_2_with_one_line() -> None:
    result = runner.invoke(app, ["audit", "--variant", "noise-x2"])
    assert result.exit_code == 2
    assert "unknown variant" in result.output


def test_many_run_targets_are_reachable() -> None:
    result = runner.invoke(app, ["audit", "--learner", "async-dp", "--canaries", "2000"])
    assert result.exit_code == 0, result.output
    assert "async-dp-answer (many-run, 2000 runs per data set, correct)" in result.output
    broken = runner.invoke(
        app, ["audit", "--learner", "dp-logistic", "--variant", "noise-off", "--canaries", "200"]
    )
    assert broken.exit_code == 2 and "unknown variant" in broken.output


def test_every_catalogued_target_is_reachable_by_name() -> None:
    result = runner.invoke(
        app,
        ["audit", "--target", "dp-fedavg", "--canaries", "200", "--rows", "20", "--epsilon", "2"],
    )
    assert result.exit_code == 0, result.output
    assert "dp-fedavg-central (one-run, 200 canaries, correct)" in result.output
    unknown = runner.invoke(app, ["audit", "--target", "fedbuff"])
    assert unknown.exit_code == 2 and "unknown audit target" in unknown.output
    bad_path = runner.invoke(app, ["audit", "--target", "proxyfl", "--path", "stacked"])
    assert bad_path.exit_code == 2 and "unknown path" in bad_path.output
