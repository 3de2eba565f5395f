"""Empirical privacy auditing: measured lower bounds on ε against the accountant's claim.

* :mod:`~pubsubml.audit.bounds`: ε lower bounds from membership guesses, one run (Steinke, Nasr &
  Jagielski, NeurIPS 2023) or many runs (Clopper–Pearson);
* :mod:`~pubsubml.audit.guesses`: guessing with abstention, the best bound over fixed guess counts;
* :mod:`~pubsubml.audit.dpsgd`: one-run audits of the DP-SGD learners with Dirac gradient canaries;
* :mod:`~pubsubml.audit.async_dp`: a many-run audit of the async-DP owners' Laplace answers.

``pubsubml audit`` and ``pubsubml bench privacy-audit`` run them; docs/audit.md says what an audit
can and cannot show.
"""

from pubsubml.audit.async_dp import audit_async_dp
from pubsubml.audit.bounds import many_run_epsilon_lower_bound, one_run_epsilon_lower_bound
from pubsubml.audit.dpsgd import audit_dpsgd
from pubsubml.audit.result import AuditResult

__all__ = [
    "AuditResult",
    "audit_async_dp",
    "audit_dpsgd",
    "many_run_epsilon_lower_bound",
    "one_run_epsilon_lower_bound",
]
