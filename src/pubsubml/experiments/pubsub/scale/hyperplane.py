"""Hyperplane sites of the PubSub-ML scale experiments (pubsub-ml.txt §7.1 Table 3, §8.2.3–8.2.5).

Every site draws its own noise percentage p3 and drift magnitude p4 (Table 3: "as p3 and p4 can
only be positive, we sample absolute values") and generates its rows with the rules of river's
``synth.Hyperplane`` (the paper's ``HyperplaneGenerator``): x ~ U(0, 1)^p1, label
1[w·x ≥ Σw / 2], the label flipped when ``0.01 + u ≤ p3``, the first p2 weights moved by ±p4
after every row, the direction of a weight reversed when ``0.01 + u ≤ p5``.

§8.2.3 calls the publishers and subscribers an "IID data setup": all sites start from one
hyperplane and differ in their samples, noise and drift.  river's generator draws the weights and
the samples from one seed, so :func:`hyperplane_stream` draws the shared weights from a concept
seed and the rows from the site's own seed, in river's order (with ``weights=None`` it reproduces
river's stream exactly).

Table 3's numbers did not survive in the text we reproduce from; :data:`TABLE3` holds the values
used here (river's defaults for p1, p2, p5; half-normal p3 and p4) and every result states them.

Pure-noise sites (§8.2.5, appendix C) get labels independent of x
(:func:`pubsubml.data.partition.noisy_labels`): river's rule with p3 = 1 would flip 99% of the
labels, an inverted but perfectly learnable concept rather than noise.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from pubsubml.data import Dataset, hyperplane_schema

__all__ = [
    "TABLE3",
    "HyperplaneSite",
    "SiteParams",
    "concept_weights",
    "draw_site_params",
    "hyperplane_stream",
    "make_consortium",
    "make_site",
    "table3_note",
]

TABLE3: dict[str, float] = {
    "p1": 10,  # number of features (river's default)
    "p2": 2,  # number of drifting features (river's default)
    "p3_scale": 0.1,  # p3 = |N(0, 0.1²)|, the label-noise fraction
    "p4_scale": 0.01,  # p4 = |N(0, 0.01²)|, the drift per row
    "p5": 0.1,  # probability of reversing a drift direction (river's default)
}
"""The Table 3 values used here (stand-ins: the paper's values are not in our copy)."""


def table3_note() -> str:
    """One Markdown sentence stating the Table 3 values used (for the notes of every result)."""
    t = TABLE3
    return (
        f"Sites follow Table 3 with p1 = {t['p1']:g} features, p2 = {t['p2']:g} drifting, "
        f"p3 = |N(0, {t['p3_scale']:g}²)| label noise and p4 = |N(0, {t['p4_scale']:g}²)| drift "
        f"per row drawn per site, p5 = {t['p5']:g}; Table 3's own numbers are not in our copy of "
        "the paper, so these are stand-ins (river's defaults where it has one). All sites share "
        'the initial hyperplane (the paper\'s "IID data setup") and draw their own rows.'
    )


@dataclass(frozen=True)
class SiteParams:
    """Generator parameters of one site (pubsub-ml.txt Table 3: p1 … p5).

    Attributes
    ----------
    noise_percentage : float
        p3 in [0, 1].
    mag_change : float
        p4 in [0, 1].
    n_features, n_drift_features : int
        p1 and p2.
    sigma : float
        p5 in [0, 1].
    pure_noise : bool
        Labels independent of x (a noisy site of §8.2.5).
    """

    noise_percentage: float
    mag_change: float
    n_features: int = int(TABLE3["p1"])
    n_drift_features: int = int(TABLE3["p2"])
    sigma: float = TABLE3["p5"]
    pure_noise: bool = False

    def __post_init__(self) -> None:
        for name in ("noise_percentage", "mag_change", "sigma"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value!r}")
        if not 0 <= self.n_drift_features <= self.n_features or self.n_features < 1:
            raise ValueError("need 0 <= n_drift_features <= n_features and n_features >= 1")


def draw_site_params(n_sites: int, seed: int) -> list[SiteParams]:
    """Table 3 parameters of ``n_sites`` sites: p3 and p4 half-normal, the rest fixed.

    Examples
    --------
    >>> ps = draw_site_params(3, seed=0)
    >>> len(ps), all(0 <= p.noise_percentage <= 1 and 0 <= p.mag_change <= 1 for p in ps)
    (3, True)
    """
    if n_sites < 0:
        raise ValueError(f"n_sites must be >= 0, got {n_sites}")
    rng = np.random.default_rng(seed)
    p3 = np.clip(np.abs(rng.normal(0.0, TABLE3["p3_scale"], n_sites)), 0.0, 1.0)
    p4 = np.clip(np.abs(rng.normal(0.0, TABLE3["p4_scale"], n_sites)), 0.0, 1.0)
    return [SiteParams(float(a), float(b)) for a, b in zip(p3, p4, strict=True)]


def concept_weights(seed: int, n_features: int = int(TABLE3["p1"])) -> np.ndarray:
    """The initial hyperplane weights, U(0, 1) as river draws them from ``seed``."""
    rng = random.Random(seed)
    return np.array([rng.random() for _ in range(n_features)])


def hyperplane_stream(
    n_chunks: int,
    chunk_size: int,
    params: SiteParams,
    *,
    seed: int,
    weights: Sequence[float] | np.ndarray | None = None,
) -> Iterator[tuple[pd.DataFrame, np.ndarray]]:
    """Consecutive chunks of a Hyperplane stream with river's rules and optional shared weights.

    Parameters
    ----------
    n_chunks, chunk_size : int
    params : SiteParams
    seed : int
        The site's own draws (rows, noise, drift directions).
    weights : sequence of float, optional
        Initial weights (the shared concept); ``None`` draws them from ``seed`` as river does,
        which reproduces ``river.datasets.synth.Hyperplane(seed=seed, ...)`` exactly.

    Yields
    ------
    X : DataFrame of shape (chunk_size, p1), columns ``x0 …`` in [0, 1]
    y : ndarray of shape (chunk_size,), int64 in {0, 1}

    Examples
    --------
    >>> X, y = next(hyperplane_stream(1, 4, SiteParams(0.0, 0.0, n_features=3), seed=1))
    >>> X.shape, set(y.tolist()) <= {0, 1}
    ((4, 3), True)
    """
    if n_chunks < 0 or chunk_size < 1:
        raise ValueError("need n_chunks >= 0 and chunk_size >= 1")
    d = params.n_features
    rng = random.Random(seed)
    drawn = [rng.random() for _ in range(d)]  # river draws the weights first, always
    w = list(drawn if weights is None else (float(v) for v in weights))
    if len(w) != d:
        raise ValueError(f"need {d} weights, got {len(w)}")
    direction = [1] * params.n_drift_features + [0] * (d - params.n_drift_features)
    columns = [f"x{i}" for i in range(d)]
    label_rng = np.random.default_rng([seed, 1])
    for _ in range(n_chunks):
        X = np.empty((chunk_size, d))
        y = np.empty(chunk_size, dtype=np.int64)
        for r in range(chunk_size):
            total = sum(w)
            value = 0.0
            for i in range(d):
                X[r, i] = rng.random()
                value += w[i] * X[r, i]
            label = 1 if value >= total * 0.5 else 0
            if 0.01 + rng.random() <= params.noise_percentage:
                label = 1 - label
            y[r] = label
            for i in range(params.n_drift_features):
                w[i] += direction[i] * params.mag_change
                if 0.01 + rng.random() <= params.sigma:
                    direction[i] *= -1
        if params.pure_noise:
            from pubsubml.data.partition import noisy_labels

            y = np.asarray(
                noisy_labels(y, (0, 1), int(label_rng.integers(2**31 - 1))), dtype=np.int64
            )
        yield pd.DataFrame(X, columns=columns), y


@dataclass(frozen=True)
class HyperplaneSite:
    """One generated site: its name, its Table 3 parameters and its rows."""

    name: str
    params: SiteParams
    data: Dataset


def make_site(
    name: str,
    params: SiteParams,
    n_rows: int,
    *,
    seed: int,
    weights: Sequence[float] | np.ndarray,
) -> HyperplaneSite:
    """``n_rows`` rows of one site on the shared concept ``weights``."""
    X, y = next(hyperplane_stream(1, n_rows, params, seed=seed, weights=weights))
    data = Dataset(
        X=X,
        y=y,
        schema=hyperplane_schema(params.n_features),
        task="classification",
        classes=(0, 1),
    )
    return HyperplaneSite(name, params, data)


def _site_seeds(seed: int, role: int, n: int) -> list[int]:
    children = np.random.SeedSequence([seed, role]).spawn(n)
    return [int(c.generate_state(1)[0]) for c in children]


def make_consortium(
    n_publishers: int, n_subscribers: int, n_rows: int, *, seed: int, n_noisy: int = 0
) -> tuple[list[HyperplaneSite], list[HyperplaneSite]]:
    """Publishers and subscribers of pubsub-ml.txt §8.2.3 (and §8.2.5 with ``n_noisy``).

    Publishers draw p3 and p4 from Table 3; the last ``n_noisy`` of them are pure noise (§8.2.5).
    Subscriber ``j`` has p3 = 0 and the p4 of publisher ``j`` (cycling over the good
    publishers): "the same p4 as publishers but their p3 = 0".  All sites share the initial
    hyperplane drawn from ``seed``.

    Returns
    -------
    publishers, subscribers : lists of HyperplaneSite

    Examples
    --------
    >>> pubs, subs = make_consortium(3, 2, 20, seed=0, n_noisy=1)
    >>> [s.params.pure_noise for s in pubs], [s.params.noise_percentage for s in subs]
    ([False, False, True], [0.0, 0.0])
    """
    if n_publishers < 1 or n_subscribers < 0 or not 0 <= n_noisy < n_publishers:
        raise ValueError("need n_publishers >= 1, n_subscribers >= 0, 0 <= n_noisy < n_publishers")
    weights = concept_weights(seed)
    params = draw_site_params(n_publishers, seed)
    good = n_publishers - n_noisy
    params = params[:good] + [replace(p, pure_noise=True) for p in params[good:]]
    pub_seeds = _site_seeds(seed, 0, n_publishers)
    sub_seeds = _site_seeds(seed, 1, n_subscribers)
    publishers = [
        make_site(f"p{i}", p, n_rows, seed=s, weights=weights)
        for i, (p, s) in enumerate(zip(params, pub_seeds, strict=True))
    ]
    subscribers = [
        make_site(
            f"s{j}",
            replace(params[j % good], noise_percentage=0.0),
            n_rows,
            seed=s,
            weights=weights,
        )
        for j, s in enumerate(sub_seeds)
    ]
    return publishers, subscribers
