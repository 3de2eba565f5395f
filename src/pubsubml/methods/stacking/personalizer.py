"""Personalized learning via stacking (pfl-stacking.txt §3).

Each client publishes a privacy-preserving model; a client stacks the fetched models with its own
private model under a meta-model trained on private data.  :class:`StackingPersonalizer` is the
:class:`~pubsubml.methods.pubsub.customizer.Customizer` with the paper's choices — random forests for the
private and the meta-model, contribution scores by mean decrease in impurity — and both of its
stacking variants: *held-out* (the private model on ``Train``, the meta-model on ``Meta Train``)
and *pooled* (both on ``Train ∪ Meta Train``, as BaggingWrapper).

For vertical and hybrid partitions, where clients hold different columns, a fetched model's
missing features are filled with public default values.  :func:`release_dp_defaults` lets a client
compute those defaults from its own data under DP (an exponential-mechanism median over public
bounds, an exponential-mechanism mode over public categories), charged to its ledger.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd
from sklearn.utils import check_random_state

from pubsubml.errors import DataValidationError
from pubsubml.methods.pubsub.customizer import Customizer, Task
from pubsubml.methods.pubsub.outputs import Runner
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.ledger import PrivacyLedger, Release
from pubsubml.privacy.noise import SecureRandom
from pubsubml.schema import Feature, FeatureSchema

__all__ = [
    "StackingPersonalizer",
    "dp_median",
    "dp_mode",
    "hybrid_partition",
    "release_dp_defaults",
    "vertical_partition",
]


class StackingPersonalizer(Customizer):
    """A personalized stacked model (pfl-stacking.txt §3, Figure 1).

    Parameters
    ----------
    stacking : {"held_out", "pooled"}, default="held_out"
        ``"held_out"``: the private model trains on ``Train`` (``train_split``) and the meta-model
        on ``Meta Train`` (``fusion_split``).  ``"pooled"``: both train on all rows.
    own_model : default="forest"
    fusion_model : default="forest"
        The meta-model; ``"forest"`` gives MDI contribution scores (§4).

    The other parameters are those of :class:`~pubsubml.methods.pubsub.customizer.Customizer`.

    References
    ----------
    pfl-stacking.txt §3 (method, held-out vs pooled), §4 (random forests, 0.6/0.2/0.2 splits,
    normalized MDI contribution scores).

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> X, y = make_classification(n_samples=150, n_features=3, n_informative=2,
    ...                            n_redundant=0, random_state=0)
    >>> X = pd.DataFrame(X, columns=["a", "b", "c"])
    >>> pooled = StackingPersonalizer(stacking="pooled", random_state=0).fit(X, y)
    >>> len(pooled.train_index_) == len(pooled.fusion_index_) == 150
    True
    """

    def __init__(
        self,
        *,
        stacking: Literal["held_out", "pooled"] = "held_out",
        models: Sequence[Any] | None = None,
        task: Task = "classification",
        own_model: Any = "forest",
        fusion_model: Any = "forest",
        top_m: int | None = None,
        selection_metric: str | None = None,
        train_split: float = 0.75,
        fusion_split: float = 0.25,
        schema: FeatureSchema | None = None,
        classes: Sequence[Any] | None = None,
        model_ids: Sequence[str] | None = None,
        runner: Runner | None = None,
        random_state: int | np.random.RandomState | None = None,
    ) -> None:
        super().__init__(
            models=models,
            task=task,
            own_model=own_model,
            fusion_model=fusion_model,
            cv="holdout",  # the paper's Train / Meta Train split (or all rows when pooled)
            top_m=top_m,
            selection_metric=selection_metric,
            train_split=train_split,
            fusion_split=fusion_split,
            schema=schema,
            classes=classes,
            model_ids=model_ids,
            runner=runner,
            random_state=random_state,
        )
        self.stacking = stacking

    def _split(self, y: np.ndarray, seed: int, has_own: bool) -> tuple[np.ndarray, np.ndarray]:
        if self.stacking not in ("held_out", "pooled"):
            raise ValueError(f"stacking must be 'held_out' or 'pooled', got {self.stacking!r}")
        if self.stacking == "pooled":
            index = np.arange(len(y))
            return (index if has_own else index[:0]), index
        return super()._split(y, seed, has_own)


# ---- vertical and hybrid partitions (pfl-stacking.txt §4.3) ------------------------------------
def vertical_partition(
    features: Sequence[str],
    n_sites: int,
    fraction: float,
    *,
    replace: bool = True,
    random_state: Any = None,
) -> list[list[str]]:
    """Feature sets of ``n_sites`` clients, each of ``round(fraction · d)`` draws of the features.

    pfl-stacking.txt §4.3 draws each client's predictors "uniformly at random with replacement"
    (``replace=True``: repeated draws collapse, so a client may hold fewer than ``fraction · d``);
    the paper's source code draws them without replacement (``replace=False``: exactly
    ``max(1, round(fraction · d))`` distinct features).

    Returns
    -------
    list of ``n_sites`` lists of distinct feature names, in the order of ``features``

    Examples
    --------
    >>> vertical_partition(["a", "b", "c", "d"], 2, 0.5, random_state=0)
    [['a', 'd'], ['a', 'b']]
    >>> [len(s) for s in vertical_partition(list("abcdefgh"), 3, 0.5, replace=False)]
    [4, 4, 4]
    """
    if n_sites < 1 or not 0 < fraction <= 1 or not features:
        raise ValueError("need n_sites >= 1, 0 < fraction <= 1 and at least one feature")
    rng = check_random_state(random_state)
    d = len(features)
    k = max(1, round(fraction * d))
    out = []
    for _ in range(n_sites):
        draws = rng.randint(0, d, size=k) if replace else rng.choice(d, size=k, replace=False)
        picked = set(draws.tolist())
        out.append([f for i, f in enumerate(features) if i in picked])
    return out


def hybrid_partition(
    X: pd.DataFrame, y: Any, n_sites: int, fraction: float, *, random_state: Any = None
) -> list[tuple[pd.DataFrame, np.ndarray]]:
    """Disjoint rows *and* a random feature subset per client (a hybrid federation).

    ``fraction=1`` gives a horizontal partition.

    Returns
    -------
    list of ``n_sites`` ``(X_site, y_site)``
    """
    rng = check_random_state(random_state)
    y_arr = np.asarray(y).reshape(-1)
    if len(y_arr) != len(X) or len(X) < n_sites:
        raise DataValidationError("y must match X, with at least one row per site")
    parts = np.array_split(rng.permutation(len(X)), n_sites)
    columns = vertical_partition([str(c) for c in X.columns], n_sites, fraction, random_state=rng)
    return [
        (X.iloc[np.sort(p)][cols].reset_index(drop=True), y_arr[np.sort(p)])
        for p, cols in zip(parts, columns, strict=True)
    ]


# ---- DP default values ---------------------------------------------------------------------------
def dp_median(
    values: np.ndarray,
    lower: float,
    upper: float,
    epsilon: float,
    rng: np.random.Generator | SecureRandom,
    *,
    grid_size: int = 1001,
) -> float:
    """ε-DP median over public bounds by the exponential mechanism on a public grid.

    Candidate c of ``grid_size`` evenly spaced points of ``[lower, upper]`` has utility
    ``−max(#{x < c}, #{x > c})`` (sensitivity 1 under add/remove-one) and is drawn with probability
    ∝ ``exp(ε · utility / 2)``.  Values are clipped to the public bounds first.

    Examples
    --------
    >>> v = dp_median(np.full(1000, 3.0), 0.0, 10.0, 1.0, np.random.default_rng(0))
    >>> abs(v - 3.0) < 0.1
    True
    """
    if not (np.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be finite and > 0, got {epsilon}")
    if not (np.isfinite(lower) and np.isfinite(upper) and lower < upper) or grid_size < 2:
        raise ValueError("need finite public bounds lower < upper and grid_size >= 2")
    x = np.sort(np.clip(np.asarray(values, dtype=np.float64), lower, upper))
    grid = np.linspace(lower, upper, grid_size)
    below = np.searchsorted(x, grid, side="left")
    above = len(x) - np.searchsorted(x, grid, side="right")
    logw = -epsilon * np.maximum(below, above) / 2.0
    p = np.exp(logw - logw.max())
    return float(grid[rng.choice(grid_size, p=p / p.sum())])


def dp_mode(
    values: Sequence[Any],
    categories: Sequence[Any],
    epsilon: float,
    rng: np.random.Generator | SecureRandom,
) -> Any:
    """ε-DP most frequent category by the exponential mechanism (utility = count, sensitivity 1)."""
    if not (np.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be finite and > 0, got {epsilon}")
    if len(categories) == 0:
        raise ValueError("dp_mode needs at least one public category")
    counts = np.array([sum(1 for v in values if v == c) for c in categories], dtype=np.float64)
    logw = epsilon * counts / 2.0
    p = np.exp(logw - logw.max())
    return list(categories)[int(rng.choice(len(categories), p=p / p.sum()))]


def release_dp_defaults(
    X: pd.DataFrame,
    schema: FeatureSchema,
    *,
    epsilon: float,
    ledger: PrivacyLedger,
    release_id: str,
    scope: Sequence[str] | None = None,
    noise_seed: int | np.random.Generator | None = None,
) -> tuple[FeatureSchema, Release]:
    """Replace the defaults of ``X``'s features by DP estimates from ``X``, charged to ``ledger``.

    Numeric features get :func:`dp_median` over their public bounds, categorical ones
    :func:`dp_mode` over their public categories, each with ``epsilon / d`` (basic composition
    over the ``d`` features, recorded as ``d`` pure ε-DP events).  The ledger is charged before
    anything is returned; the returned schema is what the site may publish (e.g. as its model's
    input schema, so subscribers fill missing features with these values).

    Parameters
    ----------
    X : DataFrame
        The site's private data; its columns must be features of ``schema``.
    schema : FeatureSchema
        Public schema (bounds, categories).
    epsilon : float
        Total ε of the release.
    ledger : PrivacyLedger
    release_id : str
    scope : sequence of str, optional
        Data chunks ``X`` comes from (``None``: the whole data set).
    noise_seed : int or numpy Generator, optional
        Seeds the exponential mechanism, for simulations only (whoever knows the seed can
        regenerate the draws).  ``None`` (the default): a secure source
        (:class:`~pubsubml.privacy.noise.SecureRandom`).

    Returns
    -------
    schema : FeatureSchema
        ``schema`` restricted to ``X``'s columns with the DP defaults.
    release : Release
        What was charged.

    Raises
    ------
    PrivacyBudgetExceededError
        The ledger refuses; nothing is computed or returned.
    SchemaMismatchError, DataValidationError
        ``X`` does not fit ``schema``.

    References
    ----------
    pfl-stacking.txt §3 (default values published with the models) and §4.3 (noisy medians);
    here the noise is calibrated with the exponential mechanism so that the release is ε-DP.
    """
    if not epsilon > 0 or not np.isfinite(epsilon):
        raise ValueError(f"epsilon must be finite and > 0, got {epsilon}")
    if X.shape[1] == 0:
        raise DataValidationError("X has no columns: there is no default to release")
    own = schema.subset([str(c) for c in X.columns])
    frame = own.validate_frame(X)
    if len(frame) == 0:
        raise DataValidationError("X has no rows")
    eps_f = float(epsilon) / len(own)
    events = tuple(DPEvent(mechanism="approx_dp", epsilon=eps_f, delta=0.0) for _ in own)
    release = Release(
        release_id=release_id,
        description=f"DP defaults of {own.names}",
        events=events,
        scope=None if scope is None else tuple(scope),
    )
    ledger.charge(release)
    rng = _noise_source(noise_seed)
    features = tuple(_with_dp_default(f, frame[f.name].to_numpy(), eps_f, rng) for f in own)
    return FeatureSchema(features=features), release


def _noise_source(
    noise_seed: int | np.random.Generator | None,
) -> np.random.Generator | SecureRandom:
    """A secure source without a seed; the given generator, or one seeded by ``noise_seed``."""
    if noise_seed is None:
        return SecureRandom()
    if isinstance(noise_seed, np.random.Generator):
        return noise_seed
    return np.random.default_rng(noise_seed)


def _with_dp_default(
    f: Feature, col: np.ndarray, epsilon: float, rng: np.random.Generator | SecureRandom
) -> Feature:
    """``f`` with its default replaced by an ε-DP median (numeric) or mode (categorical)."""
    if f.kind == "numeric":
        assert f.lower is not None and f.upper is not None
        value: Any = dp_median(col.astype(np.float64), f.lower, f.upper, epsilon, rng)
    else:
        value = dp_mode(col.tolist(), list(f.categories or ()), epsilon, rng)
    return Feature(**{**f.model_dump(), "default": value})
