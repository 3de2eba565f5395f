"""Output perturbation: the Gaussian and Laplace mechanisms, and per-row L2 clipping (numpy).

Noise comes from a secure source unless the caller passes a seeded ``rng`` for a simulation
(:mod:`pubsubml.privacy.noise`): the Gaussian from a ChaCha20 stream keyed by ``os.urandom``,
sampled in float64 and hardened against floating-point attacks as Opacus' ``secure_mode`` does;
the Laplace from diffprivlib's ``Laplace`` mechanism with its secure default source and its
floating-point protection (Holohan & Braghin, ESORICS 2021).

Each mechanism returns the noisy value together with the :class:`~pubsubml.privacy.events.DPEvent`
that describes what ran, so the release can be charged to a
:class:`~pubsubml.privacy.ledger.PrivacyLedger` before it leaves the site.

References
----------
pubsub-ml.txt §3.1 (Definition 1; Theorem 2, post-processing: anything computed from the noisy
output alone keeps its guarantee).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from pubsubml.errors import DataValidationError, InvalidPrivacyParameterError
from pubsubml.privacy.accountants.parameters import check_epsilon
from pubsubml.privacy.events import DPEvent, Neighbouring
from pubsubml.privacy.noise import SecureRandom

__all__ = ["clip_by_l2_norm", "gaussian_mechanism", "laplace_mechanism"]


def _positive_finite(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise InvalidPrivacyParameterError(f"{name} must be a number, got {value!r}")
    if not 0.0 < float(value) < math.inf:
        raise InvalidPrivacyParameterError(f"{name} must be finite and > 0, got {value}")
    return float(value)


def _finite_array(value: ArrayLike) -> np.ndarray:
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise DataValidationError(f"value must be numeric: {exc}") from exc
    if not np.all(np.isfinite(array)):
        raise DataValidationError("value contains NaN or infinite entries")
    return array


def _check_rng(rng: np.random.Generator | None) -> None:
    if rng is not None and not isinstance(rng, np.random.Generator):
        raise InvalidPrivacyParameterError(
            f"rng must be None (secure noise) or a numpy.random.Generator (a simulation), got "
            f"{type(rng).__name__}"
        )


def gaussian_mechanism(
    value: ArrayLike,
    *,
    sensitivity: float,
    noise_multiplier: float,
    rng: np.random.Generator | None = None,
) -> tuple[np.ndarray, DPEvent]:
    """Add N(0, (σ·Δ₂)²) noise to every entry of ``value``.

    Parameters
    ----------
    value : array-like of shape (...)
        The exact answer; its L2 sensitivity over add/remove-one neighbours is ``sensitivity``.
    sensitivity : float
        Δ₂ > 0, derived from public bounds, never from the private data.
    noise_multiplier : float
        σ > 0: the noise standard deviation is σ·Δ₂.
    rng : numpy.random.Generator, optional
        A seeded source, for simulations only (whoever knows the seed can subtract the noise).
        Default: :class:`~pubsubml.privacy.noise.SecureRandom`, fresh key per call, noise
        hardened against floating-point attacks.

    Returns
    -------
    noisy : ndarray of float64, same shape as ``value``
    event : DPEvent
        ``DPEvent(mechanism="gaussian", noise_multiplier=σ)``.

    Raises
    ------
    InvalidPrivacyParameterError
        On Δ₂ ≤ 0, σ ≤ 0 (or non-finite) or a non-Generator ``rng``.
    DataValidationError
        On a non-numeric or non-finite ``value``.

    Notes
    -----
    The guarantee holds only if Δ₂ truly bounds the change of ``value`` when one record is added or
    removed.  A seeded ``rng`` uses numpy's sampler, which is neither secret nor hardened against
    the least-significant-bit attack (Mironov, CCS 2012): never on a path that releases data.

    Examples
    --------
    >>> noisy, event = gaussian_mechanism(
    ...     [1.0, 2.0], sensitivity=1.0, noise_multiplier=2.0, rng=np.random.default_rng(0)
    ... )
    >>> noisy.shape, event.mechanism
    ((2,), 'gaussian')
    """
    delta2 = _positive_finite("sensitivity", sensitivity)
    sigma = _positive_finite("noise_multiplier", noise_multiplier)
    _check_rng(rng)
    array = _finite_array(value)
    if rng is None:
        standard = SecureRandom().standard_normal(array.size).reshape(array.shape)
        noisy = array + (sigma * delta2) * standard
    else:
        noisy = array + rng.normal(0.0, sigma * delta2, size=array.shape)
    return noisy, DPEvent(mechanism="gaussian", noise_multiplier=sigma)


def laplace_mechanism(
    value: ArrayLike,
    *,
    sensitivity: float,
    epsilon: float,
    rng: np.random.Generator | None = None,
    neighbouring: Neighbouring = "add_remove",
) -> tuple[np.ndarray, DPEvent]:
    """Add Laplace noise of scale b = Δ₁/ε to every entry of ``value`` (ε-DP).

    Parameters
    ----------
    value : array-like of shape (...)
        The exact answer; its L1 sensitivity over ``neighbouring`` neighbours is
        ``sensitivity``.
    sensitivity : float
        Δ₁ > 0, derived from public bounds.
    epsilon : float
        ε > 0 of this single release.
    rng : numpy.random.Generator, optional
        A seeded source, for simulations only.  Default: diffprivlib's ``Laplace`` mechanism
        drawing from ``secrets.SystemRandom`` with its floating-point protection.
    neighbouring : {"add_remove", "replace_one"}, default="add_remove"
        The relation ``sensitivity`` holds for (e.g. ``"replace_one"`` for a mean over a known
        number of records); recorded in the event.

    Returns
    -------
    noisy : ndarray of float64, same shape as ``value``
    event : DPEvent
        ``DPEvent(mechanism="laplace", noise_multiplier=b/Δ₁ = 1/ε, neighbouring=...)``.

    Raises
    ------
    InvalidPrivacyParameterError
        On Δ₁ ≤ 0, ε ≤ 0 (or non-finite) or a non-Generator ``rng``.
    DataValidationError
        On a non-numeric or non-finite ``value``.

    Notes
    -----
    Δ₁ must bound the L1 change of the whole vector, not of one entry.  The same caveat on a
    seeded ``rng`` as in :func:`gaussian_mechanism` applies.

    Examples
    --------
    >>> _, event = laplace_mechanism(3.0, sensitivity=2.0, epsilon=0.5, rng=np.random.default_rng(0))
    >>> event.noise_multiplier
    2.0
    """
    delta1 = _positive_finite("sensitivity", sensitivity)
    check_epsilon(epsilon)
    _check_rng(rng)
    array = _finite_array(value)
    scale = delta1 / float(epsilon)
    if rng is None:
        from diffprivlib.mechanisms import Laplace  # loads diffprivlib on first use

        mechanism = Laplace(epsilon=float(epsilon), sensitivity=delta1)
        noisy = np.array([mechanism.randomise(float(v)) for v in array.ravel()]).reshape(
            array.shape
        )
    else:
        noisy = array + rng.laplace(0.0, scale, size=array.shape)
    return noisy, DPEvent(
        mechanism="laplace", noise_multiplier=scale / delta1, neighbouring=neighbouring
    )


def clip_by_l2_norm(per_sample: np.ndarray, max_norm: float) -> np.ndarray:
    """Scale every row so that its L2 norm is at most ``max_norm`` (rows below it are unchanged).

    Parameters
    ----------
    per_sample : ndarray of shape (n, ...)
        One row per record (e.g. per-sample gradients); a row's norm is taken over all its entries.
    max_norm : float
        C > 0; after clipping every row has norm ≤ C, which makes the L2 sensitivity of the row
        sum equal to C under add/remove-one neighbours.

    Returns
    -------
    ndarray of shape (n, ...)
        Clipped rows, float64 (or the input's floating dtype).

    Raises
    ------
    InvalidPrivacyParameterError
        On C ≤ 0 or non-finite.
    DataValidationError
        On a 0-d or non-finite array.

    Examples
    --------
    >>> clip_by_l2_norm(np.array([[3.0, 4.0], [0.3, 0.4]]), 1.0)
    array([[0.6, 0.8],
           [0.3, 0.4]])
    """
    clip = _positive_finite("max_norm", max_norm)
    array = np.asarray(per_sample)
    if not np.issubdtype(array.dtype, np.floating):
        array = _finite_array(array)
    if array.ndim < 1:
        raise DataValidationError("per_sample must have shape (n, ...), got a scalar")
    if not np.all(np.isfinite(array)):
        raise DataValidationError("per_sample contains NaN or infinite entries")
    rows = array.reshape(array.shape[0], -1)
    norms = np.sqrt(np.einsum("ij,ij->i", rows, rows, dtype=np.float64))
    with np.errstate(divide="ignore"):
        factor = np.minimum(1.0, clip / norms)  # a zero row gives inf → 1.0
    clipped = rows * factor[:, None].astype(array.dtype)
    # Rounding can leave a clipped row a hair above C; shrink those by a few ulps.
    over = np.sqrt(np.einsum("ij,ij->i", clipped, clipped, dtype=np.float64)) > clip
    if np.any(over):
        clipped[over] *= array.dtype.type(1.0 - 4.0 * np.finfo(array.dtype).eps)
    return clipped.reshape(array.shape)
