"""FLamby's published Fed-Heart-Disease results and training hyperparameters, as constants.

Paper: J. Ogier du Terrail, S.-S. Ayed, E. Cyffers et al., "FLamby: Datasets and Benchmarks for
Cross-Silo Federated Learning in Realistic Healthcare Settings", NeurIPS 2022 Datasets and
Benchmarks Track.

Source of the numbers: the repository github.com/owkin/FLamby, read at commit
:data:`FLAMBY_COMMIT` (2024-06-19), files
``flamby/results/results_benchmark_fed_heart_disease/heart_seed{42,43,44,45,46}.csv`` (one file
per seed; they last changed in commit a422b61c56ef20eba34babf561d53cbf2da3d60d, 2022-09-23,
which made FLamby's standardisation per centre).  Each file has one row per method and test
set; its column ``Metric``, the accuracy at threshold 0.5
(``flamby/datasets/fed_heart_disease/metric.py``), is stored here as the exact fraction it is:
the patients classified correctly over the test set's size, equal as a float64 to the published
value.

Test sets: ``client_test_0`` to ``client_test_3`` are the test sets of the hospitals in
:data:`~pubsubml.data.heart_disease.HOSPITALS` order (Cleveland 104 patients, Hungary 89,
Switzerland 16, VA Long Beach 45; :func:`~pubsubml.data.heart_disease.flamby_split`);
``Pooled Test`` is their union (254 patients).  Methods: ``Pooled Training`` (one model on the
union of the train sets), ``Local 0`` to ``Local 3`` (one hospital's train set alone), and the
federated strategies run with 100 local updates per round (``FedAvg100``, ``FedProx100``,
``Scaffold100``, ``Cyclic100``, ``FedAdam100``, ``FedAdagrad100``, ``FedYogi100``).  The model is
FLamby's baseline, a logistic regression on the 13 standardised features.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from pubsubml.data.heart_disease import HOSPITALS

__all__ = [
    "FLAMBY_COMMIT",
    "FLAMBY_HYPERPARAMETERS",
    "FLAMBY_RESULTS",
    "FLAMBY_STRATEGY_HYPERPARAMETERS",
    "POOLED_TEST",
    "TEST_HOSPITALS",
    "TEST_SETS",
    "TEST_SIZES",
    "FlambyResult",
    "mean_accuracy",
]

FLAMBY_COMMIT = "edacf54d5211520583b0133d55ac39b6fda8324b"
"""The commit of github.com/owkin/FLamby the constants of this module were read from."""

POOLED_TEST = "Pooled Test"
"""FLamby's name of the union of the four hospitals' test sets."""

TEST_SETS: tuple[str, ...] = (
    "client_test_0",
    "client_test_1",
    "client_test_2",
    "client_test_3",
    POOLED_TEST,
)
"""The test sets of FLamby's result files."""

TEST_HOSPITALS: Mapping[str, str] = MappingProxyType(
    {f"client_test_{i}": hospital for i, hospital in enumerate(HOSPITALS)}
)
"""The hospital of each client test set (FLamby numbers the hospitals as ``HOSPITALS``)."""

FLAMBY_HYPERPARAMETERS: Mapping[str, int | float | str] = MappingProxyType(
    {
        "model": "logistic regression: torch.nn.Linear(13, 1) then a sigmoid (model.py)",
        "loss": "torch.nn.BCELoss, binary cross-entropy on the sigmoid output (loss.py)",
        "optimizer": "torch.optim.Adam (pooled and local training; common.py)",
        "learning_rate": 0.001,
        "batch_size": 4,
        "num_epochs_pooled": 50,
        "num_clients": 4,
        "num_local_updates": 100,
        "num_rounds": 15,
        "metric": "accuracy, predicted probability > 0.5 (metric.py)",
    }
)
"""FLamby's training setup for Fed-Heart-Disease.

From ``flamby/datasets/fed_heart_disease/common.py`` (``BATCH_SIZE = 4``, ``LR = 0.001``,
``NUM_EPOCHS_POOLED = 50``, ``Optimizer = torch.optim.Adam``, ``NUM_CLIENTS = 4``), ``model.py``,
``loss.py`` and ``metric.py`` of the same folder, and ``flamby/benchmarks/fed_benchmark.py``
(federated runs use 100 local updates per round).  The number of rounds is common.py's
``get_nb_max_rounds(100)``: ``(486 // 4 // 4) * 50 // 100 = 15``, 486 being the size of the four
train sets together, so that the federated runs see about as many samples as 50 pooled epochs.
"""

FLAMBY_STRATEGY_HYPERPARAMETERS: Mapping[str, Mapping[str, float | bool | str]] = MappingProxyType(
    {
        "Cyclic": MappingProxyType(
            {
                "optimizer": "torch.optim.SGD",
                "learning_rate": 0.01,
                "deterministic_cycle": False,
            }
        ),
        "FedAdagrad": MappingProxyType(
            {
                "optimizer": "torch.optim.SGD",
                "learning_rate": 0.003162,
                "server_learning_rate": 0.316228,
                "beta1": 0.9,
                "beta2": 0.999,
                "tau": 1e-08,
            }
        ),
        "FedAdam": MappingProxyType(
            {
                "optimizer": "torch.optim.SGD",
                "learning_rate": 0.01,
                "server_learning_rate": 0.01,
                "beta1": 0.9,
                "beta2": 0.999,
                "tau": 1e-08,
            }
        ),
        "FedAvg": MappingProxyType({"optimizer": "torch.optim.SGD", "learning_rate": 0.001}),
        "FedProx": MappingProxyType(
            {"optimizer": "torch.optim.SGD", "learning_rate": 0.001, "mu": 0.01}
        ),
        "FedYogi": MappingProxyType(
            {
                "optimizer": "torch.optim.SGD",
                "learning_rate": 0.003162,
                "server_learning_rate": 0.01,
                "beta1": 0.9,
                "beta2": 0.999,
                "tau": 1e-08,
            }
        ),
        "Scaffold": MappingProxyType(
            {"optimizer": "torch.optim.SGD", "learning_rate": 0.001, "server_learning_rate": 1.0}
        ),
    }
)
"""The federated strategies' tuned hyperparameters, from ``flamby/config_heart_disease.json``
(the same values appear in the result files' columns); ``learning_rate`` is the clients' local
SGD step size."""

TEST_SIZES: Mapping[str, int] = MappingProxyType(
    {
        "client_test_0": 104,
        "client_test_1": 89,
        "client_test_2": 16,
        "client_test_3": 45,
        POOLED_TEST: 254,
    }
)
"""The number of patients in each test set."""

# Method -> seed -> patients classified correctly in (client_test_0, client_test_1, client_test_2,
# client_test_3, Pooled Test).  Every Metric of heart_seed<seed>.csv equals, as a float64,
# correct / TEST_SIZES[test]: the published value is stored as that exact fraction.
_CORRECT: Mapping[str, Mapping[int, tuple[int, int, int, int, int]]] = {
    "Pooled Training": {
        42: (83, 68, 12, 29, 201),
        43: (81, 68, 12, 29, 202),
        44: (82, 68, 12, 29, 202),
        45: (81, 68, 12, 29, 203),
        46: (80, 68, 12, 29, 202),
    },
    "Local 0": {
        42: (76, 67, 11, 30, 198),
        43: (78, 68, 12, 30, 197),
        44: (76, 67, 10, 30, 201),
        45: (78, 68, 13, 30, 199),
        46: (80, 68, 12, 28, 201),
    },
    "Local 1": {
        42: (78, 67, 8, 23, 182),
        43: (76, 66, 9, 22, 185),
        44: (80, 67, 8, 23, 190),
        45: (77, 66, 10, 22, 182),
        46: (77, 66, 7, 22, 184),
    },
    "Local 2": {
        42: (59, 41, 13, 30, 133),
        43: (51, 34, 13, 34, 130),
        44: (44, 32, 10, 26, 114),
        45: (49, 35, 13, 30, 107),
        46: (47, 32, 9, 31, 129),
    },
    "Local 3": {
        42: (62, 42, 14, 34, 148),
        43: (56, 40, 12, 31, 149),
        44: (62, 43, 14, 30, 168),
        45: (57, 41, 11, 29, 147),
        46: (63, 42, 13, 34, 164),
    },
    "Cyclic100": {
        42: (79, 68, 12, 28, 197),
        43: (79, 66, 12, 30, 204),
        44: (77, 69, 9, 28, 200),
        45: (81, 69, 13, 29, 200),
        46: (78, 67, 11, 29, 196),
    },
    "FedAdagrad100": {
        42: (79, 68, 12, 28, 199),
        43: (76, 65, 12, 30, 195),
        44: (80, 67, 12, 33, 199),
        45: (79, 66, 12, 31, 203),
        46: (81, 69, 11, 30, 193),
    },
    "FedAdam100": {
        42: (79, 67, 12, 28, 197),
        43: (75, 65, 12, 29, 195),
        44: (79, 66, 12, 33, 198),
        45: (79, 65, 12, 31, 204),
        46: (79, 69, 11, 29, 195),
    },
    "FedAvg100": {
        42: (79, 62, 11, 28, 191),
        43: (75, 66, 12, 30, 194),
        44: (77, 67, 8, 26, 194),
        45: (76, 60, 12, 28, 178),
        46: (73, 65, 9, 32, 193),
    },
    "FedProx100": {
        42: (79, 62, 11, 28, 191),
        43: (75, 66, 12, 30, 194),
        44: (77, 67, 8, 26, 194),
        45: (76, 60, 12, 28, 178),
        46: (73, 65, 9, 32, 193),
    },
    "FedYogi100": {
        42: (79, 68, 12, 28, 199),
        43: (76, 65, 12, 30, 195),
        44: (80, 67, 12, 33, 199),
        45: (79, 66, 12, 31, 203),
        46: (81, 69, 11, 30, 193),
    },
    "Scaffold100": {
        42: (78, 62, 11, 28, 191),
        43: (75, 66, 12, 30, 194),
        44: (77, 67, 8, 26, 194),
        45: (75, 60, 12, 28, 178),
        46: (73, 65, 9, 32, 193),
    },
}


@dataclass(frozen=True)
class FlambyResult:
    """One row of FLamby's result files.

    Attributes
    ----------
    method : str
        E.g. ``"Pooled Training"``, ``"Local 2"``, ``"FedAvg100"``.
    test : str
        One of :data:`TEST_SETS`.
    seed : int
        The run's seed (42 to 46).
    correct : int
        Patients of the test set classified correctly.
    n_test : int
        Patients in the test set (:data:`TEST_SIZES`).
    """

    method: str
    test: str
    seed: int
    correct: int
    n_test: int

    @property
    def accuracy(self) -> float:
        """The published accuracy (column ``Metric``): ``correct / n_test``."""
        return self.correct / self.n_test


FLAMBY_RESULTS: tuple[FlambyResult, ...] = tuple(
    FlambyResult(method, test, seed, correct, TEST_SIZES[test])
    for method, by_seed in _CORRECT.items()
    for seed, counts in by_seed.items()
    for test, correct in zip(TEST_SETS, counts, strict=True)
)
"""Every published result: 12 methods × 5 seeds × 5 test sets = 300 rows."""


def mean_accuracy() -> dict[str, dict[str, float]]:
    """Each method's accuracy on each test set, averaged over FLamby's five seeds.

    Returns
    -------
    dict of str to dict of str to float
        ``method -> test set -> mean accuracy``, methods in FLamby's file order, test sets in
        :data:`TEST_SETS` order.

    Examples
    --------
    >>> round(mean_accuracy()["Pooled Training"][POOLED_TEST], 4)
    0.7953
    >>> round(mean_accuracy()["FedAvg100"]["client_test_0"], 4)
    0.7308
    """
    sums: dict[str, dict[str, list[float]]] = {}
    for row in FLAMBY_RESULTS:
        sums.setdefault(row.method, {t: [] for t in TEST_SETS})[row.test].append(row.accuracy)
    return {
        method: {test: sum(values) / len(values) for test, values in by_test.items()}
        for method, by_test in sums.items()
    }
