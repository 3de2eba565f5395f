"""FL with private domain experts (fl-domain-experts.txt §3).

* :mod:`~pubsubml.methods.domain_experts.federation`: Algorithms 1 and 2 (:class:`DomainExpertsFL`);
* :mod:`~pubsubml.methods.domain_experts.gate`: the mixture of the general model and an expert;
* :mod:`~pubsubml.methods.domain_experts.early_stopping`: FT-FL / FT-DP-FL and the domain-only baseline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pubsubml.lazy import attach

if TYPE_CHECKING:
    from pubsubml.methods.domain_experts.federation import DomainExpertsFL

__all__ = [
    "DomainExpertsFL",
]

__getattr__, __dir__ = attach(__name__, __file__)
