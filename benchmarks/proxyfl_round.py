"""Speed of one ProxyFL round: our batched DP proxies against Opacus-wrapped proxies, same run.

Part 1 — one simulated round of 8 clients (mnist1d, 1,000 records each, one local epoch = 4
Poisson-sampled steps at q = 0.25, DP proxy MLP 40-200-200-10 with C = 1, σ = 1 plus a private MLP of
the same shape, DML losses Eq. 4–5, then PushSum):

* ours: :class:`~pubsubml.methods.proxyfl.local.ClientCohort` (8 proxies stacked, ghost clipping)
  and :class:`~pubsubml.methods.proxyfl.pushsum.SimulatedPushSum`;
* reference: the same round with each proxy wrapped by ``opacus.PrivacyEngine.make_private``
  (Poisson sampling, hooks), the private model and the losses unchanged, the same PushSum.

Part 2 — real peers: per-round communication time on loopback for 4, 8 and 16 processes, PushSum on
the exponential graph against central averaging (rank 0 as server) in the same run.

Run: ``.venv/bin/python benchmarks/proxyfl_round.py`` (add ``--quick`` for a short check).
Both parts use one torch thread per process.  Target: ratio ours / Opacus ≤ 0.5.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from opacus import PrivacyEngine

from pubsubml.experiments.proxyfl.experiments import make_federated
from pubsubml.methods.proxyfl.local import ClientCohort, DMLConfig, mlp_factory
from pubsubml.methods.proxyfl.peers import launch_comm_bench
from pubsubml.methods.proxyfl.pushsum import SimulatedPushSum

K, ALPHA, BETA = 8, 0.5, 0.5


def _kl(log_p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    return (log_p.exp() * (log_p - log_q)).sum(-1).mean()


class OpacusClients:
    """The reference: per client an Opacus-wrapped proxy and a plain private model."""

    def __init__(self, clients: list[tuple[torch.Tensor, torch.Tensor]], cfg: DMLConfig) -> None:
        self.clients = []
        build = mlp_factory((200, 200))
        for k, (X, y) in enumerate(clients):
            torch.manual_seed(k)
            proxy, private = build(40, 10), build(40, 10)
            opt = torch.optim.Adam(proxy.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
            loader = torch.utils.data.DataLoader(
                torch.utils.data.TensorDataset(X, y), batch_size=cfg.batch_size
            )
            proxy, opt, loader = PrivacyEngine().make_private(
                module=proxy,
                optimizer=opt,
                data_loader=loader,
                noise_multiplier=cfg.noise_multiplier,
                max_grad_norm=cfg.max_grad_norm,
                poisson_sampling=True,
            )
            private_opt = torch.optim.Adam(
                private.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay
            )
            self.clients.append((proxy, opt, loader, private, private_opt))
        self.comm = SimulatedPushSum(K)
        self.weights = torch.ones(K)

    def round(self, t: int) -> None:
        for proxy, opt, loader, private, private_opt in self.clients:
            for xb, yb in loader:
                if len(xb) == 0:
                    continue
                z, r = proxy(xb), private(xb)
                log_q, log_r = F.log_softmax(z, -1), F.log_softmax(r, -1)
                proxy_loss = (1 - BETA) * F.nll_loss(log_q, yb) + BETA * _kl(log_q, log_r.detach())
                private_loss = (1 - ALPHA) * F.nll_loss(log_r, yb) + ALPHA * _kl(
                    log_r, log_q.detach()
                )
                opt.zero_grad()
                proxy_loss.backward()
                opt.step()
                private_opt.zero_grad()
                private_loss.backward()
                private_opt.step()
        flat = torch.stack(
            [torch.cat([p.detach().flatten() for p in c[0].parameters()]) for c in self.clients]
        )
        flat, self.weights = self.comm.exchange(t, range(K), flat, self.weights, range(K))
        for row, c in zip(flat, self.clients, strict=True):
            torch.nn.utils.vector_to_parameters(row, list(c[0].parameters()))


class OurClients:
    """Ours: the 8 clients in one cohort."""

    def __init__(self, clients: list[tuple[torch.Tensor, torch.Tensor]], cfg: DMLConfig) -> None:
        self.cohort = ClientCohort(
            client_ids=range(K),
            data=clients,
            n_classes=10,
            proxy_hidden=(200, 200),
            private_factories=[mlp_factory((200, 200))] * K,
            config=cfg,
            seed=0,
        )
        self.comm = SimulatedPushSum(K)

    def round(self, t: int) -> None:
        self.cohort.train_round()
        flat, w = self.comm.exchange(
            t, range(K), self.cohort.flat_proxies(), self.cohort.push_weights, range(K)
        )
        self.cohort.load_proxies(flat)
        self.cohort.push_weights = w


def time_rounds(runner: OurClients | OpacusClients, repeats: int) -> list[float]:
    runner.round(0)  # warm-up
    times = []
    for t in range(1, repeats + 1):
        start = time.perf_counter()
        runner.round(t)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, 4 and 8 peers only")
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", module="opacus")
    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    split = make_federated("mnist1d")
    clients = [(torch.as_tensor(X), torch.as_tensor(y)) for X, y in split.clients]
    cfg = DMLConfig()
    repeats = 3 if args.quick else 7
    ours, ref = OurClients(clients, cfg), OpacusClients(clients, cfg)
    t_ours, t_ref = [], []
    for _ in range(2):  # interleave to share any drift in machine load
        t_ours += time_rounds(ours, repeats)
        t_ref += time_rounds(ref, repeats)
    m_ours, m_ref = statistics.median(t_ours), statistics.median(t_ref)
    print("\nOne simulated ProxyFL round: 8 clients x 1,000 mnist1d records, 4 DP steps each")
    print(f"{'implementation':<38}{'median s/round':>16}{'min':>9}{'max':>9}")
    print(
        f"{'ours (stacked proxies, ghost clipping)':<38}{m_ours:>16.3f}{min(t_ours):>9.3f}{max(t_ours):>9.3f}"
    )
    print(
        f"{'Opacus make_private (hooks, Poisson)':<38}{m_ref:>16.3f}{min(t_ref):>9.3f}{max(t_ref):>9.3f}"
    )
    print(f"ratio ours / Opacus = {m_ours / m_ref:.3f}  (target <= 0.5)")

    dim = sum(p.numel() for p in mlp_factory((200, 200))(40, 10).parameters())
    print(f"\nReal peers on 127.0.0.1 (gloo), proxy of {dim} float32, time of the slowest peer")
    print(f"{'processes':>9}{'PushSum ms/round':>18}{'central ms/round':>18}{'ratio':>8}")
    for n in (4, 8) if args.quick else (4, 8, 16):
        ms = {}
        for scheme in ("pushsum", "central"):
            with tempfile.TemporaryDirectory() as tmp:
                res = launch_comm_bench(
                    n_clients=n,
                    scheme=scheme,
                    dim=dim,
                    rounds=5 if args.quick else 20,
                    out_dir=Path(tmp),
                )
            per_round = [max(r["seconds"][i] for r in res) for i in range(len(res[0]["seconds"]))]
            ms[scheme] = 1e3 * statistics.median(per_round)
        print(
            f"{n:>9}{ms['pushsum']:>18.2f}{ms['central']:>18.2f}{ms['pushsum'] / ms['central']:>8.2f}"
        )


if __name__ == "__main__":
    main()
