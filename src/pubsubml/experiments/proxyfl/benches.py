"""The ProxyFL benchmarks behind ``docs/results/proxyfl-*`` (proxyfl.txt Fig. 3, Fig. 4, Fig. 5).

* ``proxyfl-accuracy`` (Fig. 3, §3.3): :mod:`~pubsubml.experiments.proxyfl.accuracy`;
* ``proxyfl-communication`` (Fig. 4, §3.4): :mod:`~pubsubml.experiments.proxyfl.communication`;
* ``proxyfl-ablations`` (Fig. 5, §4.2): :mod:`~pubsubml.experiments.proxyfl.ablations`.

None of them is cross-validated (``--folds 1``); seeds ``0 … N-1`` repeat the runs, and seed 0 is
the single run of the recorded results.

Examples
--------
>>> [exp.name for exp in EXPERIMENTS]
['proxyfl-accuracy', 'proxyfl-communication', 'proxyfl-ablations']
"""

from __future__ import annotations

from pubsubml.experiments.base import Experiment
from pubsubml.experiments.proxyfl.ablations import ABLATIONS
from pubsubml.experiments.proxyfl.accuracy import ACCURACY
from pubsubml.experiments.proxyfl.communication import COMMUNICATION

__all__ = ["EXPERIMENTS"]

EXPERIMENTS: tuple[Experiment, ...] = (ACCURACY, COMMUNICATION, ABLATIONS)
