"""Command line of ProxyFL: ``launch`` real peer processes (proxyfl.txt Algorithm 1, §3.4).

Mount with ``app.add_typer(proxyfl_cli.app, name="proxyfl")`` (→ ``pubsubml proxyfl launch``).  The
benchmarks behind ``docs/results/proxyfl-*`` are experiments
(:mod:`pubsubml.experiments.proxyfl.benches`), run with ``pubsubml bench proxyfl-accuracy`` etc.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["app"]

app = typer.Typer(help="ProxyFL: private models, DP proxies shared by PushSum (proxyfl.txt).")


def _ranks(spec: str | None, n: int) -> list[int]:
    if not spec:
        return list(range(n))
    out: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


@app.command()
def launch(
    clients: Annotated[int, typer.Option(help="Number of clients K (world size).")] = 8,
    dataset: Annotated[str, typer.Option(help="mnist1d or digits.")] = "mnist1d",
    rounds: Annotated[int, typer.Option(help="Rounds of Algorithm 1.")] = 10,
    p_major: Annotated[float, typer.Option(help="Fraction of each client's majority class.")] = 0.8,
    private: Annotated[
        str, typer.Option(help="Private architecture(s), comma-separated, cycled.")
    ] = "mlp",
    noise_multiplier: Annotated[float, typer.Option(help="σ of DP-SGD.")] = 1.0,
    epsilon_budget: Annotated[float | None, typer.Option(help="ε budget of every client.")] = None,
    batch_size: Annotated[
        int | None, typer.Option(help="Expected batch size (default 250; 30 for digits).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the data split and the clients.")] = 0,
    ranks: Annotated[
        str | None, typer.Option(help="Ranks started here, e.g. '0-3' (default all).")
    ] = None,
    master_addr: Annotated[str, typer.Option(help="Address of rank 0's machine.")] = "127.0.0.1",
    master_port: Annotated[int | None, typer.Option(help="Port on rank 0's machine.")] = None,
    out: Annotated[Path, typer.Option(help="Folder for data, logs and results.")] = Path(
        "proxyfl-run"
    ),
    timeout: Annotated[float, typer.Option(help="Seconds before the peers are stopped.")] = 1800.0,
) -> None:
    """Run ProxyFL with one OS process per client, PushSum over torch.distributed (gloo)."""
    from pubsubml.experiments.proxyfl.experiments import make_federated
    from pubsubml.methods.proxyfl.peers import launch as launch_peers
    from pubsubml.methods.proxyfl.peers import write_client_data
    from pubsubml.methods.proxyfl.protocol import DMLConfig

    local = _ranks(ranks, clients)
    split = make_federated(dataset, n_clients=clients, p_major=p_major, seed=seed)  # type: ignore[arg-type]
    write_client_data(out / "data", split.clients, split.client_tests, split.test, ranks=local)
    archs = [a.strip() for a in private.split(",")]
    config = DMLConfig(
        noise_multiplier=noise_multiplier,
        epsilon_budget=epsilon_budget,
        batch_size=batch_size or (30 if dataset == "digits" else 250),
    )
    results = launch_peers(
        n_clients=clients,
        data_dir=out / "data",
        out_dir=out / "results",
        n_classes=split.n_classes,
        input_shape=split.input_shape,
        rounds=rounds,
        config=config,
        private=[archs[k % len(archs)] for k in range(clients)],
        seed=seed,
        ranks=local,
        master_addr=master_addr,
        master_port=master_port,
        timeout_s=timeout,
    )
    if results and results[0].get("guarantee") == "paper accounting":
        typer.echo(
            f"ε below is the paper's accounting, not a DP guarantee (β = {config.beta:g} > 0: the "
            "proxy's loss uses the non-DP private model); DMLConfig(beta=0) makes it one"
        )
    typer.echo(
        "client  rounds-shared  epsilon  private-acc(global)  proxy-acc(global)  KB-sent  ms-comm/round"
    )
    for r in results:
        last = {(e["model"], e["test"]): e["accuracy"] for e in r["evals"] if e["round"] == rounds}
        ms = 1e3 * sum(r["exchange_seconds"]) / max(1, len(r["exchange_seconds"]))
        typer.echo(
            f"{r['rank']:>6}  {sum(r['active']):>13}  {r['epsilon']:>7.2f}  {last[('private', 'global')]:>19.3f}"
            f"  {last[('proxy', 'global')]:>17.3f}  {r['bytes_sent'] / 1e3:>7.0f}  {ms:>13.1f}"
        )
