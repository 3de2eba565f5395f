"""FL with private domain experts (fl-domain-experts.txt §3).

* :mod:`~pubsubml.methods.domain_experts.federation`: Algorithms 1 and 2 (:class:`DomainExpertsFL`);
* :mod:`~pubsubml.methods.domain_experts.gate`: the mixture of the general model and an expert;
* :mod:`~pubsubml.methods.domain_experts.finetune`: FT-FL / FT-DP-FL and the domain-only baseline.
"""

from __future__ import annotations

from pubsubml.methods.domain_experts.federation import DomainExpertsFL

__all__ = [
    "DomainExpertsFL",
]
