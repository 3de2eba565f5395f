"""``pubsubml audit``: measure a lower bound on ε for a DP-SGD learner, in one training run.

``pubsubml audit --learner mlp --epsilon 1`` trains the learner once with Dirac gradient canaries
(:func:`pubsubml.audit.dpsgd.audit_dpsgd`) and prints the accountant's claimed ε beside the
audited lower bound.  ``--variant noise-off`` (or ``noise-x0.1``, ``clip-off``) audits a
deliberately broken mechanism that keeps the correct one's claim: its bound should exceed it.
The grid over learners, ε and variants is ``pubsubml bench privacy-audit``.

References
----------
Steinke, Nasr & Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023.
"""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["audit"]


def audit(
    learner: Annotated[
        str, typer.Option(help="'mlp' (DPMLPClassifier) or 'linear' (DPSGDLogisticRegression).")
    ] = "mlp",
    path: Annotated[
        str, typer.Option(help="DP-SGD engine path: 'stacked' (what fit runs) or 'generic'.")
    ] = "stacked",
    epsilon: Annotated[float, typer.Option(help="ε the run is calibrated to.")] = 1.0,
    delta: Annotated[float, typer.Option(help="δ of the guarantee.")] = 1e-5,
    variant: Annotated[
        str,
        typer.Option(
            help="'correct', or a negative control: 'noise-off', 'noise-x0.1', 'clip-off'."
        ),
    ] = "correct",
    canaries: Annotated[
        int | None, typer.Option(help="Number m of canaries (default 5000).")
    ] = None,
    rows: Annotated[int, typer.Option(help="Real training rows besides the canaries.")] = 5000,
    confidence: Annotated[float, typer.Option(help="Confidence of the lower bound.")] = 0.95,
    seed: Annotated[int, typer.Option(help="Seed of the rows, coins, weights and noise.")] = 0,
) -> None:
    """Audit a DP-SGD learner: its claimed ε against a measured lower bound (one run)."""
    from pubsubml.audit.dpsgd import audit_dpsgd

    try:
        r = audit_dpsgd(
            learner,  # type: ignore[arg-type]
            path=path,  # type: ignore[arg-type]
            epsilon=epsilon,
            delta=delta,
            variant=variant,
            canaries=canaries,
            rows=rows,
            confidence=confidence,
            seed=seed,
        )
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    typer.echo(
        f"{r.target} ({path}, {variant}): claimed ε = {r.claimed_epsilon:.4g} at δ = {r.delta:g}; "
        f"audited lower bound {r.lower_bound:.4g} at {r.confidence:.0%} confidence "
        f"({r.correct} of {r.guesses} guesses right, m = {r.canaries}, {r.runtime_s:.1f} s)"
    )
    verdict = (
        "VIOLATED: the mechanism leaks more than its claim"
        if r.violated
        else "consistent: the bound is below the claim (evidence, not a proof of DP)"
    )
    typer.echo(f"  {verdict}")
    if r.violated:
        raise typer.Exit(code=1)
