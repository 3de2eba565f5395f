"""``pubsubml audit``: measure a lower bound on ε for a DP mechanism and compare it with the claim.

``pubsubml audit --learner mlp --epsilon 1`` trains the learner once with Dirac gradient canaries
(:func:`pubsubml.audit.dpsgd.audit_dpsgd`) and prints the accountant's claimed ε beside the
audited lower bound.  ``--variant noise-off`` (or ``noise-x0.1``, ``clip-off``) audits a
deliberately broken mechanism that keeps the correct one's claim: its bound should exceed it.
``--learner dp-logistic`` and ``--learner async-dp`` run many-run audits of diffprivlib's
logistic regression and of an async-DP owner's Laplace answer.  The grid over targets, ε and
variants is ``pubsubml bench privacy-audit``.

References
----------
Steinke, Nasr & Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023;
Jagielski, Ullman & Oprea, NeurIPS 2020 (many-run audits).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

__all__ = ["audit"]


def audit(
    learner: Annotated[
        str,
        typer.Option(
            help="'mlp' (DPMLPClassifier) or 'linear' (DPSGDLogisticRegression): one run with "
            "gradient canaries; 'dp-logistic' (diffprivlib) or 'async-dp' (an owner's Laplace "
            "answer): many runs."
        ),
    ] = "mlp",
    path: Annotated[
        str, typer.Option(help="DP-SGD engine path: 'stacked' (what fit runs) or 'generic'.")
    ] = "stacked",
    epsilon: Annotated[float, typer.Option(help="ε the run is calibrated to.")] = 1.0,
    delta: Annotated[float, typer.Option(help="δ of the guarantee (DP-SGD).")] = 1e-5,
    variant: Annotated[
        str,
        typer.Option(
            help="'correct', or a negative control: 'noise-off', 'noise-x0.1', 'clip-off' "
            "(DP-SGD); 'noise-x0.1', 'l2-clip' (async-dp); 'epsilon-x10' (dp-logistic)."
        ),
    ] = "correct",
    canaries: Annotated[
        int | None,
        typer.Option(
            help="Canaries m (DP-SGD, default 5000), or runs per data set (many-run audits: "
            "default 20000 for async-dp, 2000 for dp-logistic)."
        ),
    ] = None,
    rows: Annotated[
        int | None,
        typer.Option(
            help="Real training rows besides the canaries (DP-SGD, default 5000), or records "
            "(default 100 for async-dp, 30 for dp-logistic)."
        ),
    ] = None,
    confidence: Annotated[float, typer.Option(help="Confidence of the lower bound.")] = 0.95,
    seed: Annotated[int, typer.Option(help="Seed of the data, coins, weights and noise.")] = 0,
) -> None:
    """Audit a DP mechanism: its claimed ε against a measured lower bound."""
    from pubsubml.audit import AuditResult, audit_async_dp, audit_dpsgd
    from pubsubml.audit.diffprivlib import audit_dp_logistic

    many: dict[str, Any] = {"epsilon": epsilon, "variant": variant, "confidence": confidence}
    if canaries is not None:
        many["runs"] = canaries
    if rows is not None:
        many["n_records"] = rows
    try:
        r: AuditResult
        if learner == "async-dp":
            r = audit_async_dp(**many, seed=seed)
        elif learner == "dp-logistic":
            r = audit_dp_logistic(**many, seed=seed)
        else:
            r = audit_dpsgd(
                learner,  # type: ignore[arg-type]
                path=path,  # type: ignore[arg-type]
                epsilon=epsilon,
                delta=delta,
                variant=variant,
                canaries=canaries,
                rows=5000 if rows is None else rows,
                confidence=confidence,
                seed=seed,
            )
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    typer.echo(
        f"{r.target} ({r.method}, {variant}): claimed ε = {r.claimed_epsilon:.4g} at "
        f"δ = {r.delta:g}; audited lower bound {r.lower_bound:.4g} at {r.confidence:.0%} "
        f"confidence ({r.correct} of {r.guesses} guesses right, {r.runtime_s:.1f} s)"
    )
    verdict = (
        "VIOLATED: the mechanism leaks more than its claim"
        if r.violated
        else "consistent: the bound is below the claim (evidence, not a proof of DP)"
    )
    typer.echo(f"  {verdict}")
    if r.violated:
        raise typer.Exit(code=1)
