"""Privacy-audit experiments (:mod:`pubsubml.audit`): ``pubsubml bench privacy-audit``."""

from pubsubml.experiments.audit.privacy_audit import AUDIT, EXPERIMENTS

__all__ = ["AUDIT", "EXPERIMENTS"]
