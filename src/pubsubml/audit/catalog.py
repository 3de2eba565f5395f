"""Every audit the package runs, by name: what it audits, its variants, and one way to run it.

``pubsubml audit --target NAME`` and ``pubsubml bench privacy-audit`` go through
:func:`run_audit`, so both run exactly the same audits with the same defaults.

=====================  ============================  ==========================================
target                 paths                         what is audited
=====================  ============================  ==========================================
``mlp``, ``linear``    stacked, generic, many-run    the DP-SGD learners (one run with Dirac
                                                     canaries on either engine path, or many
                                                     runs of the stacked path)
``dp-fedavg``          central                       client-level DP-FedAvg (canary clients)
``proxyfl``            cohort                        a ProxyFL client's DP proxy
``domain-experts``     users                         a domain-experts user's M_G messages
``async-dp``           laplace                       an async-DP owner's Laplace answer
``dp-logistic``,       diffprivlib                   diffprivlib's logistic regression, naive
``dp-naive-bayes``,                                  Bayes and random forest (many black-box
``dp-forest``                                        fits)
=====================  ============================  ==========================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pubsubml.audit.async_dp import ASYNC_VARIANTS, audit_async_dp
from pubsubml.audit.diffprivlib import LOGISTIC_VARIANTS, audit_diffprivlib
from pubsubml.audit.domain_experts import EXPERTS_VARIANTS, audit_domain_experts
from pubsubml.audit.dp_fedavg import audit_dp_fedavg
from pubsubml.audit.dpsgd import VARIANTS, audit_dpsgd
from pubsubml.audit.dpsgd_many_run import audit_dpsgd_many_run
from pubsubml.audit.guesses import runs_to_refute
from pubsubml.audit.proxyfl import PROXYFL_VARIANTS, audit_proxyfl
from pubsubml.audit.result import AuditResult

__all__ = ["AUDITS", "AuditTarget", "run_audit"]


@dataclass(frozen=True)
class AuditTarget:
    """One auditable mechanism.

    Attributes
    ----------
    paths : tuple of str
        Its code paths or audit kinds; the first is the default.
    variants : tuple of str
        ``"correct"`` and its negative controls.
    many_run : tuple of str
        The paths that are many-run audits (``size`` is then runs per data set).
    run : callable
        ``run(path, epsilon, delta, variant, size, rows, confidence, seed) -> AuditResult``;
        ``size`` and ``rows`` may be None (the audit's defaults).
    """

    paths: tuple[str, ...]
    variants: tuple[str, ...]
    many_run: tuple[str, ...]
    run: Callable[..., AuditResult]


def _opt(**kwargs: Any) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if v is not None}


def _dpsgd(learner: Literal["mlp", "linear"]) -> Callable[..., AuditResult]:
    def run(path: str, epsilon: float, delta: float, variant: str, size: int | None,
            rows: int | None, confidence: float, seed: int) -> AuditResult:  # fmt: skip
        if path == "many-run":
            return audit_dpsgd_many_run(
                learner, epsilon=epsilon, delta=delta, variant=variant, confidence=confidence,
                seed=seed, **_opt(runs=size, rows=rows),
            )  # fmt: skip
        return audit_dpsgd(
            learner, path=path, epsilon=epsilon, delta=delta, variant=variant,  # type: ignore[arg-type]
            confidence=confidence, seed=seed, **_opt(canaries=size, rows=rows),
        )  # fmt: skip

    return run


def _one_run(audit: Callable[..., AuditResult], rows_name: str) -> Callable[..., AuditResult]:
    def run(path: str, epsilon: float, delta: float, variant: str, size: int | None,
            rows: int | None, confidence: float, seed: int) -> AuditResult:  # fmt: skip
        extra = _opt(canaries=size, **{rows_name: rows})
        return audit(
            epsilon=epsilon, delta=delta, variant=variant, confidence=confidence, seed=seed,
            **extra,
        )  # fmt: skip

    return run


def _many_run(audit: Callable[..., AuditResult], minimum: int) -> Callable[..., AuditResult]:
    def run(path: str, epsilon: float, delta: float, variant: str, size: int | None,
            rows: int | None, confidence: float, seed: int) -> AuditResult:  # fmt: skip
        runs = runs_to_refute(epsilon, minimum) if size is None else size
        return audit(
            epsilon=epsilon, variant=variant, runs=runs, confidence=confidence, seed=seed,
            **_opt(n_records=rows),
        )  # fmt: skip

    return run


def _diffprivlib(model: Literal["logistic", "naive_bayes", "forest"]) -> Callable[..., AuditResult]:
    def audit(**kwargs: Any) -> AuditResult:
        return audit_diffprivlib(model, **kwargs)

    return _many_run(audit, 2_000)


#: The audits by target name (module docstring).
AUDITS: dict[str, AuditTarget] = {
    "mlp": AuditTarget(
        ("stacked", "generic", "secure", "many-run"), VARIANTS, ("many-run",), _dpsgd("mlp")
    ),
    "linear": AuditTarget(
        ("stacked", "generic", "secure", "many-run"), VARIANTS, ("many-run",), _dpsgd("linear")
    ),
    "dp-fedavg": AuditTarget(
        ("central",), VARIANTS, (), _one_run(audit_dp_fedavg, "rows_per_client")
    ),
    "proxyfl": AuditTarget(("cohort",), PROXYFL_VARIANTS, (), _one_run(audit_proxyfl, "rows")),
    "domain-experts": AuditTarget(
        ("users",), EXPERTS_VARIANTS, (), _one_run(audit_domain_experts, "rows")
    ),
    "async-dp": AuditTarget(
        ("laplace",), ASYNC_VARIANTS, ("laplace",), _many_run(audit_async_dp, 20_000)
    ),
    "dp-logistic": AuditTarget(
        ("diffprivlib",), LOGISTIC_VARIANTS, ("diffprivlib",), _diffprivlib("logistic")
    ),
    "dp-naive-bayes": AuditTarget(
        ("diffprivlib",), LOGISTIC_VARIANTS, ("diffprivlib",), _diffprivlib("naive_bayes")
    ),
    "dp-forest": AuditTarget(
        ("diffprivlib",), LOGISTIC_VARIANTS, ("diffprivlib",), _diffprivlib("forest")
    ),
}


def run_audit(
    target: str,
    *,
    path: str | None = None,
    epsilon: float = 1.0,
    delta: float = 1e-5,
    variant: str = "correct",
    size: int | None = None,
    rows: int | None = None,
    confidence: float = 0.95,
    seed: int = 0,
) -> AuditResult:
    """Run one audit of :data:`AUDITS`.

    Parameters
    ----------
    target : str
        A key of :data:`AUDITS`.
    path : str, optional
        One of the target's paths, default its first.
    epsilon, delta : float
        The claim's target (δ is ignored by the pure-DP many-run audits, which report δ = 0).
    variant : str, default="correct"
        ``"correct"`` or one of the target's negative controls.
    size : int, optional
        Canaries (one run) or runs per data set (many runs); default the audit's own, for many
        runs at least :func:`~pubsubml.audit.guesses.runs_to_refute` of ``epsilon``.
    rows : int, optional
        Real records (per client for ``dp-fedavg``); default the audit's own.
    confidence : float, default=0.95
    seed : int, default=0

    Returns
    -------
    AuditResult

    Raises
    ------
    ValueError
        An unknown target, path or variant, or a parameter out of range.
    """
    if target not in AUDITS:
        raise ValueError(f"unknown audit target {target!r}; choose one of {list(AUDITS)}")
    spec = AUDITS[target]
    chosen = spec.paths[0] if path is None else path
    if chosen not in spec.paths:
        raise ValueError(f"unknown path {chosen!r} for {target}; choose one of {list(spec.paths)}")
    if variant not in spec.variants:
        raise ValueError(
            f"unknown variant {variant!r} for {target}; choose one of {list(spec.variants)}"
        )
    return spec.run(chosen, epsilon, delta, variant, size, rows, confidence, seed)
