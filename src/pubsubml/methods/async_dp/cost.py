"""Cost of privacy of asynchronous DP learning: relative fitness, Theorem 2's bound and its fit.

Pure math first (fitness, θ*, ψ in :mod:`~pubsubml.methods.async_dp.fitness`; the bounds of
Eq. 8–11 and the fits in :mod:`~pubsubml.methods.async_dp.cost_bounds`), then here the fitted
model used for the collaboration forecast of §6 (:class:`CostOfPrivacyModel`, stored as JSON,
never pickled).

References
----------
async-dp-cost-of-privacy.txt §4 (Theorem 2, Eq. 8–11), §5 (relative fitness ψ(θ) = f(θ)/f(θ*) − 1,
Fig. 4–6, 10), §6 (forecasts for a data market).
"""

from __future__ import annotations

import dataclasses
import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from pubsubml.errors import DataValidationError, InvalidPrivacyParameterError
from pubsubml.methods.async_dp.cost_bounds import (
    cost_of_privacy_bound,
    fit_alone_fitness,
    fit_cost_of_privacy,
    fit_owner_scaling,
    loglog_slope,
    privacy_term,
    theorem2_bound,
)
from pubsubml.methods.async_dp.fitness import (
    FitnessStatistics,
    optimal_parameters,
    relative_fitness,
)

__all__ = [
    "DEFAULT_MODEL_RESOURCE",
    "CostOfPrivacyModel",
    "FitnessStatistics",
    "Forecast",
    "cost_of_privacy_bound",
    "default_model_path",
    "fit_alone_fitness",
    "fit_cost_of_privacy",
    "fit_owner_scaling",
    "loglog_slope",
    "optimal_parameters",
    "privacy_term",
    "relative_fitness",
    "theorem2_bound",
]

#: File name of the fitted model shipped in ``pubsubml.methods``.
DEFAULT_MODEL_RESOURCE = "forecast.json"


def default_model_path() -> Path:
    """Where the shipped forecast model lives (``pubsubml/methods/async_dp/forecast.json``).

    Written by ``pubsubml bench async-dp-calibrate`` at full size and read by
    :meth:`CostOfPrivacyModel.load_default` (§6: forecasts for a data market).

    Examples
    --------
    >>> default_model_path().name
    'forecast.json'
    """
    return Path(str(resources.files("pubsubml.methods.async_dp").joinpath(DEFAULT_MODEL_RESOURCE)))


@dataclasses.dataclass(frozen=True)
class Forecast:
    """Predicted relative fitness of a collaboration and of one owner alone.

    Attributes
    ----------
    psi_collaboration : float
        Predicted E ψ(θ_L,T) of Algorithm 1 (Eq. 11 with fitted constants).
    psi_alone : float
        Predicted ψ(θ*_1) of a non-private model trained on one owner's data.
    pays : bool
        ``psi_collaboration < psi_alone``: joining is expected to give a better model.
    extrapolated : bool
        True if the query lies outside the calibration ranges.
    """

    psi_collaboration: float
    psi_alone: float
    pays: bool
    extrapolated: bool


class CostOfPrivacyModel(BaseModel):
    """Fitted constants of the cost-of-privacy bound and of the alone baseline (JSON).

    Parameters
    ----------
    c1, c2 : float
        c̄1, c̄2 of Eq. 11 for ψ of the collaboration.
    owner_exponent : float, default=0.0
        γ of :func:`fit_owner_scaling`: the constants scale as N^γ (0: the same for every N).
    alone_a, alone_b : float
        a, b of :func:`fit_alone_fitness`.
    horizon : int
        T the constants were measured at.
    calibration : dict
        How the constants were produced (data, Ξ, λ, θ_max, ρ rule, ranges, command).

    Examples
    --------
    >>> model = CostOfPrivacyModel(c1=0.0, c2=1e5, alone_a=10.0, alone_b=0.0, horizon=1000,
    ...                            calibration={"n_records": [1e3, 1e5], "epsilon": [0.1, 10],
    ...                                         "n_owners": [2, 10]})
    >>> model.forecast(n_owners=5, n_records=10_000, epsilon=1.0).pays
    True
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    c1: float
    c2: float
    owner_exponent: float = 0.0
    alone_a: float
    alone_b: float
    horizon: int
    calibration: dict[str, Any]

    def predict_collaboration(self, *, n_owners: int, n_records: float, epsilon: float) -> float:
        """N^γ·(c̄1√S + c̄2 S) (Eq. 11) for N owners of n_i = n records each with ε_i = ε."""
        bound = cost_of_privacy_bound([n_records] * n_owners, epsilon, c1=self.c1, c2=self.c2)
        return float(n_owners**self.owner_exponent * bound)

    def predict_alone(self, *, n_owners: int, n_records: float) -> float:
        """(a/n_1 + b)(1 − 1/N)."""
        return (self.alone_a / n_records + self.alone_b) * (1.0 - 1.0 / n_owners)

    def forecast(self, *, n_owners: int, n_records: int, epsilon: float) -> Forecast:
        """Forecast ψ of joining N owners of n records each at budget ε vs staying alone (§6).

        Raises
        ------
        InvalidPrivacyParameterError
            On N < 1, n < 1 or ε ≤ 0.
        """
        if isinstance(n_owners, bool) or not isinstance(n_owners, int) or n_owners < 1:
            raise InvalidPrivacyParameterError(f"n_owners must be an int >= 1, got {n_owners!r}")
        if not n_records >= 1 or not 0 < epsilon < math.inf:
            raise InvalidPrivacyParameterError("n_records must be >= 1 and epsilon finite and > 0")
        collab = self.predict_collaboration(n_owners=n_owners, n_records=n_records, epsilon=epsilon)
        alone = self.predict_alone(n_owners=n_owners, n_records=n_records)
        ranges = {"n_owners": n_owners, "n_records": n_records, "epsilon": epsilon}
        outside = False
        for key, value in ranges.items():
            lo_hi = self.calibration.get(key)
            if isinstance(lo_hi, list | tuple) and len(lo_hi) == 2:
                outside |= not float(lo_hi[0]) <= float(value) <= float(lo_hi[1])
        return Forecast(collab, alone, bool(collab < alone), outside)

    def to_json(self) -> str:
        """Indented JSON text."""
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes) -> CostOfPrivacyModel:
        """Parse :meth:`to_json` output.

        Raises
        ------
        DataValidationError
            On malformed JSON or fields.
        """
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            raise DataValidationError(f"invalid cost-of-privacy model JSON: {exc}") from exc

    @classmethod
    def load_default(cls) -> CostOfPrivacyModel:
        """The model shipped with the package (``pubsubml/methods/async_dp/forecast.json``).

        Raises
        ------
        DataValidationError
            If the file is missing or malformed.
        """
        try:
            text = (
                resources.files("pubsubml.methods.async_dp")
                .joinpath(DEFAULT_MODEL_RESOURCE)
                .read_text()
            )
        except FileNotFoundError as exc:
            raise DataValidationError(
                f"{DEFAULT_MODEL_RESOURCE} is missing; run `pubsubml bench async-dp-calibrate`"
            ) from exc
        return cls.from_json(text)
