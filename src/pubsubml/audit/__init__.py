"""Empirical privacy auditing: measured lower bounds on ε against the accountant's claim.

* :mod:`~pubsubml.audit.bounds`: ε lower bounds from membership guesses, one run (Steinke, Nasr &
  Jagielski, NeurIPS 2023) or many runs (Clopper–Pearson);
* :mod:`~pubsubml.audit.guesses`: guessing with abstention, Dirac-canary scores, the best bound
  over fixed guess counts, the runs a many-run audit needs;
* :mod:`~pubsubml.audit.catalog`: every audit by target name (:func:`run_audit`);
* one-run audits with Dirac gradient canaries: :mod:`~pubsubml.audit.dpsgd` (the DP-SGD
  learners), :mod:`~pubsubml.audit.dp_fedavg` (client-level DP-FedAvg),
  :mod:`~pubsubml.audit.proxyfl` (ProxyFL proxies), :mod:`~pubsubml.audit.domain_experts` (the
  domain-experts general model);
* many-run audits: :mod:`~pubsubml.audit.dpsgd_many_run` (the DP-SGD engine),
  :mod:`~pubsubml.audit.async_dp` (async-DP Laplace answers), :mod:`~pubsubml.audit.diffprivlib`
  (diffprivlib's logistic regression, naive Bayes and random forest).

``pubsubml audit`` and ``pubsubml bench privacy-audit`` run them; docs/audit.md says what an audit
can and cannot show.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pubsubml.lazy import attach

if TYPE_CHECKING:
    from pubsubml.audit.async_dp import audit_async_dp
    from pubsubml.audit.bounds import many_run_epsilon_lower_bound, one_run_epsilon_lower_bound
    from pubsubml.audit.catalog import AUDITS, run_audit
    from pubsubml.audit.dpsgd import audit_dpsgd
    from pubsubml.audit.result import AuditResult

__all__ = [
    "AUDITS",
    "AuditResult",
    "audit_async_dp",
    "audit_dpsgd",
    "many_run_epsilon_lower_bound",
    "one_run_epsilon_lower_bound",
    "run_audit",
]

__getattr__, __dir__ = attach(__name__, __file__)
