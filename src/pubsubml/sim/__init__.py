"""Offline data sets, partitioners and scenarios for simulations.

The loaders (:mod:`pubsubml.sim.datasets`) and partitioners (:mod:`pubsubml.sim.partition`) are
re-exported here; the runner (:mod:`pubsubml.sim.runner`) and the experiments live in their own
modules, imported on use.
"""

from __future__ import annotations

from pubsubml.sim.datasets import (
    Dataset,
    UnknownDatasetError,
    hyperplane,
    hyperplane_chunks,
    hyperplane_schema,
    load,
    load_diamonds,
    load_flchain,
    load_hi,
    load_mnist1d,
    load_shuttle,
    load_sklearn,
)
from pubsubml.sim.partition import (
    dirichlet_label_skew,
    donor_split,
    feature_split,
    iid,
    label_share,
    noisy_labels,
    population_split,
    quantity_skew,
)

__all__ = [
    "Dataset",
    "UnknownDatasetError",
    "dirichlet_label_skew",
    "donor_split",
    "feature_split",
    "hyperplane",
    "hyperplane_chunks",
    "hyperplane_schema",
    "iid",
    "label_share",
    "load",
    "load_diamonds",
    "load_flchain",
    "load_hi",
    "load_mnist1d",
    "load_shuttle",
    "load_sklearn",
    "noisy_labels",
    "population_split",
    "quantity_skew",
]
