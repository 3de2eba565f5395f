"""Flower's Simulation Engine on this machine: :func:`run_local_simulation`.

Flower 1.42 runs a ``ServerApp`` in this process and the ``ClientApp`` of every virtual site in
Ray actors on a local Ray instance (it has no local mode any more: a real instance starts).
Flower's telemetry is on unless ``FLWR_TELEMETRY_ENABLED=0``; nothing here may reach the network,
so it is turned off before flwr is imported.
"""

from __future__ import annotations

import logging
import os

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

from flwr.clientapp import ClientApp
from flwr.serverapp import ServerApp

__all__ = ["run_local_simulation"]


def run_local_simulation(
    server_app: ServerApp,
    client_app: ClientApp,
    n_clients: int,
    *,
    num_cpus: int | None = None,
    verbose: bool = False,
) -> None:
    """Run ``server_app`` with ``n_clients`` virtual sites of ``client_app`` on local Ray.

    Each site gets one CPU (``client_resources``), so at most ``num_cpus`` sites train at once.
    Site ``i`` sees ``context.node_config["partition-id"] == i``.

    Parameters
    ----------
    server_app, client_app
    n_clients : int
    num_cpus : int, optional
        CPUs given to Ray (default: all of this machine's, at most ``n_clients``).
    verbose : bool, default=False
        Keep Flower's INFO log (off: errors only; Flower warns that `run_simulation` is
        deprecated in favour of `flwr run`, and that evaluation is skipped, on every run).
    """
    from flwr.simulation import run_simulation

    os.environ["FLWR_TELEMETRY_ENABLED"] = "0"
    cpus = num_cpus or max(1, min(os.cpu_count() or 1, n_clients))
    flower_log = logging.getLogger("flwr")
    level = flower_log.level
    if not verbose:
        flower_log.setLevel(logging.ERROR)
    try:
        run_simulation(
            server_app=server_app,
            client_app=client_app,
            num_supernodes=n_clients,
            backend_config={
                "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                "init_args": {"num_cpus": cpus, "include_dashboard": False},
            },
        )
    finally:
        flower_log.setLevel(level)
