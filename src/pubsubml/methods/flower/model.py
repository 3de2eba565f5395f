"""The model a Flower run produces, as one of our estimators: :class:`FlowerMLP`.

A ``FlowerMLP`` holds an MLP trained in a Flower federation (the global model of
:func:`~pubsubml.methods.flower.server_app.dp_server_app`, or one site's last local model of
:func:`~pubsubml.methods.flower.client_app.dp_client_app`) with the DP events behind it, so that
:meth:`Site.publish <pubsubml.sites.Site.publish>` charges them and puts them on its card: the
bridge from a Flower federation to the registry.

The networks train on the public [0, 1] encoding of the schema shifted by its midpoint
(:func:`~pubsubml.learners.dpsgd_base.centred`, as every DP-SGD learner here); :func:`build`
folds the shift into the first layer, so ``module_`` reads the plain encoding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import torch
from sklearn.base import BaseEstimator

from pubsubml.learners.dpsgd_base import fold_input_center
from pubsubml.methods.federated.global_model import GlobalModelMixin
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.dpsgd import init_mlp
from pubsubml.privacy.events import DPEvent
from pubsubml.schema import FeatureSchema

__all__ = ["FlowerMLP", "build"]


class FlowerMLP(GlobalModelMixin, BaseEstimator):
    """An MLP trained through Flower, with the DP events of every round it took.

    Built by :func:`build`, not fitted directly.

    Attributes
    ----------
    module_ : torch.nn.Sequential
        The network on the schema's public [0, 1] encoding.
    schema, schema_ : FeatureSchema
    task : "classification"
    classes_ : ndarray
    privacy_events_ : list of DPEvent
        The DP events whose outputs the model is a function of, for one record (see
        :func:`build`); empty without DP.
    epsilon_, delta_ : float
        ε at ``delta_`` of ``privacy_events_`` (``inf`` and 0 without DP).
    accountant_ : {"pld", "rdp"}
    noise_ : {"secure", "seeded"}
        Where the DP noise came from.
    defaulted_features_ : list of str
        Schema features a site lacked and filled with public defaults (a client's own model).
    """

    task: Literal["classification"] = "classification"

    def __init__(self) -> None:
        return None

    def fit(self, X: Any, y: Any = None) -> FlowerMLP:
        """Not trained here: a FlowerMLP comes out of a Flower run (:func:`build`).

        Raises
        ------
        TypeError
            Always.
        """
        raise TypeError(
            "a FlowerMLP is the outcome of a Flower run (dp_server_app / dp_client_app), not "
            "fitted directly"
        )


def build(
    *,
    schema: FeatureSchema,
    classes: Sequence[Any],
    layer_sizes: Sequence[int],
    activation: str,
    params: Sequence[np.ndarray],
    events: Sequence[DPEvent],
    delta: float,
    accountant: Literal["pld", "rdp"],
    noise: Literal["secure", "seeded"],
    defaulted_features: Sequence[str] = (),
) -> FlowerMLP:
    """A :class:`FlowerMLP` from the centred-space parameters of a run and its DP events.

    Parameters
    ----------
    schema : FeatureSchema
    classes : sequence
    layer_sizes : sequence of int
        Inputs, hidden sizes, outputs.
    activation : str
    params : sequence of ndarray
        W0, b0, W1, b1, … as trained (inputs centred at the encoding's midpoint).
    events : sequence of DPEvent
        Every DP event the released weights depend on, for one record.  For the global model of
        record-level DP a record lives at one site, and the global model is post-processing of
        that site's DP outputs and of other sites' outputs that do not read it (pubsub-ml.txt
        §3.1, Theorem 2; parallel composition over disjoint sites): the events of the site that
        spent the most are the guarantee.
    delta : float
    accountant : {"pld", "rdp"}
    noise : {"secure", "seeded"}
    defaulted_features : sequence of str

    Returns
    -------
    FlowerMLP
    """
    module = init_mlp(list(layer_sizes), activation, torch.Generator().manual_seed(0))
    with torch.no_grad():
        for p, v in zip(module.parameters(), params, strict=True):
            p.copy_(torch.as_tensor(np.asarray(v), dtype=p.dtype).reshape(p.shape))
    model = FlowerMLP()
    model.module_ = fold_input_center(module)
    model.schema = model.schema_ = schema
    model.classes_ = np.asarray(list(classes))
    model.n_features_in_ = len(schema)
    model.privacy_events_ = list(events)
    model.accountant_ = accountant
    private = bool(events)
    model.epsilon_ = compute_epsilon(events, delta, backend=accountant) if private else math.inf
    model.delta_ = float(delta) if private else 0.0
    model.noise_ = noise
    model.defaulted_features_ = list(defaulted_features)
    return model
