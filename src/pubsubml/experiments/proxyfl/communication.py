"""``proxyfl-communication``: time and bytes per round, exponential-graph PushSum vs a server.

The analogue of proxyfl.txt Fig. 4 (§3.4): one OS process per client exchanges a proxy-sized
vector every round over ``torch.distributed`` (gloo on 127.0.0.1), either by PushSum over the
time-varying exponential graph (one message to one peer) or through rank 0 as a central server.
The exchanged values are fixed; seed ``i`` is the ``i``-th repetition of the timing.

The processes of one measurement use the machine's cores, so measurements run one at a time:
``--jobs`` above 1 is refused.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from pubsubml.experiments.base import Experiment, RunOptions
from pubsubml.experiments.proxyfl.setups import command_line
from pubsubml.experiments.reports import mean_se_cell, write_results
from pubsubml.methods.proxyfl.peers import launch_comm_bench

__all__ = ["COMMUNICATION", "run_communication_fold"]

PROXY_FLOATS = 40 * 200 + 200 + 200 * 200 + 200 + 200 * 10 + 10  # the mnist1d proxy: 50,410
SCHEMES = ("pushsum", "central")
MEASURES = [
    "ms_per_round_median", "ms_per_round_mean", "KB_sent_per_client", "KB_busiest_node",
    "KB_total",
]  # fmt: skip


def timed_rounds(smoke: bool) -> int:
    """Rounds timed per measurement (after 3 warm-up rounds)."""
    return 3 if smoke else 20


def communication_grid(options: RunOptions) -> list[dict[str, Any]]:
    """One setting per (number of clients, scheme)."""
    counts = [2] if options.smoke else [2, 4, 8, 16]
    return [
        {"clients": k, "scheme": scheme, "smoke": options.smoke}
        for k in counts
        for scheme in SCHEMES
    ]


def run_communication_fold(
    seed: int, fold: int, *, clients: int, scheme: str, smoke: bool
) -> list[dict[str, Any]]:
    """Launch ``clients`` peer processes exchanging under ``scheme``; one record of times and bytes.

    ``seed`` numbers the repetition (nothing in the measurement is random); ``fold`` is always 0.
    Times are those of the slowest peer in each round; the busiest node's traffic counts both
    directions: PushSum sends and receives one message, the central server (rank 0) receives as
    much as it sends.
    """
    with tempfile.TemporaryDirectory() as tmp:
        results = launch_comm_bench(
            n_clients=clients,
            scheme=scheme,
            dim=PROXY_FLOATS,
            rounds=timed_rounds(smoke),
            out_dir=Path(tmp),
        )
    per_round = pd.DataFrame([r["seconds"] for r in results]).max(axis=0)  # slowest peer
    sent = [r["bytes_sent"] for r in results]
    busiest = 2 * (sent[0] if scheme == "central" else max(sent))
    return [
        {
            "ms_per_round_median": 1e3 * float(per_round.median()),
            "ms_per_round_mean": 1e3 * float(per_round.mean()),
            "KB_sent_per_client": float(pd.Series(sent[1:] or sent).mean()) / 1e3,
            "KB_busiest_node": busiest / 1e3,
            "KB_total": float(sum(sent)) / 1e3,
        }
    ]


def communication_summary(measured: pd.DataFrame, seeds: int) -> pd.DataFrame:
    """The measures per (clients, scheme); mean ± SE over seeds when there are several."""
    if seeds == 1:
        return measured.drop(columns="seed")
    groups = measured.groupby(["clients", "scheme"], sort=False)
    cells = {m: groups[m].agg(lambda v: mean_se_cell(v, digits=3)) for m in MEASURES}
    return pd.DataFrame(cells).reset_index()


def communication_figure(measured: pd.DataFrame) -> Figure:
    """Median time per round and the busiest node's traffic against the number of clients."""
    means = measured.groupby(["scheme", "clients"])[MEASURES].mean().reset_index()
    fig = Figure(figsize=(10, 4), layout="tight")
    axes = fig.subplots(1, 2)
    for scheme, sub in means.groupby("scheme"):
        axes[0].plot(sub["clients"], sub["ms_per_round_median"], "o-", label=scheme)
        axes[1].plot(sub["clients"], sub["KB_busiest_node"] / 1e3, "o-", label=scheme)
    axes[0].set(xlabel="clients (processes)", ylabel="ms per round (median)", title="time")
    axes[1].set(xlabel="clients (processes)", ylabel="MB per round, busiest node", title="volume")
    axes[0].legend()
    return fig


def _notes(options: RunOptions) -> str:
    repeats = (
        f"  {options.seeds} repetitions (--seeds): mean ± SE over them."
        if options.seeds > 1
        else ""
    )
    return (
        f"Command: `{command_line('proxyfl-communication', options)}`.  One OS process per "
        f"client, gloo over 127.0.0.1 on a shared 2-core x86-64 CPU; {timed_rounds(options.smoke)} "
        "timed rounds after 3 warm-up rounds, a barrier before each, time of the slowest peer; a "
        f"proxy of {PROXY_FLOATS} float32.  PushSum: each client sends one message of d + 1 floats "
        "to one peer.  Central: rank 0 is the server (receives K − 1 models, sends K − 1 means).  "
        "Busiest-node traffic counts both directions.  Measurements run one at a time (--jobs 1): "
        "parallel runs would compete for the cores and distort the times." + repeats
    )


def communication_report(table: pd.DataFrame, out_dir: Path, options: RunOptions) -> list[Path]:
    """Write ``proxyfl-communication.{csv,md,png}``."""
    measured = table[["seed", "clients", "scheme", *MEASURES]].reset_index(drop=True)
    return write_results(
        "proxyfl-communication",
        out_dir,
        table=measured,
        summary=communication_summary(measured, options.seeds),
        figure=communication_figure(measured),
        notes=_notes(options),
        title="Communication per round: exponential-graph PushSum vs central averaging",
    )


def _check(options: RunOptions) -> None:
    if options.jobs > 1:
        raise ValueError(
            "measurements time real peer processes and must run one at a time: use --jobs 1 "
            f"(got --jobs {options.jobs})"
        )


COMMUNICATION = Experiment(
    "proxyfl-communication",
    "Time and bytes per round of PushSum vs central averaging with real peer processes "
    "(proxyfl.txt Fig. 4).",
    grid=communication_grid,
    run_fold=run_communication_fold,
    report=communication_report,
    folds=1,
    min_folds=1,
    max_folds=1,
    folds_help="No folds: each seed repeats every timing once.",
    check=_check,
)
