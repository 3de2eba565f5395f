"""The four domain-experts experiments (fl-domain-experts.txt §4.1–4.4, §7) for the catalog.

``EXPERIMENTS`` gathers :data:`~.experiments.CLASSIFICATION` (§4.2, Fig. 6),
:data:`~.incentives.INCENTIVES` (§4.4.4, §7), :data:`~.mnist1d.MNIST1D` (§4.3, Fig. 7) and
:data:`~.experiments.REGRESSION` (§4.1, Fig. 4–5); ``pubsubml bench NAME`` runs each.

Examples
--------
>>> [e.name for e in EXPERIMENTS]  # doctest: +NORMALIZE_WHITESPACE
['domain-experts-classification', 'domain-experts-incentives', 'domain-experts-mnist1d',
 'domain-experts-regression']
"""

from __future__ import annotations

from pubsubml.experiments.base import Experiment
from pubsubml.experiments.domain_experts.experiments import CLASSIFICATION, REGRESSION
from pubsubml.experiments.domain_experts.incentives import INCENTIVES
from pubsubml.experiments.domain_experts.mnist1d import MNIST1D

__all__ = ["EXPERIMENTS"]

EXPERIMENTS: tuple[Experiment, ...] = (CLASSIFICATION, INCENTIVES, MNIST1D, REGRESSION)
"""Every ``domain-experts-*`` experiment, by name."""
