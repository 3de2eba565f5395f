"""Differential privacy: accountants, noise calibration, mechanisms and the per-site ledger.

Every release is a :class:`DPEvent` (a private selection over several runs is one
``repeat_and_select`` event, :func:`repeat_and_select_event`); ε is always computed by an
accountant (:mod:`pubsubml.privacy.accountants`) from what actually ran, through
:func:`release_epsilon` (pubsub-ml.txt §3.1).  The DP-SGD engine that trains models is
:mod:`pubsubml.privacy.dpsgd`.  A site's releases are charged to its
:class:`PrivacyLedger`, which composes them sequentially within a data chunk and in parallel
across disjoint chunks (pubsub-ml.txt §3.1 Theorem 1, §6.2 Theorems 5–6).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pubsubml.lazy import attach

if TYPE_CHECKING:
    from pubsubml.privacy.accountants.accountant import PrivacyAccountant
    from pubsubml.privacy.accountants.parameters import DEFAULT_DELTA, check_delta, check_epsilon
    from pubsubml.privacy.accountants.pld import PLDPrivacyAccountant, pld_discretization_interval
    from pubsubml.privacy.accountants.pure import PurePrivacyAccountant
    from pubsubml.privacy.accountants.rdp import RDPPrivacyAccountant
    from pubsubml.privacy.accountants.registry import create_accountant, register_accountant
    from pubsubml.privacy.accountants.release import compute_epsilon, release_epsilon
    from pubsubml.privacy.calibration import calibrate_noise
    from pubsubml.privacy.events import DPEvent, Mechanism
    from pubsubml.privacy.ledger import PrivacyLedger, Release
    from pubsubml.privacy.mechanisms import clip_by_l2_norm, gaussian_mechanism, laplace_mechanism
    from pubsubml.privacy.repetitions import repeat_and_select_event, sample_repetitions

__all__ = [
    "DEFAULT_DELTA",
    "DPEvent",
    "Mechanism",
    "PLDPrivacyAccountant",
    "PrivacyAccountant",
    "PrivacyLedger",
    "PurePrivacyAccountant",
    "RDPPrivacyAccountant",
    "Release",
    "calibrate_noise",
    "check_delta",
    "check_epsilon",
    "clip_by_l2_norm",
    "compute_epsilon",
    "create_accountant",
    "gaussian_mechanism",
    "laplace_mechanism",
    "pld_discretization_interval",
    "register_accountant",
    "release_epsilon",
    "repeat_and_select_event",
    "sample_repetitions",
]

__getattr__, __dir__ = attach(__name__, __file__)
