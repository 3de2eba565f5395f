"""``pubsubml forecast``: will a private collaboration pay, by the fitted cost of privacy?

``pubsubml forecast --owners 10 --records 10000 --epsilon 1`` prints the predicted ψ of the
collaboration and of one owner alone, and the verdict.  The ``async-dp-*`` experiments are
``pubsubml bench async-dp-*`` (:mod:`pubsubml.experiments.async_dp.experiments`).

References
----------
async-dp-cost-of-privacy.txt §5–§6 (forecasting the value of collaboration in a data market).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["forecast"]


def forecast(
    owners: Annotated[
        int, typer.Option("--owners", min=1, help="Number N of collaborating data owners.")
    ],
    records: Annotated[
        int, typer.Option("--records", min=1, help="Records n_i held by each owner.")
    ],
    epsilon: Annotated[
        float, typer.Option("--epsilon", min=0.0, help="Privacy budget ε_i of each owner.")
    ],
    model: Annotated[
        Path | None,
        typer.Option(help="Fitted model JSON (default: the one shipped with pubsubml)."),
    ] = None,
) -> None:
    """Forecast ψ of a private collaboration vs one owner's non-private model, and say if it pays."""
    from pubsubml.errors import PubsubmlError
    from pubsubml.methods.async_dp.cost import CostOfPrivacyModel

    try:
        fitted = (
            CostOfPrivacyModel.from_json(model.read_text())
            if model
            else CostOfPrivacyModel.load_default()
        )
        result = fitted.forecast(n_owners=owners, n_records=records, epsilon=epsilon)
    except (PubsubmlError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    typer.echo(
        f"Collaboration of N={owners} owners with n_i={records} records each at ε_i={epsilon:g} "
        f"(T={fitted.horizon}, bound of Eq. 11 with c̄1={fitted.c1:.4g}, c̄2={fitted.c2:.4g}):"
    )
    typer.echo(f"  predicted ψ, private collaboration:        {result.psi_collaboration:.4g}")
    typer.echo(f"  predicted ψ, one owner alone (non-private): {result.psi_alone:.4g}")
    verdict = (
        "collaborating is expected to pay"
        if result.pays
        else "collaborating is NOT expected to pay"
    )
    typer.echo(f"Verdict: {verdict}.")
    if result.extrapolated:
        typer.echo(
            "Note: outside the calibration ranges "
            + str({k: fitted.calibration.get(k) for k in ("n_owners", "n_records", "epsilon")})
            + "; the forecast is an extrapolation."
        )
