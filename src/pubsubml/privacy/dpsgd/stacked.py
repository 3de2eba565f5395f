"""The fast DP-SGD path: ``S`` multilayer perceptrons trained at once, one per site.

The ``S`` networks are an :class:`~pubsubml.privacy.dpsgd.mlp_stack.MLPStack` (parameters stacked
along a leading site dimension, per-sample gradients clipped without materialising them: "ghost
clipping").  :func:`train_dp_stacked` draws for every site exactly what
:func:`~pubsubml.privacy.dpsgd.generic.train_dp` draws (see :mod:`pubsubml.privacy.dpsgd` for the
randomness protocol), and its optimizer is ``S`` independent copies of torch's Adam or SGD (both
are elementwise).

Notes
-----
The guarantee holds for what each :class:`~pubsubml.privacy.dpsgd.config.TrainResult` reports
(steps, sample rate, σ, C) and for add/remove-one neighbours; compute ε from its ``events``.  It
holds against an adversary who cannot know the noise only when the noise comes from
:class:`~pubsubml.privacy.noise.SecureNoise` (``noise=``); the default draws from the seeded
generators, for simulations (see :mod:`pubsubml.privacy.noise`).

References
----------
pubsub-ml.txt §7.2 (Table 4 networks) and §8 (DP-SGD); Abadi et al., "Deep learning with
differential privacy", CCS 2016.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from pubsubml.errors import DataValidationError
from pubsubml.privacy.dpsgd.canaries import CanaryGradients, check_canaries
from pubsubml.privacy.dpsgd.config import DPSGDConfig, TrainResult, _check_data
from pubsubml.privacy.dpsgd.functions import Loss, _loss
from pubsubml.privacy.dpsgd.mlp_stack import MLPStack, _Scratch
from pubsubml.privacy.noise import NoiseSource, SeededNoise

__all__ = ["GradHook", "train_dp_stacked"]

#: ``grad_hook(params, grad)``: flat (S, P) parameters and step gradient; edits ``grad`` in place.
GradHook = Callable[[Tensor, Tensor], None]

_BETA1, _BETA2, _ADAM_EPS = 0.9, 0.999, 1e-8  # torch.optim.Adam defaults


class _StackedOptimizer:
    """torch's Adam or SGD for each site, with per-site step counts and learning rates.

    ``step`` consumes the gradient tensors (they serve as scratch).  Sites not ``active`` keep their
    parameters and state unchanged.
    """

    def __init__(self, params: list[Tensor], kind: str, lr: Tensor) -> None:
        self.params, self.kind, self.lr = params, kind, lr.to(torch.float64)
        self.m = [torch.zeros_like(p) for p in params] if kind == "adam" else []
        self.v = [torch.zeros_like(p) for p in params] if kind == "adam" else []
        self.t = torch.zeros(len(lr), dtype=torch.float64)

    def step(self, grads: list[Tensor], active: Tensor) -> None:
        self.t += active
        if bool(active.all()):
            self._update(self.params, grads, self.m, self.v, self.t, self.lr)
            return
        idx = active.nonzero().squeeze(1)
        ps, gs, ms, vs = ([x[idx] for x in xs] for xs in (self.params, grads, self.m, self.v))
        self._update(ps, gs, ms, vs, self.t[idx], self.lr[idx])
        for full, part in zip(self.params + self.m + self.v, ps + ms + vs, strict=True):
            full[idx] = part

    def _update(
        self,
        params: list[Tensor],
        grads: list[Tensor],
        ms: list[Tensor],
        vs: list[Tensor],
        t: Tensor,
        lr: Tensor,
    ) -> None:
        step_size = (lr / (1 - _BETA1**t)).float() if self.kind == "adam" else lr.float()
        bc2_sqrt = (1 - _BETA2**t).sqrt().float()
        for i, (p, g) in enumerate(zip(params, grads, strict=True)):
            shape = (-1,) + (1,) * (p.dim() - 1)
            if self.kind == "adam":
                m, v = ms[i], vs[i]
                m.lerp_(g, 1 - _BETA1)
                v.mul_(_BETA2).addcmul_(g, g, value=1 - _BETA2)
                g = torch.sqrt(v, out=g).div_(bc2_sqrt.view(shape)).add_(_ADAM_EPS)
                g = torch.div(m, g, out=g)
            p.sub_(g.mul_(step_size.view(shape)))


def _pad(Xs: Sequence[Tensor], ys: Sequence[Tensor]) -> tuple[Tensor, Tensor, list[int]]:
    ns = [_check_data(X, y) for X, y in zip(Xs, ys, strict=True)]
    if len({X.shape[1] for X in Xs}) != 1:
        raise DataValidationError("every site must have the same number of input columns")
    X_pad = torch.zeros(len(ns), max(ns), Xs[0].shape[1])
    y_pad = torch.zeros(len(ns), max(ns), dtype=ys[0].dtype)
    for s, (X, y) in enumerate(zip(Xs, ys, strict=True)):
        X_pad[s, : ns[s]], y_pad[s, : ns[s]] = X, y
    return X_pad, y_pad, ns


def _batch_index(mask: Tensor) -> tuple[Tensor, Tensor]:
    """Indices (S, b_max) of each site's selected rows, and which entries are real (not padding)."""
    counts = mask.sum(1)
    b_max = max(1, int(counts.max()))
    rows, cols = mask.nonzero(as_tuple=True)
    idx = torch.zeros(mask.shape[0], b_max, dtype=torch.long)
    idx[rows, torch.arange(len(rows)) - (torch.cumsum(counts, 0) - counts)[rows]] = cols
    return idx, torch.arange(b_max).unsqueeze(0) < counts.unsqueeze(1)


def train_dp_stacked(
    stack: MLPStack,
    Xs: Sequence[Tensor],
    ys: Sequence[Tensor],
    *,
    configs: DPSGDConfig | Sequence[DPSGDConfig],
    generators: Sequence[torch.Generator],
    loss: str | Loss = "cross_entropy",
    grad_hook: GradHook | None = None,
    canary_gradients: Sequence[Tensor | None] | None = None,
    noise: Sequence[NoiseSource] | None = None,
) -> list[TrainResult]:
    """Train the ``S`` MLPs of ``stack`` in place, each on its own data, in one batched computation.

    Site ``s`` trains on ``(Xs[s], ys[s])`` with ``configs[s]`` and draws from ``noise[s]`` (and,
    without privacy, ``generators[s]``) exactly what :func:`~pubsubml.privacy.dpsgd.generic.train_dp`
    draws, so its model does not depend on the other sites.  Sites may differ in size, sample
    rate, steps, σ, C and learning rate; a site that has run its steps stops while the others go on.

    Parameters
    ----------
    stack : MLPStack
    Xs, ys : sequences of S Tensor of shapes (n_s, n_inputs) and (n_s,)
    configs : DPSGDConfig or sequence of S DPSGDConfig
        All with the same ``optimizer`` and ``private``.
    generators : sequence of S torch.Generator
        Non-private runs shuffle with them; private runs draw from them only when ``noise`` is
        not given.
    loss : str or Loss, default="cross_entropy"
    grad_hook : callable, optional
        ``grad_hook(params, grad)`` runs at every step between forming the step's gradient
        (clipped, noised and divided by the expected batch when private) and the optimizer
        step, on the flat (S, P) parameters (:attr:`MLPStack.flat`) and gradient; it edits
        ``grad`` in place, e.g. adds FedProx's proximal term μ(w − w_global).  It must not read
        the data: what it adds after the noise is then post-processing of the DP release and
        costs no privacy (pubsub-ml.txt §3.1, Theorem 2).
    canary_gradients : sequence of S (Tensor of shape (m_s, P) or None), optional
        ``m_s`` audit records of site ``s`` given by their per-sample gradients (laid out as
        :attr:`MLPStack.flat`), records like any other (:mod:`pubsubml.privacy.dpsgd.canaries`).
        Private runs only.
    noise : sequence of S NoiseSource, optional
        Each site's Poisson draws and Gaussian noise (:class:`~pubsubml.privacy.noise.SecureNoise`
        for a model that may be released); default ``SeededNoise`` over ``generators``, for
        simulations only.  :attr:`TrainResult.noise` reports which kind ran.

    Returns
    -------
    list of S TrainResult, each holding its site's trained ``nn.Sequential``.

    Raises
    ------
    ValueError
        Lengths that do not match ``stack.n_sites``, or configs that mix optimizers or privacy.
    DataValidationError
        A site whose ``X`` and ``y`` disagree or that has no rows.

    Examples
    --------
    >>> gens = [torch.Generator().manual_seed(s) for s in range(2)]
    >>> stack = MLPStack.init((3, 8, 2), "tanh", gens)
    >>> Xs, ys = [torch.rand(20, 3), torch.rand(30, 3)], [torch.zeros(20).long(), torch.ones(30).long()]
    >>> res = train_dp_stacked(stack, Xs, ys, configs=DPSGDConfig(batch_size=5, epochs=2), generators=gens)
    >>> [(r.steps, r.sample_rate) for r in res]
    [(8, 0.25), (12, 0.16666666666666666)]
    """
    cfgs, sources = _site_settings(stack.n_sites, configs, Xs, ys, generators, noise)
    X_pad, y_pad, ns = _pad(Xs, ys)
    canaries = check_canaries(canary_gradients, stack, cfgs[0].private)
    qs, steps = _rates_and_steps(cfgs, ns, canaries)
    opt = _StackedOptimizer([stack.flat], cfgs[0].optimizer, torch.tensor([c.lr for c in cfgs]))
    lossf = _loss(loss)
    if not cfgs[0].private:
        sizes = _run_minibatch(
            stack, opt, X_pad, y_pad, ns, qs, steps, cfgs, generators, lossf, grad_hook
        )
        return _results(stack, cfgs, qs, steps, sizes, sources)
    sizes = _run_private(
        stack, opt, X_pad, y_pad, ns, qs, steps, cfgs, sources, lossf, grad_hook, canaries
    )
    return _results(stack, cfgs, qs, steps, sizes, sources)


def _rates_and_steps(
    cfgs: Sequence[DPSGDConfig], ns: Sequence[int], canaries: Sequence[Tensor | None]
) -> tuple[list[float], list[int]]:
    """Each site's sample rate and step count, its canaries counted among its records."""
    totals = [n + (0 if c is None else c.shape[0]) for n, c in zip(ns, canaries, strict=True)]
    qs = [c.sample_rate_for(n) for c, n in zip(cfgs, totals, strict=True)]
    steps = [c.steps_for(n) for c, n in zip(cfgs, totals, strict=True)]
    return qs, steps


def _site_settings(
    n_sites: int,
    configs: DPSGDConfig | Sequence[DPSGDConfig],
    Xs: Sequence[Tensor],
    ys: Sequence[Tensor],
    generators: Sequence[torch.Generator],
    noise: Sequence[NoiseSource] | None,
) -> tuple[list[DPSGDConfig], list[NoiseSource]]:
    """Each site's config and noise source, checked against the number of sites.

    Raises
    ------
    ValueError
        Lengths that do not match ``n_sites``, or configs that mix optimizers or privacy.
    """
    cfgs = [configs] * n_sites if isinstance(configs, DPSGDConfig) else list(configs)
    if not len(cfgs) == len(Xs) == len(ys) == len(generators) == n_sites:
        raise ValueError(f"{n_sites} stacked sites need {n_sites} configs, X, y and generators")
    sources: list[NoiseSource] = (
        [SeededNoise(g) for g in generators] if noise is None else list(noise)
    )
    if len(sources) != n_sites or not all(isinstance(src, NoiseSource) for src in sources):
        raise ValueError(f"{n_sites} stacked sites need {n_sites} noise sources")
    if len({(c.optimizer, c.private) for c in cfgs}) != 1:
        raise ValueError("all sites of a stack must share the optimizer and the privacy setting")
    return cfgs, sources


def _results(
    stack: MLPStack,
    cfgs: Sequence[DPSGDConfig],
    qs: Sequence[float],
    steps: Sequence[int],
    sizes: Tensor,
    sources: Sequence[NoiseSource],
) -> list[TrainResult]:
    """What each site's run did, with its trained model as an ``nn.Sequential``."""
    private = cfgs[0].private
    return [
        TrainResult(
            module=m,
            steps=steps[s],
            sample_rate=qs[s],
            noise_multiplier=cfgs[s].noise_multiplier if private else 0.0,
            max_grad_norm=cfgs[s].max_grad_norm if private else math.inf,
            private=private,
            batch_sizes=sizes[: steps[s], s].clone(),
            noise=sources[s].kind,
        )
        for s, m in enumerate(stack.to_modules())
    ]


def _run_private(
    stack: MLPStack,
    opt: _StackedOptimizer,
    X_pad: Tensor,
    y_pad: Tensor,
    ns: list[int],
    qs: list[float],
    steps: list[int],
    cfgs: list[DPSGDConfig],
    sources: Sequence[NoiseSource],
    loss: Loss,
    grad_hook: GradHook | None = None,
    canaries: list[Tensor | None] | None = None,
) -> Tensor:
    """The private steps of every site (Poisson sampling, clipping, noise); the batch sizes."""
    S, scratch = len(ns), _Scratch()
    q = torch.tensor(qs, dtype=torch.float32)
    clip = torch.tensor([c.max_grad_norm for c in cfgs], dtype=torch.float32)
    noise_std = torch.tensor([c.noise_multiplier for c in cfgs], dtype=torch.float32) * clip
    records = [
        n + (0 if c is None else c.shape[0])
        for n, c in zip(ns, canaries or [None] * S, strict=True)
    ]
    expected = q * torch.tensor(records, dtype=torch.float32)  # canaries are records too
    chosen = torch.zeros(S, X_pad.shape[1], dtype=torch.bool)  # padding stays False
    audited = canaries is not None and any(c is not None for c in canaries)
    batch_canaries = CanaryGradients(canaries, clip) if canaries and audited else None
    noise, grad = torch.empty_like(stack.flat), torch.empty_like(stack.flat)
    sites, steps_t = torch.arange(S).unsqueeze(1), torch.tensor(steps)
    sizes = torch.zeros(max(steps), S, dtype=torch.long)
    for t in range(max(steps)):
        active = steps_t > t
        running = range(S) if bool(active.all()) else active.nonzero().squeeze(1).tolist()
        chosen.zero_()
        for s in running:
            chosen[s, : ns[s]] = sources[s].poisson_mask(ns[s], qs[s])
        idx, valid = _batch_index(chosen)
        sizes[t] = valid.sum(1)
        stack.clipped_gradient_sum(
            X_pad[sites, idx], y_pad[sites, idx], valid, loss, clip, scratch, out=grad
        )
        if batch_canaries is not None:
            batch_canaries.add(grad, running, qs, sources, sizes[t])
        for s in running:
            sources[s].normal_(noise[s])
        grad.addcmul_(noise, noise_std.unsqueeze(1)).div_(expected.unsqueeze(1))
        if grad_hook is not None:
            grad_hook(stack.flat, grad)
        opt.step([grad], active)
    return sizes


def _run_minibatch(
    stack: MLPStack,
    opt: _StackedOptimizer,
    X_pad: Tensor,
    y_pad: Tensor,
    ns: list[int],
    qs: list[float],
    steps: list[int],
    cfgs: list[DPSGDConfig],
    generators: Sequence[torch.Generator],
    loss: Loss,
    grad_hook: GradHook | None = None,
) -> Tensor:
    """The non-private epochs of every site (shuffled minibatches); the batch sizes."""
    S, n_max, scratch = len(ns), X_pad.shape[1], _Scratch()
    batch = torch.tensor([c.batch_size for c in cfgs]).unsqueeze(1)
    n_batches = torch.tensor([math.ceil(n / c.batch_size) for n, c in zip(ns, cfgs, strict=True)])
    epochs = torch.tensor([c.epochs for c in cfgs])
    n_t, sites = torch.tensor(ns).unsqueeze(1), torch.arange(S)
    perm = torch.zeros(S, n_max, dtype=torch.long)
    sizes, done = torch.zeros(max(steps), S, dtype=torch.long), torch.zeros(S, dtype=torch.long)
    grad = torch.empty_like(stack.flat)
    for epoch in range(int(epochs.max())):
        training = epochs > epoch
        for s in training.nonzero().squeeze(1).tolist():
            perm[s, : ns[s]] = torch.randperm(ns[s], generator=generators[s])
        for k in range(int(n_batches[training].max())):
            active = training & (n_batches > k)
            pos = k * batch + torch.arange(int(batch.max())).unsqueeze(0)
            valid = (pos < n_t) & (pos < (k + 1) * batch) & active.unsqueeze(1)
            idx = perm[sites.unsqueeze(1), pos.clamp(max=n_max - 1)]
            rows = sites.unsqueeze(1), idx
            stack.clipped_gradient_sum(
                X_pad[rows], y_pad[rows], valid, loss, None, scratch, out=grad
            )
            count = valid.sum(1)
            sizes[done[active], sites[active]] = count[active]
            done += active
            grad.div_(count.clamp(min=1).unsqueeze(1))
            if grad_hook is not None:
                grad_hook(stack.flat, grad)
            opt.step([grad], active)
    return sizes
