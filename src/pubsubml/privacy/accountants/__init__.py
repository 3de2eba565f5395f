"""Privacy accountants: one interface, one subclass per backend, one factory (Opacus' shape).

:class:`PrivacyAccountant` is the interface (:mod:`~pubsubml.privacy.accountants.accountant`);
:class:`PLDPrivacyAccountant` (privacy loss distributions, tight), :class:`RDPPrivacyAccountant`
(Rényi DP, conservative and fast) and :class:`PurePrivacyAccountant` (basic composition of pure
ε-DP events at δ = 0) each own their math; :func:`create_accountant` makes one by name from the
registry that :func:`register_accountant` extends.  :func:`release_epsilon` is the ε of a
release from its DP events, which every reported ε goes through.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pubsubml.lazy import attach

if TYPE_CHECKING:
    from pubsubml.privacy.accountants.accountant import PrivacyAccountant
    from pubsubml.privacy.accountants.approximate import ApproximateDPAccountant
    from pubsubml.privacy.accountants.composition import neighbouring_of
    from pubsubml.privacy.accountants.parameters import DEFAULT_DELTA, check_delta, check_epsilon
    from pubsubml.privacy.accountants.pld import (
        PLD_RESOLUTION,
        PLDPrivacyAccountant,
        pld_discretization_interval,
    )
    from pubsubml.privacy.accountants.pure import PurePrivacyAccountant
    from pubsubml.privacy.accountants.rdp import RDPPrivacyAccountant
    from pubsubml.privacy.accountants.registry import (
        accountant_class,
        create_accountant,
        register_accountant,
    )
    from pubsubml.privacy.accountants.release import (
        compute_epsilon,
        default_accountant,
        release_epsilon,
    )

__all__ = [
    "DEFAULT_DELTA",
    "PLD_RESOLUTION",
    "ApproximateDPAccountant",
    "PLDPrivacyAccountant",
    "PrivacyAccountant",
    "PurePrivacyAccountant",
    "RDPPrivacyAccountant",
    "accountant_class",
    "check_delta",
    "check_epsilon",
    "compute_epsilon",
    "create_accountant",
    "default_accountant",
    "neighbouring_of",
    "pld_discretization_interval",
    "register_accountant",
    "release_epsilon",
]

__getattr__, __dir__ = attach(__name__, __file__)
