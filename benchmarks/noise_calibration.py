"""Noise calibration speed: :func:`pubsubml.privacy.calibrate_noise` against a plain PLD search.

For each setting and target ε ∈ {0.25, 1, 4} at δ = 10⁻⁵, both solve for the smallest DP-SGD noise
multiplier σ whose PLD ε after ``steps`` Poisson-subsampled Gaussian steps is at most the target:

* ours: ``calibrate_noise(ε, δ, q, steps)`` (RDP bracket, coarse PLD models, a safeguarded secant on
  the reporting accountant);
* reference: dp-accounting's ``calibrate_dp_mechanism`` with a fresh ``PLDAccountant`` per
  evaluation (Brent's method, its default bracket and tolerance), on the same PLD grid step Δ as
  ours (from :func:`pld_discretization_interval` at our σ), so both solve the same equation.

Settings (pubsub-ml.txt §7.2, Table 4: minibatch 100, 30 epochs):

* site: 500 rows per site → q = 100/500 = 0.2, 30 epochs → 150 steps;
* large: 50,000 rows → q = 0.002, 30 epochs → 15,000 steps.

The table gives both σ, their relative difference, the ε our accountant reports at each σ, both
wall-clock times with the process CPU time in parentheses, and the speed ratio (reference wall time
/ our wall time).  Timings are single runs on a shared machine; the 1-minute load average is printed
before and after.

Run: ``.venv/bin/python benchmarks/noise_calibration.py`` (``--targets``, ``--settings``).
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import dp_accounting
from dp_accounting.pld import PLDAccountant

from pubsubml.privacy import DPEvent, calibrate_noise, compute_epsilon, pld_discretization_interval

DELTA = 1e-5
SETTINGS = {"site": (0.2, 150), "large": (0.002, 15_000)}


def _event(sigma: float, q: float, steps: int) -> DPEvent:
    return DPEvent(
        mechanism="subsampled_gaussian", noise_multiplier=sigma, sample_rate=q, count=steps
    )


def _reference(target: float, q: float, steps: int, interval: float) -> float:
    def make_event(sigma: float) -> dp_accounting.DpEvent:
        return dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps
        )

    return float(
        dp_accounting.calibrate_dp_mechanism(
            lambda: PLDAccountant(value_discretization_interval=interval),
            make_event,
            target,
            DELTA,
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=float, nargs="+", default=[0.25, 1.0, 4.0])
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    args = parser.parse_args()

    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}"
    )
    print(f"load average (1 min) before: {os.getloadavg()[0]:.2f}")
    print()
    print(
        "| setting | q | steps | ε* | Δ | σ ours | σ reference | rel. diff | ε(σ ours) "
        "| ε(σ ref) | ours, wall (CPU) s | reference, wall (CPU) s | speed-up (wall) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.settings:
        q, steps = SETTINGS[name]
        for target in args.targets:
            start, cpu = time.perf_counter(), time.process_time()
            ours = calibrate_noise(target, DELTA, q, steps)
            t_ours, c_ours = time.perf_counter() - start, time.process_time() - cpu
            interval = pld_discretization_interval([_event(ours, q, steps)], DELTA)
            start, cpu = time.perf_counter(), time.process_time()
            reference = _reference(target, q, steps, interval)
            t_ref, c_ref = time.perf_counter() - start, time.process_time() - cpu
            eps_ours = compute_epsilon([_event(ours, q, steps)], DELTA)
            eps_ref = compute_epsilon([_event(reference, q, steps)], DELTA)
            print(
                f"| {name} | {q:g} | {steps} | {target:g} | {interval:g} | {ours:.5f} "
                f"| {reference:.5f} | {(ours - reference) / reference:+.3%} | {eps_ours:.5f} "
                f"| {eps_ref:.5f} | {t_ours:.2f} ({c_ours:.2f}) | {t_ref:.2f} ({c_ref:.2f}) "
                f"| {t_ref / t_ours:.1f}x |",
                flush=True,
            )
    print()
    print(f"load average (1 min) after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
