"""Command line of ProxyFL: ``launch`` real peer processes, and the ``bench`` runs behind
``docs/results/proxyfl-*`` (proxyfl.txt Fig. 3, Fig. 4, Fig. 5 and the per-client ε).

Mount with ``app.add_typer(proxyfl_cli.app, name="proxyfl")`` (→ ``pubsubml proxyfl launch``)
and ``proxyfl_cli.register_bench_commands(bench_app)`` (→ ``pubsubml bench proxyfl-accuracy``
etc.).  Every bench takes the options every
``pubsubml bench`` command takes (:mod:`pubsubml.cli.bench`): ``--smoke`` for a seconds-long
configuration (CI) and ``--out-dir`` for the output folder.
"""

from __future__ import annotations

import dataclasses
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import typer

from pubsubml.cli.bench import DEFAULT_OUT_DIR, OutDirOption, SmokeOption, run_experiment_command
from pubsubml.errors import PaperAccountingWarning
from pubsubml.experiments.proxyfl.experiments import (
    FederatedSplit,
    make_federated,
    run_method,
    run_regular_models,
)
from pubsubml.methods.proxyfl.peers import launch as launch_peers
from pubsubml.methods.proxyfl.peers import launch_comm_bench, write_client_data
from pubsubml.methods.proxyfl.protocol import DMLConfig

__all__ = ["BENCHES", "app", "register_bench_commands"]

app = typer.Typer(help="ProxyFL: private models, DP proxies shared by PushSum (proxyfl.txt).")

ORDER = ["Regular", "Joint", "FedAvg", "AvgPush", "CWT", "FML", "ProxyFL"]
ROUNDS = 50  # the paper runs 300; 50 keeps every bench within minutes on 2 cores


@dataclasses.dataclass(frozen=True)
class _Setup:
    """One data set's configuration of the runs."""

    dataset: str
    rounds: int
    config: DMLConfig
    split_kw: dict[str, Any]


def _setups(smoke: bool) -> list[_Setup]:
    if smoke:
        small = {"n_clients": 4, "n_per_client": 40, "n_test_per_client": 10}
        return [_Setup("digits", 2, DMLConfig(batch_size=10, delta=1e-3), small)]
    return [
        _Setup("mnist1d", ROUNDS, DMLConfig(), {}),  # §4.1 settings: B 250, σ 1, C 1, δ 1e-5
        _Setup("digits", ROUNDS, DMLConfig(batch_size=30), {}),  # 120 rows per client: q = 0.25
    ]


def _label(row: pd.Series) -> str:
    return (
        f"{row['method']}-{row['model']}" if row["method"] in ("FML", "ProxyFL") else row["method"]
    )


def _summary(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Mean ± std over clients of accuracy and macro-accuracy, global and local test sets."""
    df = df.assign(label=df.apply(_label, axis=1))
    agg = df.groupby([*by, "label", "test"])[["accuracy", "macro_accuracy"]].agg(["mean", "std"])
    agg.columns = ["_".join(map(str, col)) for col in agg.columns]
    return agg.reset_index()


def _cell(v: object) -> str:
    if isinstance(v, float):
        if v != v or v == 0.0:  # NaN or zero
            return "" if v != v else "0"
        return f"{v:.0f}" if abs(v) >= 1000 else f"{v:.3f}" if abs(v) >= 0.01 else f"{v:.0e}"
    return str(v)


def _write_table(df: pd.DataFrame, path: Path, title: str, notes: str) -> None:
    path.with_suffix(".csv").write_text(df.to_csv(index=False))
    lines = [f"# {title}", "", notes, ""]
    cols = list(df.columns)
    lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")


def _final_table(rows: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    last = rows[rows["round"] == rows.groupby([*by, "method"])["round"].transform("max")]
    s = _summary(last, by)
    s["acc"] = s.apply(lambda r: f"{r.accuracy_mean:.3f} ± {r.accuracy_std:.3f}", axis=1)
    s["macro"] = s.apply(
        lambda r: f"{r.macro_accuracy_mean:.3f} ± {r.macro_accuracy_std:.3f}", axis=1
    )
    return s.pivot_table(
        index=[*by, "label"], columns="test", values=["acc", "macro"], aggfunc="first"
    )


def _md_pivot(table: pd.DataFrame) -> str:
    table = table.copy()
    table.columns = [f"{col[0]} ({col[1]})" for col in table.columns]
    table = table.reset_index()
    cols = list(table.columns)
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(str(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join(out)


def _curves(df: pd.DataFrame, path: Path, datasets: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    g = df[df["test"] == "global"].assign(label=lambda d: d.apply(_label, axis=1))
    fig, axes = plt.subplots(len(datasets), 2, figsize=(11, 4 * len(datasets)), squeeze=False)
    for i, ds in enumerate(datasets):
        for j, metric in enumerate(["accuracy", "macro_accuracy"]):
            ax = axes[i][j]
            part = g[g["dataset"] == ds].groupby(["label", "round"])[metric].agg(["mean", "std"])
            for label, sub in part.groupby(level=0):
                sub = sub.droplevel(0)
                ax.plot(sub.index, sub["mean"], label=label)
                ax.fill_between(
                    sub.index, sub["mean"] - sub["std"], sub["mean"] + sub["std"], alpha=0.15
                )
            ax.set(title=f"{ds}: {metric} (global IID test)", xlabel="round", ylabel=metric)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path.with_suffix(".png"), dpi=110)
    plt.close(fig)


def bench_accuracy(out: Path, smoke: bool = False) -> pd.DataFrame:
    """Fig. 3 analogue: every method on mnist1d and digits, plus the per-client ε table."""
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    eps_rows: list[dict[str, Any]] = []
    setups = _setups(smoke)
    for setup in setups:
        split = make_federated(setup.dataset, **setup.split_kw)  # type: ignore[arg-type]
        for name in ORDER:
            run = run_method(name, split, rounds=setup.rounds, config=setup.config)
            rows += run.rows
            eps_rows += _eps_rows(name, split, setup, run)
        eps_rows += _budget_demo(split, setup)
    df = pd.DataFrame(rows)
    df.to_csv(out / "proxyfl-accuracy.csv", index=False)
    notes = "\n".join(f"- {s.dataset}: {_describe(s)}" for s in setups)
    body = _md_pivot(_final_table(df, ["dataset"]))
    (out / "proxyfl-accuracy.md").write_text(
        "# ProxyFL and baselines: final accuracy (mean ± std over clients)\n\n"
        f"Command: `pubsubml bench proxyfl-accuracy{' --smoke' if smoke else ''}`.\n\n"
        f"{notes}\n\nOne seed (the paper: 5).  FML/ProxyFL: private and proxy models; FedAvg: the "
        "central model; others: each client's DP model.  'global' = the IID test set, 'local' = "
        "each client's skewed test set.\n\n" + body + "\n"
    )
    _curves(df, out / "proxyfl-accuracy", [s.dataset for s in setups])
    eps = pd.DataFrame(eps_rows)
    _write_table(
        eps,
        out / "proxyfl-epsilon",
        "Per-client (ε, δ) from the PLD accountant over the DP-SGD steps actually run",
        "The budget rows run ProxyFL with per-client budgets: a client drops out before a round "
        "that would exceed its budget (proxyfl.txt §3.3).  run_seconds: wall time of the whole "
        "method run.  guarantee: what ε covers — 'dp' (the proxy's own DP-SGD loss), or 'paper "
        "accounting' (β > 0: the proxy's loss uses the private model, trained on the same rows "
        "without noise, so ε is the paper's accounting, not a DP guarantee).",
    )
    return df


def _describe(s: _Setup) -> str:
    c = s.config
    return (
        f"{s.rounds} rounds, B={c.batch_size}, σ={c.noise_multiplier}, C={c.max_grad_norm}, "
        f"δ={c.delta:g}, α=β={c.alpha}, Adam lr={c.lr}, wd={c.weight_decay}, {s.split_kw or 'default split'}"
    )


def _eps_rows(name: str, split: FederatedSplit, setup: _Setup, run: Any) -> list[dict[str, Any]]:
    eps, seconds = run.epsilons, run.seconds
    sizes = (
        [sum(len(X) for X, _ in split.clients)]
        if name == "Joint"
        else [len(X) for X, _ in split.clients]
    )
    cfg = setup.config.dpsgd()
    return [
        {
            "dataset": split.name,
            "method": name,
            "client": k,
            "n_records": n,
            "sample_rate": cfg.sample_rate_for(n),
            "dp_steps": setup.rounds * cfg.steps_for(n),
            "budget": "none",
            "epsilon": e,
            "guarantee": run.guarantee,
            "delta": setup.config.delta,
            "run_seconds": seconds,
        }
        for k, (n, e) in enumerate(zip(sizes, eps, strict=True))
    ]


def _budget_demo(split: FederatedSplit, setup: _Setup) -> list[dict[str, Any]]:
    from pubsubml.methods.proxyfl.models import private_factory
    from pubsubml.methods.proxyfl.protocol import ProxyFL

    K = len(split.clients)
    budgets = tuple(2.0 + 2.0 * k for k in range(K))
    cfg = dataclasses.replace(setup.config, epsilon_budget=budgets)
    with warnings.catch_warnings():  # the table's guarantee column says what ε covers
        warnings.simplefilter("ignore", PaperAccountingWarning)
        model = ProxyFL(
            n_classes=split.n_classes,
            rounds=setup.rounds,
            config=cfg,
            private_model=private_factory("mlp", split.input_shape),
        ).fit(split.clients)
    steps = model.cohort_.dp_steps()
    return [
        {
            "dataset": split.name,
            "method": "ProxyFL",
            "client": k,
            "n_records": model.cohort_.n[k],
            "sample_rate": model.cohort_.q[k],
            "dp_steps": steps[k],
            "budget": budgets[k],
            "epsilon": model.epsilons_[k],
            "guarantee": model.privacy_guarantee_,
            "delta": cfg.delta,
            "run_seconds": float("nan"),
        }
        for k in range(K)
    ]


def bench_communication(out: Path, smoke: bool = False) -> pd.DataFrame:
    """Fig. 4 analogue: time and bytes per round vs clients, PushSum vs central averaging."""
    out.mkdir(parents=True, exist_ok=True)
    dim = 40 * 200 + 200 + 200 * 200 + 200 + 200 * 10 + 10  # the mnist1d proxy, 50,410 floats
    counts, rounds = ([2], 3) if smoke else ([2, 4, 8, 16], 20)
    rows = []
    for K in counts:
        for scheme in ("pushsum", "central"):
            with tempfile.TemporaryDirectory() as tmp:
                res = launch_comm_bench(
                    n_clients=K, scheme=scheme, dim=dim, rounds=rounds, out_dir=Path(tmp)
                )
            per_round = pd.DataFrame([r["seconds"] for r in res]).max(axis=0)  # slowest peer
            sent = [r["bytes_sent"] for r in res]
            # traffic of the busiest node, both directions: PushSum sends and receives one message,
            # the central server (rank 0) receives as much as it sends
            busiest = 2 * (sent[0] if scheme == "central" else max(sent))
            rows.append(
                {
                    "clients": K,
                    "scheme": scheme,
                    "ms_per_round_median": 1e3 * float(per_round.median()),
                    "ms_per_round_mean": 1e3 * float(per_round.mean()),
                    "KB_sent_per_client": float(pd.Series(sent[1:] or sent).mean()) / 1e3,
                    "KB_busiest_node": busiest / 1e3,
                    "KB_total": float(sum(sent)) / 1e3,
                }
            )
    df = pd.DataFrame(rows)
    notes = (
        f"Command: `pubsubml bench proxyfl-communication{' --smoke' if smoke else ''}`.  One OS "
        f"process per client, gloo over 127.0.0.1 on a shared 2-core x86-64 CPU; {rounds} timed "
        "rounds after 3 warm-up rounds, a barrier before each, time of the slowest peer; a proxy of "
        f"{dim} float32.  PushSum: each client sends one message of d + 1 floats to one peer.  "
        "Central: rank 0 is the server (receives K − 1 models, sends K − 1 means).  Busiest-node "
        "traffic counts both directions."
    )
    comm_report(df, out / "proxyfl-communication", notes)
    return df


def comm_report(df: pd.DataFrame, path: Path, notes: str) -> None:
    """CSV, Markdown and figure of the communication benchmark (re-run from the CSV)."""
    _write_table(
        df, path, "Communication per round: exponential-graph PushSum vs central averaging", notes
    )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for scheme, sub in df.groupby("scheme"):
        axes[0].plot(sub["clients"], sub["ms_per_round_median"], "o-", label=scheme)
        axes[1].plot(sub["clients"], sub["KB_busiest_node"] / 1e3, "o-", label=scheme)
    axes[0].set(xlabel="clients (processes)", ylabel="ms per round (median)", title="time")
    axes[1].set(xlabel="clients (processes)", ylabel="MB per round, busiest node", title="volume")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path.with_suffix(".png"), dpi=110)
    plt.close(fig)


def bench_ablations(out: Path, smoke: bool = False) -> pd.DataFrame:
    """Fig. 5 analogue on digits (image-like, 2-D CNNs): p_major, DP vs non-DP, heterogeneous."""
    out.mkdir(parents=True, exist_ok=True)
    setup = _setups(smoke)[-1]
    rows: list[dict[str, Any]] = []
    methods = ORDER if not smoke else ["Regular", "FML", "ProxyFL"]
    for p in (0.1, 0.5, 0.8) if not smoke else (0.5,):
        split = make_federated(setup.dataset, p_major=p, **setup.split_kw)  # type: ignore[arg-type]
        for name in methods:
            rows += run_method(
                name,
                split,
                rounds=setup.rounds,
                config=setup.config,
                tags={"ablation": "p_major", "setting": p},
            ).rows
    split = make_federated(setup.dataset, **setup.split_kw)  # type: ignore[arg-type]
    no_dp = dataclasses.replace(setup.config, dp=False)
    for name in methods:
        rows += run_method(
            name,
            split,
            rounds=setup.rounds,
            config=no_dp,
            tags={"ablation": "dp", "setting": "non-DP"},
        ).rows
    archs = ["mlp", "lenet", "cnn1", "cnn2"]
    mixed = [archs[k * len(archs) // len(split.clients)] for k in range(len(split.clients))]
    tags = {"ablation": "architectures", "setting": "mixed"}
    rows += run_method(
        "ProxyFL", split, rounds=setup.rounds, config=setup.config, private=mixed, tags=tags
    ).rows
    rows += run_regular_models(
        split, mixed, rounds=setup.rounds, config=setup.config, tags=tags
    ).rows
    df = pd.DataFrame(rows)
    df.to_csv(out / "proxyfl-ablations.csv", index=False)
    header = (
        f"Command: `pubsubml bench proxyfl-ablations{' --smoke' if smoke else ''}`; "
        f"{setup.dataset}, {_describe(setup)}.  Private architectures by client: "
        f"{', '.join(mixed)}; Regular trains each with DP-SGD on the engine's generic path."
    )
    ablation_report(df, out / "proxyfl-ablations", header)
    return df


def ablation_report(df: pd.DataFrame, path: Path, header: str) -> None:
    """Markdown table and figure of the ablations from their rows (re-run from the CSV)."""
    rounds = df.groupby(["ablation", "setting", "method"])["round"].transform("max")
    last = df[(df["round"] == rounds) & (df["test"] == "global")]
    last = last.assign(label=last.apply(_label, axis=1), setting=last["setting"].astype(str))
    stats = last.groupby(["ablation", "setting", "label"])["accuracy"].agg(["mean", "std"])
    skew = stats.loc["p_major"]["mean"].unstack(0)
    skew_std = stats.loc["p_major"]["std"].unstack(0)
    dp = pd.DataFrame(
        {"DP": skew[skew.columns.max()], "non-DP": stats.loc["dp"]["mean"].xs("non-DP")}
    )
    arch = (
        last[last["ablation"] == "architectures"]
        .groupby(["arch", "label"])["accuracy"]
        .agg(["mean", "std"])
    )
    fmt = lambda m, sd: f"{m:.3f} ± {sd:.3f}"  # noqa: E731
    lines = [
        "# ProxyFL ablations (global IID test accuracy at the last round, mean ± std over clients)",
        "",
        header,
        "",
        "## (a) non-IID skew p_major (DP)",
        "",
        "| model | " + " | ".join(f"p_major = {c}" for c in skew.columns) + " |",
        "|---|" + "---|" * len(skew.columns),
    ]
    for label in skew.index:
        cells = [fmt(skew.loc[label, c], skew_std.loc[label, c]) for c in skew.columns]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "## (b) heterogeneous private architectures (DP proxies)", ""]
    lines += ["| private architecture | model | accuracy |", "|---|---|---|"]
    lines += [
        f"| {key[0]} | {key[1]} | {fmt(r['mean'], r['std'])} |"  # type: ignore[index]
        for key, r in arch.iterrows()
    ]
    lines += ["", f"## (c) with and without DP-SGD (p_major = {skew.columns.max()})", ""]
    lines += ["| model | DP | non-DP |", "|---|---|---|"]
    lines += [f"| {lab} | {r['DP']:.3f} | {r['non-DP']:.3f} |" for lab, r in dp.iterrows()]
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")
    _ablation_plot(skew, skew_std, arch, dp, path)


def _ablation_plot(
    skew: pd.DataFrame, skew_std: pd.DataFrame, arch: pd.DataFrame, dp: pd.DataFrame, path: Path
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    x = [float(c) for c in skew.columns]
    for label in skew.index:
        axes[0].errorbar(
            x, skew.loc[label], skew_std.loc[label], marker="o", capsize=2, label=label
        )
    axes[0].set(xlabel="p_major", ylabel="accuracy", title="(a) non-IID skew (DP)")
    axes[0].legend(fontsize=7)
    table = arch["mean"].unstack(1)
    errors = arch["std"].unstack(1)
    table.plot.bar(ax=axes[1], yerr=errors, rot=0, capsize=2)
    axes[1].set(
        title="(b) heterogeneous private models", xlabel="private architecture", ylabel="accuracy"
    )
    axes[1].legend(fontsize=7)
    dp.plot.barh(ax=axes[2])
    axes[2].set(title="(c) with and without DP-SGD", xlabel="accuracy")
    fig.tight_layout()
    fig.savefig(path.with_suffix(".png"), dpi=110)
    plt.close(fig)


BENCHES: dict[str, Callable[[Path, bool], pd.DataFrame]] = {
    "accuracy": bench_accuracy,
    "communication": bench_communication,
    "ablations": bench_ablations,
}


def _bench_command(name: str, fn: Callable[[Path, bool], pd.DataFrame]) -> Callable[..., None]:
    def command(out_dir: OutDirOption = DEFAULT_OUT_DIR, smoke: SmokeOption = False) -> None:
        run_experiment_command(f"proxyfl-{name}", lambda: fn(out_dir, smoke), out_dir)

    command.__doc__ = (fn.__doc__ or "").splitlines()[0]
    return command


def register_bench_commands(bench_app: typer.Typer) -> None:
    """Add ``proxyfl-accuracy``, ``proxyfl-communication`` and ``proxyfl-ablations`` to a bench app."""
    for name, fn in BENCHES.items():
        bench_app.command(f"proxyfl-{name}")(_bench_command(name, fn))


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
