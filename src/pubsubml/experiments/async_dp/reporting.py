"""Shared pieces of the asynchronous DP experiments: sizes, tables, figure layout, runs.

References
----------
async-dp-cost-of-privacy.txt §5.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from pubsubml.experiments.async_dp.tasks import RegressionTask, ReplicaResult, run_replicas

__all__ = [
    "NOISE_REGIME",
    "NONPRIVATE_EPSILON",
    "AsyncDPExperimentConfig",
    "figure_layout",
    "noise_regime",
    "run_task",
    "write_table",
]

Size = Literal["smoke", "full"]
#: ε used for the non-private reference runs of the same algorithm (noise scale ~1e-10 of Ξ).
NONPRIVATE_EPSILON = 1e12
#: ψ > 10·ψ(non-private) and ψ < 1: the DP noise dominates and the box Θ is not binding.
NOISE_REGIME = (10.0, 1.0)


@dataclasses.dataclass(frozen=True)
class AsyncDPExperimentConfig:
    """Sizes shared by the experiments (``smoke`` or ``full``)."""

    size: Size
    horizon: int
    replicas: int
    seed: int = 0

    @classmethod
    def create(cls, size: Size, *, seed: int = 0) -> AsyncDPExperimentConfig:
        """``smoke``: T = 60, 6 runs; ``full``: T = 1,000, 100 runs (Fig. 2: 100 runs)."""
        return cls(size, 60, 6, seed) if size == "smoke" else cls(size, 1000, 100, seed)

    @property
    def smoke(self) -> bool:
        """True for the CI configuration."""
        return self.size == "smoke"


def figure_layout(cfg: AsyncDPExperimentConfig) -> Literal["constrained"] | None:
    """Constrained layout for full runs; none for smoke runs (it costs seconds on log axes)."""
    return None if cfg.smoke else "constrained"


def write_table(frame: pd.DataFrame, path: Path, *, title: str, notes: str = "") -> None:
    """Write ``frame`` as CSV (``path``) and as a Markdown table (``path`` with ``.md``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)

    def cell(value: Any) -> str:
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    lines = [f"# {title}", "", notes, ""] if notes else [f"# {title}", ""]
    lines.append("| " + " | ".join(map(str, frame.columns)) + " |")
    lines.append("|" + "---|" * len(frame.columns))
    lines.extend(
        "| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)
    )
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")


def run_task(
    task: RegressionTask,
    epsilon: float,
    cfg: AsyncDPExperimentConfig,
    *,
    replicas: int | None = None,
    record_path: bool = False,
    clip_norm: float | None = None,
) -> ReplicaResult:
    """:func:`~pubsubml.experiments.async_dp.tasks.run_replicas` with the sizes of ``cfg``."""
    return run_replicas(
        task,
        epsilon=epsilon,
        horizon=cfg.horizon,
        replicas=replicas or cfg.replicas,
        seed=cfg.seed,
        record_path=record_path,
        clip_norm=clip_norm,
    )


def noise_regime(psi: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """Which mean ψ lie in :data:`NOISE_REGIME` relative to the non-private ψ ``floor``."""
    low, high = NOISE_REGIME
    return (psi > low * floor) & (psi < high)
