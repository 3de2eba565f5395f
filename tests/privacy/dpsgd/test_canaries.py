"""Canary records given by their gradients (for auditing): counted, sampled and clipped like rows."""

from __future__ import annotations

import pytest
import torch

from pubsubml.errors import DataValidationError
from pubsubml.privacy.dpsgd import DPSGDConfig, MLPStack, init_mlp, train_dp, train_dp_stacked

N, D = 50, 4  # real rows; the last input column is zero in every real row
SIZES = (D, 2)  # a linear model: W0 (2, D) then b0 (2,)
P = 2 * D + 2
CANARY_COORD = D - 1  # W0[0, D-1]: no real row moves it


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    X = torch.rand(N, D, generator=g)
    X[:, -1] = 0.0
    return X, (X[:, 0] > 0.5).long()


def _config(**kw: object) -> DPSGDConfig:
    base = {"batch_size": 10**6, "epochs": 1, "lr": 0.1, "optimizer": "sgd", "max_grad_norm": 1.0}
    return DPSGDConfig(**{**base, "noise_multiplier": 1e-6, **kw})  # type: ignore[arg-type]


def _canaries(m: int, size: float = 10.0) -> torch.Tensor:
    c = torch.zeros(m, P)
    c[:, CANARY_COORD] = size
    return c


def test_stacked_canaries_count_in_n_and_are_clipped_to_c() -> None:
    X, y = _data()
    seen: list[float] = []
    stack = MLPStack.init(SIZES, "tanh", [torch.Generator().manual_seed(1)])
    [res] = train_dp_stacked(
        stack,
        [X],
        [y],
        configs=[_config()],
        generators=[torch.Generator().manual_seed(2)],
        grad_hook=lambda _p, g: seen.append(float(g[0, CANARY_COORD])),
        canary_gradients=[_canaries(3)],
    )

    assert res.sample_rate == 1.0 and int(res.batch_sizes[0]) == N + 3  # q = 1: all sampled
    # three canaries, each clipped from 10·C to C, averaged over the expected batch N + 3
    assert seen[0] == pytest.approx(3 * 1.0 / (N + 3), rel=1e-3)


def test_generic_path_adds_the_same_clipped_canaries() -> None:
    X, y = _data()
    module = init_mlp(SIZES, "tanh", torch.Generator().manual_seed(1))
    opt = torch.optim.SGD(module.parameters(), lr=0.1)
    seen: list[float] = []
    opt.register_step_pre_hook(
        lambda *_: seen.append(float(module[0].weight.grad[0, CANARY_COORD]))  # type: ignore[index]
    )
    res = train_dp(
        module,
        X,
        y,
        config=_config(),
        generator=torch.Generator().manual_seed(2),
        optimizer=opt,
        canary_gradients=_canaries(3),
    )

    assert int(res.batch_sizes[0]) == N + 3
    assert seen[0] == pytest.approx(3 * 1.0 / (N + 3), rel=1e-3)


def test_canaries_lower_the_sample_rate_like_rows() -> None:
    X, y = _data()
    stack = MLPStack.init(SIZES, "tanh", [torch.Generator().manual_seed(1)])
    config = _config(batch_size=10, noise_multiplier=1.0)
    [res] = train_dp_stacked(
        stack,
        [X],
        [y],
        configs=[config],
        generators=[torch.Generator().manual_seed(2)],
        canary_gradients=[_canaries(50)],
    )
    assert res.sample_rate == pytest.approx(config.sample_rate_for(N + 50))


def test_canaries_are_refused_in_a_non_private_run_or_with_the_wrong_shape() -> None:
    X, y = _data()
    stack = MLPStack.init(SIZES, "tanh", [torch.Generator().manual_seed(1)])
    gens = [torch.Generator().manual_seed(2)]
    with pytest.raises(ValueError, match="not private"):
        train_dp_stacked(
            stack,
            [X],
            [y],
            configs=[_config(private=False)],
            generators=gens,
            canary_gradients=[_canaries(2)],
        )
    with pytest.raises(DataValidationError, match="shape"):
        train_dp_stacked(
            stack,
            [X],
            [y],
            configs=[_config()],
            generators=gens,
            canary_gradients=[torch.zeros(2, P + 1)],
        )
    module = init_mlp(SIZES, "tanh", torch.Generator().manual_seed(1))
    with pytest.raises(DataValidationError, match="shape"):
        train_dp(module, X, y, config=_config(), generator=gens[0], canary_gradients=torch.zeros(P))
