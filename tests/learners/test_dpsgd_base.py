"""The DP-SGD learners' shared machinery: inputs centred for training, the shift folded back."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from pubsubml.errors import SchemaMismatchError
from pubsubml.learners import (
    DPMLPClassifier,
    DPSGDLinearRegression,
    DPSGDLogisticRegression,
    dpsgd_base,
    fit_many,
)
from pubsubml.learners.dpsgd_base import INPUT_CENTER, fold_input_center, unfold_input_center
from pubsubml.schema import Feature, FeatureSchema


def _blobs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """10 classes in 40 columns, every value near ½ (wide public bounds), as MNIST-1D encodes."""
    rng = np.random.default_rng(seed)
    means = 0.5 + 0.04 * np.random.default_rng(99).standard_normal((10, 40))
    y = rng.integers(0, 10, n)
    X = np.clip(means[y] + 0.06 * rng.standard_normal((n, 40)), 0.0, 1.0)
    return X, y


def test_folding_the_centre_gives_the_network_trained_on_centred_inputs() -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3))
    Z = torch.rand(7, 5)
    expected = net(Z - INPUT_CENTER)

    folded = fold_input_center(net)

    torch.testing.assert_close(folded(Z), expected)
    torch.testing.assert_close(unfold_input_center(folded)(Z - INPUT_CENTER), expected)


def test_folding_refuses_a_network_without_a_leading_biased_linear_layer() -> None:
    with pytest.raises(ValueError, match=r"nn\.Linear"):
        fold_input_center(torch.nn.Sequential(torch.nn.Linear(3, 2, bias=False)))


@pytest.mark.parametrize("n_hidden", [(), (16,)])
def test_fitted_module_takes_the_public_encoding_and_matches_predict(
    n_hidden: tuple[int, ...],
) -> None:
    X, y = _blobs(300, 0)
    if n_hidden:
        est: DPMLPClassifier | DPSGDLogisticRegression = DPMLPClassifier(
            classes=list(range(10)),
            hidden_layer_sizes=n_hidden,
            dp=False,
            epochs=3,
            random_state=0,
            noise_seed=0,
        )
    else:
        est = DPSGDLogisticRegression(
            classes=list(range(10)), epsilon=1.0, random_state=0, noise_seed=0
        )
    est.fit(X, y)

    with torch.no_grad():
        logits = est.module_(torch.from_numpy(X.astype(np.float32))).numpy()
    np.testing.assert_array_equal(est.classes_[logits.argmax(1)], est.predict(X))


def test_centring_makes_a_private_multiclass_model_learn_where_uncentred_inputs_do_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    X, y = _blobs(2000, 1)
    X_test, y_test = _blobs(3000, 2)

    def accuracy() -> float:
        scores = []
        for seed in range(3):
            est = DPSGDLogisticRegression(
                classes=list(range(10)), epsilon=1.0, delta=1e-4, random_state=seed, noise_seed=seed
            )
            scores.append(float((est.fit(X, y).predict(X_test) == y_test).mean()))
        return float(np.mean(scores))

    centred = accuracy()
    monkeypatch.setattr(dpsgd_base, "INPUT_CENTER", 0.0)
    uncentred = accuracy()

    assert centred > uncentred + 0.1


def test_regression_predictions_are_in_target_units_after_both_folds() -> None:
    rng = np.random.default_rng(0)
    X = rng.random((400, 3))
    y = 10.0 + 20.0 * X[:, 0]
    est = DPSGDLinearRegression(
        epsilon=None,
        noise_multiplier=0.01,
        accountant="rdp",
        target_bounds=(10.0, 30.0),
        random_state=0,
        noise_seed=0,
    ).fit(X, y)

    with torch.no_grad():
        out = est.module_(torch.from_numpy(X.astype(np.float32))).numpy().ravel()
    np.testing.assert_allclose(out, est.predict(X), rtol=1e-5)
    assert np.abs(est.predict(X) - y).mean() < 1.0


def test_fit_many_takes_sites_holding_different_subsets_of_the_consortium_schema() -> None:
    schema = FeatureSchema(
        features=(
            Feature(name="a", lower=0, upper=1, default=0.5),
            Feature(name="b", lower=0, upper=1, default=0.2),
            Feature(name="c", lower=0, upper=1, default=0.8),
        )
    )
    rng = np.random.default_rng(0)
    full = pd.DataFrame(rng.random((240, 3)), columns=["a", "b", "c"])
    Xs = [full.iloc[:120][["a", "b"]], full.iloc[120:][["c", "a"]]]
    ys = [(X["a"] > 0.5).astype(int).to_numpy() for X in Xs]
    est = DPSGDLogisticRegression(
        schema=schema, classes=[0, 1], epsilon=1.0, random_state=0, noise_seed=0
    )

    models = fit_many(est, Xs, ys)

    by_hand = fit_many(est, [schema.extend(X) for X in Xs], ys)
    for model, reference, X in zip(models, by_hand, Xs, strict=True):
        np.testing.assert_array_equal(model.predict_proba(X), reference.predict_proba(X))
        assert model.n_features_in_ == 3
    with pytest.raises(SchemaMismatchError, match=r"\['zip'\] that are not in the schema"):
        fit_many(est, [Xs[0], Xs[1].assign(zip=0.0)], ys)
