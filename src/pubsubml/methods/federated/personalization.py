"""Personalizing a federation's global model at one site: local fine-tuning.

:func:`fine_tune` makes the personalized "(F)" baselines of pubsub-ml.txt §7.3 (FedAvg(F),
FedProx(F), FedAdam(F)): a site trains the published global model further on its own data,
without noise, since the result is never published.

References
----------
pubsub-ml.txt §7.3 ("a site further finetunes the global model … in a non-private fashion"
[11, 50]); §7.2 (30 epochs, minibatches of 100, Adam).
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

import pandas as pd
import torch
from sklearn.utils.validation import check_is_fitted
from torch import Tensor

from pubsubml.learners.base import check_labels, check_regression_targets
from pubsubml.learners.dpsgd_base import centred, fold_input_center, unfold_input_center
from pubsubml.learners.dpsgd_tasks import (
    check_target_bounds,
    fold_target_bounds,
    scale_targets,
    unfold_target_bounds,
)
from pubsubml.methods.federated.rounds import FederatedMLP
from pubsubml.privacy.dpsgd import DPSGDConfig, MLPStack, train_dp_stacked

__all__ = ["fine_tune"]

Model = TypeVar("Model", bound=FederatedMLP)


def _site_training_data(
    model: FederatedMLP, X: pd.DataFrame, y: Any
) -> tuple[Tensor, Tensor, tuple[float, float] | None]:
    """The site's inputs and targets as the global model was trained on them.

    Inputs centred on the public encoding; labels coded by ``model.classes_``, or real targets
    scaled by the public ``target_bounds`` (returned, ``None`` for a classifier).
    """
    Xt = centred(model.schema.encode(X, missing="default", extra="ignore"))
    if model.task == "classification":
        codes = check_labels(y, list(model.classes_), len(Xt))[1]
        return Xt, torch.from_numpy(codes), None
    bounds = check_target_bounds(getattr(model, "target_bounds", None))
    yt = torch.from_numpy(scale_targets(check_regression_targets(y, len(Xt)), bounds))
    return Xt, yt, bounds


def fine_tune(
    model: Model,
    X: pd.DataFrame,
    y: Any,
    *,
    epochs: int = 30,
    lr: float | None = None,
    batch_size: int | None = None,
    random_state: int = 0,
) -> Model:
    """A copy of a fitted federated model whose global network is trained on ``(X, y)``.

    Non-private training (shuffled minibatches, no clipping or noise) with the model's local
    optimizer; works for every :class:`~pubsubml.methods.federated.rounds.FederatedMLP`.  ``model`` is
    left unchanged.

    Parameters
    ----------
    model : FederatedMLP
        Fitted.
    X : DataFrame of shape (n_samples, n_features)
        The site's own data (encoded with the model's public schema; features the site lacks
        take its public defaults, pubsub-ml.txt §8.1.3).
    y : array-like of shape (n_samples,)
        Labels in ``model.classes_`` (classification) or real targets (regression).
    epochs : int, default=30
        Local epochs (pubsub-ml.txt §7.2 trains every model for 30).
    lr, batch_size : optional
        Default to the model's ``lr`` and ``batch_size``.
    random_state : int, default=0
        Seeds the minibatch shuffling.

    Returns
    -------
    FederatedMLP
        Same class and attributes, with ``module_`` fine-tuned and ``fine_tuned_ = True``.

    Raises
    ------
    sklearn.exceptions.NotFittedError
        ``model`` is not fitted.
    ValueError
        ``epochs``, ``lr`` or ``batch_size`` not positive.
    DataValidationError, LabelError
        Malformed ``X`` or ``y``, or labels outside ``model.classes_``.

    Notes
    -----
    The result is for the site's own use only.  ``epsilon_`` still describes the published global
    model; the fine-tuned network has no DP guarantee for the site's data and must not be released.
    """
    check_is_fitted(model, "module_")
    config = DPSGDConfig(
        batch_size=model.batch_size if batch_size is None else batch_size,
        epochs=epochs,
        lr=model.lr if lr is None else lr,
        optimizer=model.optimizer,
        private=False,
    )
    # trained centred (and on targets scaled by the public target_bounds), as the global model
    Xt, yt, bounds = _site_training_data(model, X, y)
    # a copy on centred inputs and scaled targets: model.module_ is not touched
    start = unfold_target_bounds(unfold_input_center(copy.deepcopy(model.module_)), bounds)
    stack = MLPStack.from_modules([start])
    train_dp_stacked(
        stack,
        [Xt],
        [yt],
        configs=config,
        generators=[torch.Generator().manual_seed(random_state)],
        loss="cross_entropy" if model.task == "classification" else "mse",
    )
    tuned = copy.deepcopy(model)
    tuned.module_ = fold_target_bounds(fold_input_center(stack.to_modules()[0]), bounds)
    tuned.fine_tuned_ = True
    return tuned
