"""Local training of ProxyFL clients: deep mutual learning with a DP-SGD proxy (proxyfl.txt §3.2).

Every client ``k`` holds a **private** model ``f_φk`` (any ``nn.Module``, trained without DP, never
shared) and a **proxy** ``h_θk`` (an MLP of an architecture common to all clients, trained with
DP-SGD).  One local step (Algorithm 1, lines 3–4) Poisson-samples a mini-batch ``B_k`` and

* updates the proxy with DP-SGD on Eq. 5, ``(1−β)·CE + β·KL(proxy ‖ private)``: per-sample
  gradients (Eq. 6) clipped to ``C``, summed, plus ``N(0, σ²C²I)``, divided by the expected batch
  size (Eq. 7);
* updates the private model with Adam on Eq. 4, ``(1−α)·CE + α·KL(private ‖ proxy)``.

Both losses use the other model's outputs from before this step's updates, held fixed (as the
authors' code does).  The KL directions follow Eq. 3–5 (the model being trained is the first
argument); the authors' code uses ``KLDivLoss``, which computes the reverse direction.

The local state of any number of clients is one :class:`ClientCohort`.  Its proxies are stacked
and trained in one batched computation with the DP-SGD engine's
:class:`~pubsubml.privacy.dpsgd.MLPStack` (ghost clipping: per-sample gradient norms without
materialising per-sample gradients), its Poisson sampling (:func:`~pubsubml.privacy.dpsgd.poisson_sample`)
and its random-draw protocol (per step: ``rand(n)`` then ``randn(P)`` from the client's generator),
so a client's models depend only on its own seed, data and the proxies it receives, whether it is
simulated with others or runs alone as a peer.

Notes
-----
Privacy of the proxy (§3.3) is accounted as DP-SGD with the stated σ, q and steps.  The KL target
of Eq. 5 is the private model's output on the sampled record; the private model is trained on the
same data without DP, so strictly every per-sample gradient depends on the whole data set through
``φ_k``.  The paper's analysis treats those outputs as fixed inputs of each DP-SGD step; it is not
a DP guarantee (one record changes φ_k, hence every other record's gradient), so with β > 0 the
accounted ε is reported as *paper accounting* (:attr:`ClientCohort.privacy_guarantee`, a
:class:`~pubsubml.errors.PaperAccountingWarning` at fit).  With ``beta = 0`` the proxy is plain
DP-SGD and the ε is a guarantee.

References
----------
proxyfl.txt §3.2 (Eq. 2–7), §3.3, §4.1 (Adam, lr 1e-3, weight decay 1e-4, batch 250, C = 1, σ = 1,
α = β = 0.5, one epoch per round); Abadi et al., CCS 2016.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pubsubml.errors import DataValidationError
from pubsubml.methods.proxyfl.dml import (
    DMLConfig,
    PrivateFactory,
    client_seed,
    dml_proxy_loss,
    mlp_factory,
)
from pubsubml.privacy.accountants import check_delta, compute_epsilon, create_accountant
from pubsubml.privacy.dpsgd import CanaryGradients, Loss, MLPStack, init_mlp, poisson_sample
from pubsubml.privacy.events import DPEvent

__all__ = [
    "ClientCohort",
    "DMLConfig",
    "PrivateFactory",
    "client_seed",
    "dml_proxy_loss",
    "mlp_factory",
]


class _StackedAdam:
    """Adam (torch's formula, L2 weight decay) on stacked parameters, a step count per site."""

    def __init__(self, params: list[Tensor], lr: float, weight_decay: float) -> None:
        self.params, self.lr, self.wd = params, lr, weight_decay
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]
        self.t = torch.zeros(params[0].shape[0], dtype=torch.float64)

    def step(self, grads: Sequence[Tensor], live: Tensor) -> None:
        self.t += live.to(torch.float64)
        t = self.t.clamp(min=1.0)
        for p, g, m, v in zip(self.params, grads, self.m, self.v, strict=True):
            shape = (-1,) + (1,) * (p.dim() - 1)
            g = g + self.wd * p
            m_new = m.lerp(g, 0.1)
            v_new = v.mul(0.999).addcmul(g, g, value=0.001)
            step = (self.lr / (1.0 - 0.9**t)).to(p.dtype).view(shape)
            bc2 = (1.0 - 0.999**t).sqrt().to(p.dtype).view(shape)
            p_new = p - step * m_new / (v_new.sqrt() / bc2 + 1e-8)
            mask = live.view(shape)
            for full, new in ((p, p_new), (m, m_new), (v, v_new)):
                full.copy_(torch.where(mask, new, full))


def _batch_index(mask: Tensor) -> tuple[Tensor, Tensor]:
    """Row indices (S, b) of the sampled rows of each site, in order, and which are real."""
    counts = mask.sum(1)
    b = max(1, int(counts.max()))
    order = torch.argsort((~mask).to(torch.int8), dim=1, stable=True)[:, :b]
    valid = torch.arange(b).unsqueeze(0) < counts.unsqueeze(1)
    return torch.where(valid, order, torch.zeros_like(order)), valid


class ClientCohort:
    """The local state of ``S`` clients: stacked DP proxies, private models, accountants.

    Parameters
    ----------
    client_ids : sequence of int
        Global ids of the clients held here (their seeds derive from them).
    data : sequence of (Tensor of shape (n_k, d), Tensor of shape (n_k,))
        Each client's private training set (float32 features, int64 labels).
    n_classes : int
        Public number of classes.
    proxy_hidden : sequence of int
        Hidden sizes of the common proxy MLP (ReLU).
    private_factories : sequence of callable or None
        ``factory(n_features, n_classes) -> nn.Module`` per client; ``None`` trains proxies only
        (plain CE, the single-model baselines).
    config : DMLConfig
    seed : int
        All proxies start from one initialisation drawn from ``seed`` (the common architecture and
        initial weights agreed in the protocol); private models and sampling use per-client seeds.

    Raises
    ------
    DataValidationError
        Malformed data or labels outside ``range(n_classes)``.
    InvalidPrivacyParameterError
        δ ≥ 1/n_k for some client.
    """

    def __init__(
        self,
        *,
        client_ids: Sequence[int],
        data: Sequence[tuple[Tensor, Tensor]],
        n_classes: int,
        proxy_hidden: Sequence[int],
        private_factories: Sequence[PrivateFactory] | None,
        config: DMLConfig,
        seed: int,
    ) -> None:
        self.client_ids = [int(k) for k in client_ids]
        if len(self.client_ids) != len(data) or not data:
            raise DataValidationError("need one (X, y) pair per client id, at least one")
        self.config, self.n_classes = config, n_classes
        self.X, self.y, self.n = _stack_data(data, n_classes)
        for n in self.n:
            check_delta(config.delta, n_samples=n)
        cfg = config.dpsgd()
        self.q = [cfg.sample_rate_for(n) for n in self.n]
        self.steps = [cfg.steps_for(n) for n in self.n]
        S, d = len(self.n), self.X.shape[2]
        init = init_mlp((d, *proxy_hidden, n_classes), "relu", torch.Generator().manual_seed(seed))
        self.proxy = MLPStack.from_modules([init] * S)
        self.proxy_opt = _StackedAdam(self.proxy.parameters(), config.lr, config.weight_decay)
        self.generators = [
            torch.Generator().manual_seed(client_seed(seed, k)) for k in self.client_ids
        ]
        self.privates: list[nn.Module] | None = None
        self.private_opts: list[torch.optim.Optimizer] = []
        if private_factories is not None:
            self.privates = []
            for k, factory in zip(self.client_ids, private_factories, strict=True):
                with torch.random.fork_rng(devices=[]):
                    torch.manual_seed(client_seed(seed, k) ^ 0x5EED)
                    module = factory(d, n_classes)
                self.privates.append(module)
                self.private_opts.append(
                    torch.optim.Adam(
                        module.parameters(), lr=config.lr, weight_decay=config.weight_decay
                    )
                )
        self.accountants = [create_accountant("pld") for _ in self.client_ids]
        self.push_weights = torch.ones(S, dtype=torch.float32)
        self.active = torch.ones(S, dtype=torch.bool)
        self.rounds_trained = [0] * S
        self._canaries: CanaryGradients | None = None
        self._release_hook: Callable[[Tensor], None] | None = None

    def attach_audit(
        self,
        canary_gradients: Sequence[Tensor | None],
        release_hook: Callable[[Tensor], None] | None = None,
    ) -> None:
        """White-box audit hooks (:mod:`pubsubml.audit.proxyfl`): canaries and released gradients.

        Each DP step every live client Poisson-samples its canary gradients at its rate q
        (:class:`~pubsubml.privacy.dpsgd.canaries.CanaryGradients`) into its sum of clipped
        gradients, before the noise; ``release_hook`` then sees the released noisy gradients,
        flat (S, d_θ), divided by ``q·n`` as the proxies' optimizer gets them.

        Raises
        ------
        ValueError
            Without DP, or not one entry (None or (m, d_θ)) per client.
        """
        if not self.config.dp:
            raise ValueError("canary gradients audit a DP run; this cohort runs without DP")
        P = sum(p[0].numel() for p in self.proxy.parameters())
        entries = list(canary_gradients)
        if len(entries) != len(self.n) or any(
            c is not None and (c.dim() != 2 or c.shape[1] != P) for c in entries
        ):
            raise ValueError(f"need one canary entry (None or (m, {P})) per client")
        if all(c is None for c in entries):
            entries[0] = torch.zeros(0, P)
        clip = torch.full((len(self.n),), self.config.max_grad_norm)
        self._canaries = CanaryGradients(entries, clip)
        self._release_hook = release_hook

    # ---- privacy ---------------------------------------------------------------------------
    def round_event(self, s: int) -> DPEvent:
        """The DP event of one round of client ``s`` (Poisson-subsampled Gaussian, its steps)."""
        return DPEvent(
            mechanism="subsampled_gaussian",
            noise_multiplier=self.config.noise_multiplier,
            sample_rate=self.q[s],
            count=self.steps[s],
        )

    def dp_steps(self) -> list[int]:
        """DP-SGD steps each client has run so far (0 without DP)."""
        return [sum(e.count for e in acc.events) for acc in self.accountants]

    @property
    def privacy_guarantee(self) -> Literal["dp", "paper accounting", "none"]:
        """What the proxies' ε covers (see the module notes).

        ``"dp"``: DP-SGD on the proxy's own loss (β = 0, or no private model): a guarantee.
        ``"paper accounting"``: β > 0 with a private model; the KL target comes from a model
        trained on the same rows without noise, so the accounted ε is not a DP guarantee.
        ``"none"``: no DP-SGD.
        """
        if not self.config.dp:
            return "none"
        if self.privates is not None and self.config.beta > 0:
            return "paper accounting"
        return "dp"

    def epsilon(self, s: int) -> float:
        """ε at δ of client ``s`` from the steps it actually ran (``inf`` without DP once trained)."""
        if not self.config.dp:
            return math.inf if self.rounds_trained[s] else 0.0
        return self.accountants[s].get_epsilon(self.config.delta)

    def willing(self) -> Tensor:
        """Which clients can run one more round within their budget (bool, shape (S,))."""
        out = self.active.clone()
        if not self.config.dp:
            return out
        for s, k in enumerate(self.client_ids):
            budget = self.config.budget_of(k)
            if out[s] and math.isfinite(budget):
                events = [*self.accountants[s].events, self.round_event(s)]
                out[s] = compute_epsilon(events, self.config.delta) <= budget
        return out

    # ---- training ----------------------------------------------------------------------------
    def train_round(self) -> None:
        """One local round of DML (or plain CE without private models) for the active clients."""
        S, cfg = len(self.n), self.config
        live_rounds = [s for s in range(S) if self.active[s]]
        for t in range(max((self.steps[s] for s in live_rounds), default=0)):
            live = torch.tensor([bool(self.active[s]) and t < self.steps[s] for s in range(S)])
            mask = torch.zeros(self.X.shape[:2], dtype=torch.bool)
            for s in live.nonzero().flatten().tolist():
                mask[s, : self.n[s]] = poisson_sample(self.n[s], self.q[s], self.generators[s])
            self._step(mask, live)
        for s in live_rounds:
            self.rounds_trained[s] += 1
            if cfg.dp:
                self.accountants[s].step(
                    noise_multiplier=cfg.noise_multiplier,
                    sample_rate=self.q[s],
                    steps=self.steps[s],
                )

    def _step(self, mask: Tensor, live: Tensor) -> None:
        cfg, S = self.config, len(self.n)
        idx, valid = _batch_index(mask)
        sites = torch.arange(S).unsqueeze(1)
        Xb, yb = self.X[sites, idx], self.y[sites, idx]
        counts = valid.sum(1)
        if not cfg.dp:
            live = live & (counts > 0)
        with torch.no_grad():
            proxy_logits = self.proxy.forward(Xb)
        loss: Loss | str = "cross_entropy"
        private_logits: list[Tensor | None] = [None] * S
        if self.privates is not None:
            log_r = torch.zeros_like(proxy_logits)
            for s in live.nonzero().flatten().tolist():
                if counts[s] > 0:
                    out = self.privates[s](Xb[s, : counts[s]])
                    private_logits[s] = out
                    log_r[s, : counts[s]] = torch.log_softmax(out.detach(), -1)
            loss = dml_proxy_loss(log_r, cfg.beta)
        clip = torch.full((S,), cfg.max_grad_norm) if cfg.dp else None
        grads, _ = self.proxy.clipped_gradient_sum(Xb, yb, valid & live.unsqueeze(1), loss, clip)
        if cfg.dp:
            if self._canaries is not None:
                self._add_canaries(grads, live)
            self._add_noise(grads, live)
            if self._release_hook is not None:
                self._release_hook(torch.cat([g.reshape(S, -1) for g in grads], 1))
        else:
            denom = counts.clamp(min=1).to(torch.float32)
            for g in grads:
                g.div_(denom.view((-1,) + (1,) * (g.dim() - 1)))
        self.proxy_opt.step(grads, live)
        if self.privates is not None:
            self._private_step(private_logits, proxy_logits, yb, counts)

    def _add_canaries(self, grads: list[Tensor], live: Tensor) -> None:
        assert self._canaries is not None
        S = len(self.n)
        flat = torch.cat([g.reshape(S, -1) for g in grads], 1)
        running = live.nonzero().flatten().tolist()
        self._canaries.add(flat, running, torch.tensor(self.q), self.generators)
        offset = 0
        for g in grads:
            size = g[0].numel()
            g.copy_(flat[:, offset : offset + size].reshape(g.shape))
            offset += size

    def _add_noise(self, grads: list[Tensor], live: Tensor) -> None:
        """Eq. 7: add N(0, σ²C²) per parameter, divide by the expected batch size ``q·n``."""
        sizes = [g[0].numel() for g in grads]
        std = self.config.noise_multiplier * self.config.max_grad_norm
        for s in live.nonzero().flatten().tolist():
            noise = torch.randn(sum(sizes), generator=self.generators[s])
            for g, z in zip(grads, noise.split(sizes), strict=True):
                g[s].add_(z.view_as(g[s]), alpha=std).div_(self.q[s] * self.n[s])

    def _private_step(
        self, logits: list[Tensor | None], proxy_logits: Tensor, yb: Tensor, counts: Tensor
    ) -> None:
        """Eq. 4 with Adam, no DP: ``(1−α)·CE + α·KL(private ‖ proxy)`` averaged over the batch."""
        alpha = self.config.alpha
        assert self.privates is not None
        for s, out in enumerate(logits):
            if out is None:
                continue
            b = int(counts[s])
            log_p = torch.log_softmax(out, -1)
            log_q = torch.log_softmax(proxy_logits[s, :b], -1)
            kl = (log_p.exp() * (log_p - log_q)).sum(-1).mean()
            loss = (1.0 - alpha) * F.nll_loss(log_p, yb[s, :b]) + alpha * kl
            self.private_opts[s].zero_grad()
            loss.backward()
            self.private_opts[s].step()

    # ---- proxies as flat vectors, and prediction ----------------------------------------------
    def flat_proxies(self) -> Tensor:
        """The proxies as rows of shape (S, d_θ) (a copy), in ``nn.Sequential`` parameter order."""
        S = len(self.n)
        return torch.cat([p.reshape(S, -1) for p in self.proxy.parameters()], 1).clone()

    def load_proxies(self, flat: Tensor) -> None:
        """Overwrite the proxies in place from rows of shape (S, d_θ).

        Raises
        ------
        DataValidationError
            On a shape other than (S, d_θ); nothing is changed.
        """
        params = self.proxy.parameters()
        expected = (len(self.n), sum(p[0].numel() for p in params))
        if tuple(flat.shape) != expected:
            raise DataValidationError(
                f"expected proxies of shape {expected}, got {tuple(flat.shape)}"
            )
        offset = 0
        for p in params:
            size = p[0].numel()
            p.copy_(flat[:, offset : offset + size].reshape(p.shape))
            offset += size

    def predict_proba(
        self, s: int, X: Tensor, model: Literal["private", "proxy"] = "private"
    ) -> Tensor:
        """Class probabilities (n, k) of client ``s``'s private model or proxy."""
        with torch.no_grad():
            if model == "private" and self.privates is not None:
                module = self.privates[s]
                module.eval()
                out = module(X)
                module.train()
            else:
                out = X
                for i, (w, b) in enumerate(zip(self.proxy.weights, self.proxy.biases, strict=True)):
                    out = F.linear(out, w[s], b[s])
                    out = torch.relu(out) if i < len(self.proxy.weights) - 1 else out
        return torch.softmax(out, -1)


def _stack_data(
    data: Sequence[tuple[Tensor, Tensor]], n_classes: int
) -> tuple[Tensor, Tensor, list[int]]:
    ns = []
    for X, y in data:
        if X.dim() != 2 or y.dim() != 1 or len(X) != len(y) or len(X) == 0:
            raise DataValidationError(
                f"expected X (n, d) and y (n,), got {tuple(X.shape)}, {tuple(y.shape)}"
            )
        if not bool(torch.isfinite(X).all()):
            raise DataValidationError("features must be finite")
        if int(y.min()) < 0 or int(y.max()) >= n_classes:
            raise DataValidationError(f"labels must lie in range({n_classes})")
        ns.append(len(X))
    d = data[0][0].shape[1]
    if any(X.shape[1] != d for X, _ in data):
        raise DataValidationError("all clients must share the feature dimension")
    X_pad = torch.zeros(len(data), max(ns), d)
    y_pad = torch.zeros(len(data), max(ns), dtype=torch.long)
    for s, (X, y) in enumerate(data):
        X_pad[s, : ns[s]], y_pad[s, : ns[s]] = X.to(torch.float32), y.to(torch.long)
    return X_pad, y_pad, ns
