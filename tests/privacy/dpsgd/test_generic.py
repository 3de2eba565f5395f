"""DP-SGD engine: per-sample gradients, clipping, noise, Poisson sampling, stacked training.

Every quantity is checked against an independent reference: micro-batches (one backward pass per
sample) for gradients, the binomial law for batch sizes, the Gaussian law for the noise, and
dp-accounting itself for ε.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

import dp_accounting
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import Tensor, nn

from pubsubml.errors import DataValidationError, InvalidPrivacyParameterError
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.dpsgd import (
    LOSSES,
    DPSGDConfig,
    Loss,
    MLPStack,
    clip_per_sample,
    init_mlp,
    per_sample_gradients,
    poisson_sample,
    train_dp,
    train_dp_stacked,
)

SIZES = (5, 7, 4, 3)


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """Tiny tensors: one intra-op thread avoids OpenMP overhead on the shared cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _data(n: int, seed: int, loss: str = "cross_entropy", d: int = 5) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g) * 2
    y = (
        torch.randint(0, 3, (n,), generator=g)
        if loss == "cross_entropy"
        else torch.randn(n, generator=g)
    )
    return X, y


def _microbatch_grads(module: nn.Module, X: Tensor, y: Tensor, loss: str) -> list[list[Tensor]]:
    """Ground truth: one forward/backward pass per sample."""
    out = []
    for i in range(len(X)):
        module.zero_grad()
        LOSSES[loss].per_sample(module(X[i : i + 1]), y[i : i + 1]).sum().backward()
        out.append([p.grad.clone() for p in module.parameters()])  # type: ignore[union-attr]
    return out


# ---- per-sample gradients ---------------------------------------------------------------------
class _Odd(nn.Module):
    """A non-MLP module (a scalar gate and a shared weight used twice) for the generic path."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(5, 3)
        self.gate = nn.Parameter(torch.tensor(0.7))

    def forward(self, x: Tensor) -> Tensor:
        return self.lin(x) * torch.sigmoid(self.gate) + self.lin(x * x) ** 2 / 10


@pytest.mark.parametrize(
    "make", [lambda: init_mlp(SIZES, "tanh", torch.Generator().manual_seed(0)), _Odd]
)
def test_generic_per_sample_gradients_equal_microbatches(make: type[nn.Module]) -> None:
    module = make()
    X, y = _data(9, seed=1)

    psg = per_sample_gradients(module, dict(module.named_parameters()), X, y)

    truth = _microbatch_grads(module, X, y, "cross_entropy")
    for i, grads in enumerate(truth):
        for (name, g), expected in zip(psg.items(), grads, strict=True):
            torch.testing.assert_close(g[i], expected, atol=1e-5, rtol=1e-5, msg=name)


# ---- clipping ---------------------------------------------------------------------------------
def test_every_clipped_per_sample_norm_is_at_most_c() -> None:
    module = init_mlp(SIZES, "tanh", torch.Generator().manual_seed(3))
    X, y = _data(32, seed=4)
    X = X * 50  # large inputs, large gradients

    clipped, norms = clip_per_sample(
        per_sample_gradients(module, dict(module.named_parameters()), X, y), 0.1
    )

    per_sample = torch.sqrt(sum(g.reshape(32, -1).pow(2).sum(1) for g in clipped.values()))  # type: ignore[arg-type]
    assert bool((norms > 0.1).any())
    assert bool((per_sample <= 0.1 * (1 + 1e-5)).all())
    small = norms <= 0.1
    torch.testing.assert_close(per_sample[small], norms[small], atol=1e-6, rtol=1e-4)


@settings(max_examples=50, deadline=None)
@given(
    scale=st.floats(1e-4, 1e4),
    clip=st.floats(1e-3, 1e3),
    seed=st.integers(0, 2**16),
)
def test_clip_per_sample_property(scale: float, clip: float, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    grads = {
        "w": torch.randn(6, 3, 4, generator=g) * scale,
        "b": torch.randn(6, 3, generator=g) * scale,
    }

    clipped, norms = clip_per_sample(grads, clip)

    after = torch.sqrt(clipped["w"].pow(2).sum((1, 2)) + clipped["b"].pow(2).sum(1))
    assert bool((after <= clip * (1 + 1e-5)).all())
    factor = clipped["b"][:, 0] / grads["b"][:, 0]  # one factor per sample, same direction
    torch.testing.assert_close(
        clipped["w"], grads["w"] * factor.view(-1, 1, 1), rtol=1e-5, atol=0.0
    )
    assert bool(((factor > 0) & (factor <= 1)).all())
    # C / (‖∇‖ + 1e-6) leaves a relative gap of at most 1e-6 / ‖∇‖ below C.
    torch.testing.assert_close(after, norms.clamp(max=clip), rtol=2e-3, atol=0.0)


# ---- noise ------------------------------------------------------------------------------------
_ZERO = Loss(lambda o, y: o.sum(-1) * 0.0, lambda o, y: torch.zeros_like(o))


def test_noise_standard_deviation_is_sigma_c_generic() -> None:
    module = nn.Linear(100, 100)  # 10 100 parameters
    start = [p.detach().clone() for p in module.parameters()]
    X, y = torch.zeros(40, 100), torch.zeros(40, dtype=torch.long)
    config = DPSGDConfig(
        noise_multiplier=1.3, max_grad_norm=0.5, batch_size=10, epochs=1, lr=1.0, optimizer="sgd"
    )

    result = train_dp(
        module, X, y, config=config, generator=torch.Generator().manual_seed(0), loss=_ZERO
    )

    # SGD with lr 1 on a zero loss: each step moves by −noise/(qN), and 4 steps add up.
    moved = torch.cat(
        [(s - p.detach()).reshape(-1) for s, p in zip(start, module.parameters(), strict=True)]
    )
    per_step = moved * (result.sample_rate * 40) / math.sqrt(result.steps)
    assert result.steps == 4
    assert float(per_step.mean()) == pytest.approx(0.0, abs=4 * 0.65 / math.sqrt(len(per_step)))
    assert float(per_step.std()) == pytest.approx(1.3 * 0.5, rel=0.015)


def test_noise_standard_deviation_is_sigma_c_per_stacked_site() -> None:
    S, sizes = 4, (50, 60, 2)
    stack = MLPStack.init(sizes, "tanh", [torch.Generator().manual_seed(s) for s in range(S)])
    start = [p.clone() for p in stack.parameters()]
    configs = [
        DPSGDConfig(
            noise_multiplier=sigma, max_grad_norm=c, batch_size=5, epochs=1, lr=1.0, optimizer="sgd"
        )
        for sigma, c in [(0.5, 1.0), (1.0, 1.0), (2.0, 0.25), (4.0, 3.0)]
    ]
    Xs = [torch.zeros(20, 50)] * S
    ys = [torch.zeros(20, dtype=torch.long)] * S

    results = train_dp_stacked(
        stack,
        Xs,
        ys,
        configs=configs,
        generators=[torch.Generator().manual_seed(10 + s) for s in range(S)],
        loss=_ZERO,
    )

    moved = torch.cat(
        [(s0 - p).reshape(S, -1) for s0, p in zip(start, stack.parameters(), strict=True)], dim=1
    )
    for s, (cfg, res) in enumerate(zip(configs, results, strict=True)):
        per_step = moved[s] * (res.sample_rate * 20) / math.sqrt(res.steps)
        assert float(per_step.std()) == pytest.approx(
            cfg.noise_multiplier * cfg.max_grad_norm, rel=0.02
        )
    # Sites draw independent noise.
    corr = torch.corrcoef(moved)
    assert float((corr - torch.eye(S)).abs().max()) < 0.03


# ---- Poisson sampling -------------------------------------------------------------------------
def test_poisson_sample_batch_sizes_are_binomial() -> None:
    g = torch.Generator().manual_seed(0)
    n, q, draws = 1000, 0.1, 3000

    sizes = torch.tensor(
        [int(poisson_sample(n, q, g).sum()) for _ in range(draws)], dtype=torch.float64
    )

    assert float(sizes.mean()) == pytest.approx(n * q, abs=4 * math.sqrt(n * q * (1 - q) / draws))
    var = n * q * (1 - q)
    assert float(sizes.var()) == pytest.approx(var, abs=4 * var * math.sqrt(2 / (draws - 1)))


def test_stacked_training_batch_sizes_are_binomial_per_site() -> None:
    # 40 independent sites of each size, 10 epochs of 10 steps: 4 000 batch sizes per size.
    ns, q, S = [200, 500], 0.1, 40
    gens = [torch.Generator().manual_seed(s) for s in range(2 * S)]
    stack = MLPStack.init((2, 3, 2), "tanh", gens)
    sizes = [n for n in ns for _ in range(S)]

    results = train_dp_stacked(
        stack,
        [torch.zeros(n, 2) for n in sizes],
        [torch.zeros(n, dtype=torch.long) for n in sizes],
        configs=DPSGDConfig(sample_rate=q, epochs=10),
        generators=gens,
    )

    for k, n in enumerate(ns):
        batches = torch.cat([r.batch_sizes for r in results[k * S : (k + 1) * S]]).double()
        assert all(r.steps == 100 == len(r.batch_sizes) for r in results)
        count, var = len(batches), n * q * (1 - q)
        assert float(batches.mean()) == pytest.approx(n * q, abs=4 * math.sqrt(var / count))
        assert float(batches.var()) == pytest.approx(var, abs=4 * var * math.sqrt(2 / (count - 1)))


# ---- stacked training = separate trainings ----------------------------------------------------
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
@pytest.mark.parametrize("private", [True, False])
def test_stacked_training_equals_separate_trainings(optimizer: str, private: bool) -> None:
    ns = [40, 55, 23]
    base = DPSGDConfig(batch_size=8, epochs=3, lr=0.05, optimizer=optimizer, private=private)  # type: ignore[arg-type]
    configs = [
        dataclasses.replace(base, noise_multiplier=s, max_grad_norm=c)
        for s, c in [(0.8, 1.0), (1.5, 0.5), (0.3, 2.0)]
    ]
    data = [_data(n, seed=40 + i) for i, n in enumerate(ns)]
    gens = [torch.Generator().manual_seed(100 + i) for i in range(3)]
    stack = MLPStack.init(SIZES, "tanh", gens)

    stacked = train_dp_stacked(
        stack, [x for x, _ in data], [t for _, t in data], configs=configs, generators=gens
    )

    for i, (n, (X, y), cfg) in enumerate(zip(ns, data, configs, strict=True)):
        g = torch.Generator().manual_seed(100 + i)
        module = init_mlp(SIZES, "tanh", g)  # same draws as the stack's initialisation
        alone = train_dp(module, X, y, config=cfg, generator=g)
        assert (alone.steps, alone.sample_rate) == (stacked[i].steps, stacked[i].sample_rate)
        assert alone.steps == cfg.steps_for(n)
        assert torch.equal(alone.batch_sizes, stacked[i].batch_sizes)
        for p, ref in zip(stacked[i].module.parameters(), module.parameters(), strict=True):
            torch.testing.assert_close(p, ref, atol=2e-5, rtol=1e-4)
    assert [r.steps for r in stacked] == [3 * 5, 3 * 7, 3 * 3]


def test_training_is_reproducible_under_a_seed() -> None:
    X, y = _data(50, seed=7)

    def run(seed: int) -> list[Tensor]:
        gens = [torch.Generator().manual_seed(seed)]
        stack = MLPStack.init(SIZES, "tanh", gens)
        train_dp_stacked(
            stack, [X], [y], configs=DPSGDConfig(batch_size=10, epochs=2), generators=gens
        )
        return stack.parameters()

    first, again, other = run(1), run(1), run(2)

    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first[0], other[0])


def test_training_leaves_the_global_rng_alone() -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    gens = [torch.Generator().manual_seed(0)]
    X, y = _data(20, seed=0)

    train_dp_stacked(
        MLPStack.init(SIZES, "tanh", gens), [X], [y], configs=DPSGDConfig(epochs=1), generators=gens
    )

    assert torch.equal(torch.rand(3), expected)


# ---- accounting -------------------------------------------------------------------------------
def test_events_give_the_epsilon_of_dp_accounting_for_the_steps_that_ran() -> None:
    n, sigma, delta = 120, 2.0, 1e-5
    X, y = _data(n, seed=8)
    config = DPSGDConfig(noise_multiplier=sigma, batch_size=30, epochs=2)
    g = torch.Generator().manual_seed(0)

    result = train_dp(init_mlp(SIZES, "tanh", g), X, y, config=config, generator=g)

    assert (result.steps, result.sample_rate, len(result.batch_sizes)) == (8, 0.25, 8)
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(0.25, dp_accounting.GaussianDpEvent(sigma)), 8
    )
    rdp = dp_accounting.rdp.RdpAccountant()
    rdp.compose(event)
    pld = dp_accounting.pld.PLDAccountant()
    pld.compose(event)
    assert compute_epsilon(result.events, delta, backend="rdp") == pytest.approx(
        rdp.get_epsilon(delta), rel=1e-9
    )
    assert compute_epsilon(result.events, delta) == pytest.approx(pld.get_epsilon(delta), rel=1e-3)


def test_non_private_run_has_no_events() -> None:
    X, y = _data(30, seed=9)
    g = torch.Generator().manual_seed(0)
    config = DPSGDConfig(batch_size=8, epochs=2, private=False)

    result = train_dp(init_mlp(SIZES, "tanh", g), X, y, config=config, generator=g)

    assert result.events == [] and result.noise_multiplier == 0.0
    assert result.steps == 8 and result.batch_sizes.tolist() == [8, 8, 8, 6] * 2


# ---- validation -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"noise_multiplier": -1.0}, InvalidPrivacyParameterError),
        ({"max_grad_norm": 0.0}, InvalidPrivacyParameterError),
        ({"sample_rate": 1.5}, InvalidPrivacyParameterError),
        ({"batch_size": 0}, ValueError),
        ({"epochs": 0}, ValueError),
        ({"lr": -1.0}, ValueError),
        ({"optimizer": "rmsprop"}, ValueError),
    ],
)
def test_config_rejects_bad_values(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        DPSGDConfig(**kwargs)  # type: ignore[arg-type]


def test_bad_data_and_mismatched_sites_raise() -> None:
    stack = MLPStack.init(SIZES, "tanh", [torch.Generator()])
    with pytest.raises(DataValidationError):
        train_dp_stacked(
            stack,
            [torch.zeros(5, 5)],
            [torch.zeros(4, dtype=torch.long)],
            configs=DPSGDConfig(),
            generators=[torch.Generator()],
        )
    with pytest.raises(ValueError, match="sites need"):
        train_dp_stacked(
            stack,
            [torch.zeros(5, 5)] * 2,
            [torch.zeros(5, dtype=torch.long)] * 2,
            configs=DPSGDConfig(),
            generators=[torch.Generator()] * 2,
        )
    with pytest.raises(ValueError, match="activation"):
        MLPStack.init(SIZES, "swish", [torch.Generator()])
    with pytest.raises(ValueError, match="loss"):
        per_sample_gradients(nn.Linear(2, 2), {}, torch.zeros(1, 2), torch.zeros(1), "hinge")
