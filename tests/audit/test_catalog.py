"""The audit catalogue: one name per mechanism, its paths and variants, one entry point."""

from __future__ import annotations

import pytest

from pubsubml.audit.catalog import AUDITS, run_audit


def test_every_target_has_a_correct_variant_and_a_negative_control() -> None:
    for name, spec in AUDITS.items():
        assert spec.variants[0] == "correct" and len(spec.variants) >= 2, name
        assert set(spec.many_run) <= set(spec.paths), name


def test_many_run_defaults_follow_the_claim() -> None:
    r = run_audit("async-dp", epsilon=0.5, size=None, rows=20)
    assert r.canaries == 20_000 and r.method == "many-run"


def test_a_one_run_target_takes_size_as_canaries() -> None:
    r = run_audit("linear", epsilon=1.0, size=150, rows=150)
    assert r.canaries == 150 and r.method == "one-run"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"target": "svm"}, "unknown audit target"),
        ({"target": "mlp", "path": "central"}, "unknown path"),
        ({"target": "dp-forest", "variant": "noise-off"}, "unknown variant"),
    ],
)
def test_unknown_names_are_refused(kwargs: dict[str, str], match: str) -> None:
    target = kwargs.pop("target")
    with pytest.raises(ValueError, match=match):
        run_audit(target, **kwargs)  # type: ignore[arg-type]
