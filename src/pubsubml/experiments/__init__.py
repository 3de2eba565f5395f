"""The papers' evaluations, reproduced on offline data: one package per paper.

* :mod:`~pubsubml.experiments.runner`: seeds × folds × parameter grid, mean ± standard error,
  files on disk; :mod:`~pubsubml.experiments.metrics`: the scores, all "higher is better";
* :mod:`~pubsubml.experiments.pubsub` (pubsub-ml.txt §7–8), :mod:`~pubsubml.experiments.stacking`
  (pfl-stacking.txt §4), :mod:`~pubsubml.experiments.proxyfl` (proxyfl.txt §4),
  :mod:`~pubsubml.experiments.domain_experts` (fl-domain-experts.txt §4) and
  :mod:`~pubsubml.experiments.async_dp` (async-dp-cost-of-privacy.txt §5–6).

Experiments use :mod:`pubsubml.methods` and :mod:`pubsubml.data`; only :mod:`pubsubml.cli` uses
them.  Modules are imported on use: nothing is re-exported here.
"""

__all__: list[str] = []
