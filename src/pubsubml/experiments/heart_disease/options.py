"""The options of ``heart-disease`` and what they select (:mod:`.experiment`).

``--protocol`` chooses FLamby's protocol, the hospitals protocol or both; ``--flower`` adds the
Flower rows (on by default, off with ``--smoke``); ``--clinic-repeats`` caps the repeats that run
the small clinics.
"""

from __future__ import annotations

from pubsubml.experiments.base import RunOptions

__all__ = ["NAME", "PROTOCOLS", "clinic_repeats", "flower_on", "protocols"]

NAME = "heart-disease"
PROTOCOLS = ("both", "flamby", "hospitals")


def protocols(opts: RunOptions) -> list[str]:
    """The protocols the run's ``--protocol`` selects, FLamby's first."""
    chosen = str(opts.params["protocol"])
    return ["flamby", "hospitals"] if chosen == "both" else [chosen]


def flower_on(opts: RunOptions) -> bool:
    """Whether FLamby's protocol adds the Flower rows: ``--flower``, default on, off with
    ``--smoke``."""
    value = opts.params.get("flower")
    return (not opts.smoke) if value is None else bool(value)


def clinic_repeats(opts: RunOptions) -> int:
    """How many of the first repeats also run the small clinics (1 with ``--smoke``)."""
    return min(opts.folds, 1 if opts.smoke else int(opts.params["clinic_repeats"]))
