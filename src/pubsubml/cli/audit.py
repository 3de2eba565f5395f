"""``pubsubml audit``: measure a lower bound on ε for a DP mechanism and compare it with the claim.

``pubsubml audit --target mlp --epsilon 1`` trains the DP-SGD network once with Dirac gradient
canaries and prints the accountant's claimed ε beside the audited lower bound.  ``--variant
noise-off`` (or ``noise-x0.1``, ``clip-off``, …) audits a deliberately broken mechanism that keeps
the correct one's claim: its bound should exceed it.  The targets are those of
:data:`pubsubml.audit.catalog.AUDITS`: the DP-SGD learners (``--path stacked``, ``generic`` or
``many-run``), ``dp-fedavg``, ``proxyfl``, ``domain-experts``, ``async-dp`` and the diffprivlib
models ``dp-logistic``, ``dp-naive-bayes``, ``dp-forest``.  The grid over targets, ε and variants
is ``pubsubml bench privacy-audit``.

Exit status: 0 when the bound is below the claim, 1 when it exceeds it (the claim is wrong),
2 on bad input.

References
----------
Steinke, Nasr & Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023;
Jagielski, Ullman & Oprea, NeurIPS 2020 (many-run audits).
"""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["audit"]


def audit(
    target: Annotated[
        str,
        typer.Option(
            "--target",
            "--learner",
            help="What to audit: 'mlp' or 'linear' (the DP-SGD learners), 'dp-fedavg' (central "
            "DP), 'proxyfl', 'domain-experts', 'async-dp', 'dp-logistic', 'dp-naive-bayes', "
            "'dp-forest'.",
        ),
    ] = "mlp",
    path: Annotated[
        str | None,
        typer.Option(
            help="The target's path: 'stacked' (what fit runs with a noise seed), 'generic', "
            "'secure' (the stacked path with the secure noise of a release) or 'many-run' for "
            "the DP-SGD learners; default the target's first."
        ),
    ] = None,
    epsilon: Annotated[float, typer.Option(help="ε the run is calibrated to.")] = 1.0,
    delta: Annotated[float, typer.Option(help="δ of the guarantee (DP-SGD-based targets).")] = 1e-5,
    variant: Annotated[
        str,
        typer.Option(
            help="'correct', or a negative control: 'noise-off', 'noise-x0.1', 'clip-off' "
            "(DP-SGD-based), 'paper-accounting' (proxyfl, domain-experts), 'l2-clip' "
            "(async-dp), 'epsilon-x10' (diffprivlib models)."
        ),
    ] = "correct",
    canaries: Annotated[
        int | None,
        typer.Option(
            help="Canaries m of a one-run audit (default 5000), or runs per data set of a "
            "many-run audit (default: enough to refute the claim, at least 2000)."
        ),
    ] = None,
    rows: Annotated[
        int | None,
        typer.Option(help="Real records (per client for dp-fedavg); default the audit's own."),
    ] = None,
    confidence: Annotated[float, typer.Option(help="Confidence of the lower bound.")] = 0.95,
    seed: Annotated[int, typer.Option(help="Seed of the data, coins, weights and noise.")] = 0,
) -> None:
    """Audit a DP mechanism: its claimed ε against a measured lower bound."""
    from pubsubml.audit.catalog import run_audit

    try:
        r = run_audit(
            target,
            path=path,
            epsilon=epsilon,
            delta=delta,
            variant=variant,
            size=canaries,
            rows=rows,
            confidence=confidence,
            seed=seed,
        )
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    size = "canaries" if r.method == "one-run" else "runs per data set"
    typer.echo(
        f"{r.target} ({r.method}, {r.canaries} {size}, {variant}): claimed ε = "
        f"{r.claimed_epsilon:.4g} at δ = {r.delta:g}; audited lower bound {r.lower_bound:.4g} "
        f"at {r.confidence:.0%} confidence ({r.correct} of {r.guesses} guesses right, "
        f"{r.runtime_s:.1f} s)"
    )
    verdict = (
        "VIOLATED: the mechanism leaks more than its claim"
        if r.violated
        else "consistent: the bound is below the claim (evidence, not a proof of DP)"
    )
    typer.echo(f"  {verdict}")
    if r.violated:
        raise typer.Exit(code=1)
