"""Differential privacy: accountants, noise calibration, mechanisms and the per-site ledger.

Every release is a :class:`DPEvent` (a private selection over several runs is one
``repeat_and_select`` event, :func:`repeat_and_select_event`); ε is always computed by an
accountant from what actually ran (pubsub-ml.txt §3.1), and a site's releases are charged to its
:class:`PrivacyLedger`, which composes them sequentially within a data chunk and in parallel
across disjoint chunks (pubsub-ml.txt §3.1 Theorem 1, §6.2 Theorems 5–6).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pubsubml.lazy import attach

if TYPE_CHECKING:
    from pubsubml.privacy.accountant import (
        DEFAULT_DELTA,
        PLDPrivacyAccountant,
        PrivacyAccountant,
        RDPPrivacyAccountant,
        check_delta,
        check_epsilon,
        compute_epsilon,
        create_accountant,
        pld_discretization_interval,
        register_accountant,
    )
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
    "repeat_and_select_event",
    "sample_repetitions",
]

__getattr__, __dir__ = attach(__name__, __file__)
