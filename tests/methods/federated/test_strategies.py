"""DP FL baselines of pubsub-ml.txt §7.3: FedAvg, FedProx, FedAdam (local or central DP), fine-tuning.

ε is checked against dp-accounting called directly, from the rounds, steps, sample rates and σ.
"""

from __future__ import annotations

import copy
from typing import Any, Literal

import dp_accounting
import numpy as np
import pandas as pd
import pytest
import torch
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant
from sklearn.base import clone

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.learners.dpsgd_base import unfold_input_center
from pubsubml.learners.mlp import DPMLPClassifier
from pubsubml.methods import hyperplane_chunks, hyperplane_schema
from pubsubml.methods.federated import (
    DPFedAdam,
    DPFedAvg,
    DPFedProx,
    FederatedMLP,
    fine_tune,
    min_epsilon,
)
from pubsubml.methods.federated.dp import privatize
from pubsubml.privacy import pld_discretization_interval
from pubsubml.privacy.dpsgd import DPSGDConfig, MLPStack, init_mlp, train_dp_stacked
from pubsubml.privacy.events import DPEvent

pytestmark = pytest.mark.usefixtures("one_thread")
SCHEMA = hyperplane_schema(4)
SMALL: dict[str, Any] = {
    "schema": SCHEMA,
    "classes": [0, 1],
    "hidden_layer_sizes": (8,),
    "client_fraction": 1.0,
    "batch_size": 20,
    "lr": 0.01,
}


def _chunks(n: int, rows: int, seed: int = 3) -> list[tuple[pd.DataFrame, np.ndarray]]:
    return list(hyperplane_chunks(n, rows, seed=seed, n_features=4, mag_change=0.0))


def _params(model: FederatedMLP) -> list[torch.Tensor]:
    """The global model's parameters as trained: on inputs centred at INPUT_CENTER."""
    trained = unfold_input_center(copy.deepcopy(model.module_))
    return [p.detach().clone() for p in trained.parameters()]


def _init_params(sizes: tuple[int, ...], seed: int = 0) -> list[torch.Tensor]:
    module = init_mlp(sizes, "tanh", torch.Generator().manual_seed(seed))
    return [p.detach().clone() for p in module.parameters()]


def _event(sigma: float, q: float, count: int) -> dp_accounting.DpEvent:
    sampled = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma))
    return dp_accounting.SelfComposedDpEvent(sampled, count)


def _reference_epsilon(sigma: float, q: float, count: int, delta: float, backend: str) -> float:
    """ε straight from dp-accounting (default RDP orders; PLD on the documented grid step)."""
    if backend == "rdp":
        rdp = rdp_privacy_accountant.RdpAccountant()
        return float(rdp.compose(_event(sigma, q, count)).get_epsilon(delta))
    ours = DPEvent(
        mechanism="subsampled_gaussian", noise_multiplier=sigma, sample_rate=q, count=count
    )
    interval = pld_discretization_interval([ours], delta)
    pld = pld_privacy_accountant.PLDAccountant(value_discretization_interval=interval)
    return float(pld.compose(_event(sigma, q, count)).get_epsilon(delta))


def test_non_private_fedavg_on_iid_data_approaches_joint() -> None:
    # Small sites, so pooling matters: a site alone is clearly below Joint (on average over the
    # sites), and FedAvg must recover most of that gap (a FedAvg that fell back to local
    # training would not).
    clients, test = _chunks(10, 20), _chunks(14, 200)[10:]
    X_test = pd.concat([X for X, _ in test], ignore_index=True)
    y_test = np.concatenate([y for _, y in test])
    fed = DPFedAvg(**{**SMALL, "hidden_layer_sizes": (16,)}, rounds=20, local_epochs=2, dp=False)
    fed.fit(clients)

    def mlp() -> DPMLPClassifier:
        return DPMLPClassifier(
            schema=SCHEMA,
            classes=[0, 1],
            hidden_layer_sizes=(16,),
            epochs=20,
            batch_size=20,
            learning_rate=0.01,
            dp=False,
            random_state=0,
        )

    joint = mlp().fit(
        pd.concat([X for X, _ in clients], ignore_index=True),
        np.concatenate([y for _, y in clients]),
    )
    fed_acc, joint_acc = fed.score(X_test, y_test), joint.score(X_test, y_test)
    single_acc = float(np.mean([mlp().fit(*c).score(X_test, y_test) for c in clients]))
    assert joint_acc > 0.85 and joint_acc - single_acc > 0.08
    assert fed_acc >= joint_acc - 0.03
    assert fed_acc - single_acc >= 0.75 * (joint_acc - single_acc)


@pytest.mark.parametrize("fraction", [1.0, 0.5])
@pytest.mark.parametrize("backend", ["rdp", "pld"])
@pytest.mark.parametrize(
    ("cls", "extra"),
    [(DPFedAvg, {}), (DPFedProx, {"mu": 0.1}), (DPFedAdam, {"server_lr": 0.05})],
)
def test_local_dp_epsilon_matches_dp_accounting(
    cls: type[FederatedMLP],
    extra: dict[str, Any],
    backend: Literal["pld", "rdp"],
    fraction: float,
) -> None:
    chunks = _chunks(2, 120)
    clients = [chunks[0], (chunks[1][0].iloc[:80], chunks[1][1][:80])]  # q = 1/6 and 1/4
    fl = cls(
        **{**SMALL, "client_fraction": fraction},
        **extra,
        rounds=4,
        target_epsilon=1.0,
        target_delta=1e-4,
        accountant=backend,
    )
    fl.fit(clients)
    assert fl.privacy_unit_ == "record"
    # every client in each of the 4 rounds, or one of the two per round, balanced: 2 rounds each
    rounds = 4 if fraction == 1.0 else 2
    assert fl.participation_.tolist() == [rounds, rounds]
    for c, (q, steps) in enumerate([(20 / 120, 6), (20 / 80, 4)]):
        sigma = float(fl.noise_multiplier_[c])
        assert [(e.sample_rate, e.count) for e in fl.client_events_[c]] == [(q, rounds * steps)]
        expected = _reference_epsilon(sigma, q, rounds * steps, 1e-4, backend)
        assert fl.client_epsilons_[c] == pytest.approx(expected, rel=1e-6)
        assert 0.99 < expected <= 1.0  # calibrated to the target, all rounds counted
    assert fl.epsilon_ == max(fl.client_epsilons_)


@pytest.mark.parametrize("backend", ["rdp", "pld"])
@pytest.mark.parametrize("cls", [DPFedAvg, DPFedProx, DPFedAdam])
def test_central_dp_epsilon_matches_dp_accounting(
    cls: type[FederatedMLP], backend: Literal["pld", "rdp"]
) -> None:
    clients = _chunks(6, 40)
    fl = cls(
        **{**SMALL, "client_fraction": 0.5},
        dp="central",
        rounds=4,
        target_epsilon=2.0,
        target_delta=1e-3,
        accountant=backend,
    ).fit(clients)
    sigma = float(fl.noise_multiplier_[0])
    event = DPEvent(
        mechanism="subsampled_gaussian", noise_multiplier=sigma, sample_rate=0.5, count=4
    )
    assert fl.privacy_unit_ == "client" and fl.client_events_ == [[event]] * 6
    expected = _reference_epsilon(sigma, 0.5, 4, 1e-3, backend)
    assert fl.epsilon_ == pytest.approx(expected, rel=1e-6)
    assert 1.98 < expected <= 2.0


def test_central_dp_samples_clients_by_poisson_and_trusts_no_small_federation() -> None:
    clients = [(X.iloc[:10], y[:10]) for X, y in _chunks(8, 10)]
    fl = DPFedAvg(
        **{**SMALL, "client_fraction": 0.5, "batch_size": 10, "hidden_layer_sizes": (2,)},
        dp="central",
        rounds=60,
        noise_multiplier=1.0,
        accountant="rdp",
    ).fit(clients)
    counts = fl.participation_
    assert counts.std() > 0 and abs(counts.mean() - 30) < 6  # Binomial(60, 0.5) per client
    with pytest.raises(InvalidPrivacyParameterError, match="1/n"):
        DPFedAvg(**SMALL, dp="central", target_delta=0.2, rounds=1).fit(clients)


def test_central_update_clips_each_client_and_adds_calibrated_noise() -> None:
    gen = torch.Generator().manual_seed(0)
    params = [torch.zeros(2, 2), torch.zeros(2)]
    clients = [
        torch.tensor([[[3.0, 0.0], [0.0, 0.0]], [[0.0, 0.1], [0.0, 0.0]]]),
        torch.zeros(2, 2),
    ]
    out = privatize(params, clients, 1.0, 1e-12, 2.0, gen)  # no noise: (clip(Δ₁) + Δ₂) / 2
    assert torch.allclose(out[0][0], torch.tensor([[0.5, 0.05], [0.0, 0.0]]), atol=1e-6)
    big = [torch.zeros(200, 200), torch.zeros(200)]
    noise = privatize(big, None, 2.0, 1.5, 4.0, gen)  # no client: N(0, (σC)²) / qN
    assert torch.cat([t.reshape(-1) for t in noise]).std().item() == pytest.approx(0.75, rel=0.02)


def test_central_dp_without_noise_or_clipping_is_fedavg() -> None:
    clients = _chunks(3, 60)
    common = {**SMALL, "rounds": 2, "random_state": 5, "accountant": "rdp"}
    plain = DPFedAvg(**common, dp=False).fit(clients)
    central = DPFedAvg(**common, dp="central", noise_multiplier=1e-9, max_grad_norm=100.0).fit(
        clients
    )
    for a, b in zip(_params(plain), _params(central), strict=True):
        assert torch.allclose(a, b, atol=1e-5)
    tight = DPFedAvg(**common, dp="central", noise_multiplier=1e-9, max_grad_norm=1e-3)
    moved = [
        a - b for a, b in zip(_params(tight.fit(clients)), _init_params((4, 8, 2), 5), strict=True)
    ]
    assert torch.cat([m.reshape(-1) for m in moved]).norm() <= 2e-3 + 1e-6  # 2 rounds ≤ C each


@pytest.mark.parametrize("dp", [True, False])
def test_fedprox_with_mu_zero_is_fedavg(dp: bool) -> None:
    clients = _chunks(3, 60)
    common = {**SMALL, "rounds": 3, "dp": dp, "noise_multiplier": 1.0, "accountant": "rdp"}
    avg = DPFedAvg(**common).fit(clients)
    prox = DPFedProx(**common, mu=0.0).fit(clients)
    assert all(torch.equal(a, b) for a, b in zip(_params(avg), _params(prox), strict=True))
    np.testing.assert_array_equal(avg.client_epsilons_, prox.client_epsilons_)


@pytest.mark.parametrize("dp", [True, False])
def test_fedprox_with_huge_mu_stays_at_the_initial_global(dp: bool) -> None:
    clients = _chunks(3, 100)
    common = {**SMALL, "rounds": 4, "local_epochs": 2, "dp": dp, "noise_multiplier": 1.0}
    init = _init_params((4, 8, 2))

    def drift(model: FederatedMLP) -> float:
        return max(float((a - b).abs().max()) for a, b in zip(_params(model), init, strict=True))

    free = drift(DPFedProx(**common, mu=0.0, accountant="rdp").fit(clients))
    held = drift(DPFedProx(**common, mu=1e6, accountant="rdp").fit(clients))
    assert free > 0.1 and held < 0.03


def test_fedadam_server_is_adam_by_hand() -> None:
    clients = _chunks(3, 60)
    common = {**SMALL, "noise_multiplier": 1.0, "accountant": "rdp"}
    eta, tau = 0.05, 1e-3
    x0 = _init_params((4, 8, 2))
    x1_avg = _params(DPFedAvg(**common, rounds=1).fit(clients))  # same local runs as FedAdam's
    one = DPFedAdam(**common, rounds=1, server_lr=eta, tau=tau).fit(clients)
    for x, avg, got, m, v in zip(
        x0, x1_avg, _params(one), one.server_m_, one.server_v_, strict=True
    ):
        delta = avg - x
        assert torch.allclose(m, 0.1 * delta, atol=1e-7)
        assert torch.allclose(v, 0.99 * tau**2 + 0.01 * delta**2, rtol=1e-5, atol=1e-12)
        assert torch.allclose(
            got,
            x + eta * 0.1 * delta / (torch.sqrt(0.99 * tau**2 + 0.01 * delta**2) + tau),
            atol=1e-6,
        )
    two = DPFedAdam(**common, rounds=2, server_lr=eta, tau=tau).fit(clients)  # state carried over
    assert two.server_steps_ == 2
    for x1, m1, v1, m2, v2, got in zip(
        _params(one),
        one.server_m_,
        one.server_v_,
        two.server_m_,
        two.server_v_,
        _params(two),
        strict=True,
    ):
        delta2 = (m2 - 0.9 * m1) / 0.1
        assert torch.allclose(v2, 0.99 * v1 + 0.01 * delta2**2, rtol=1e-4, atol=1e-10)
        assert torch.allclose(got, x1 + eta * m2 / (v2.sqrt() + tau), atol=1e-6)
    again = DPFedAdam(**common, rounds=2, server_lr=eta, tau=tau).fit(clients)  # state restarts
    assert all(torch.equal(a, b) for a, b in zip(_params(two), _params(again), strict=True))


@pytest.mark.parametrize(
    ("cls", "extra"), [(DPFedAvg, {}), (DPFedProx, {"mu": 0.01}), (DPFedAdam, {"server_lr": 0.05})]
)
def test_fine_tune_keeps_the_global_model_and_fits_the_site(
    cls: type[FederatedMLP], extra: dict[str, Any]
) -> None:
    clients = _chunks(3, 100)
    site_X, site_y = _chunks(2, 200, seed=11)[1]
    site_y = 1 - site_y  # the site's concept differs from the federation's
    fl = cls(**SMALL, **extra, rounds=3, noise_multiplier=1.0, accountant="rdp").fit(clients)
    before = _params(fl)
    tuned = fine_tune(fl, site_X.iloc[:100], site_y[:100], epochs=10, lr=0.02)
    assert type(tuned) is cls and tuned is not fl and tuned.fine_tuned_
    assert all(torch.equal(a, b) for a, b in zip(before, _params(fl), strict=True))
    assert not hasattr(fl, "fine_tuned_") and tuned.epsilon_ == fl.epsilon_
    held_X, held_y = site_X.iloc[100:], site_y[100:]
    assert tuned.score(held_X, held_y) > fl.score(held_X, held_y) + 0.2


def test_fine_tune_regression_and_errors() -> None:
    clients = [(X, X.sum(axis=1).to_numpy()) for X, _ in _chunks(2, 60)]
    reg = DPFedAvg(**{**SMALL, "classes": None}, task="regression", rounds=1, dp=False).fit(clients)
    X, y = clients[0]
    tuned = fine_tune(reg, X, y, epochs=20)
    assert tuned.score(X, y) > reg.score(X, y)
    with pytest.raises(ValueError, match="epochs"):
        fine_tune(reg, X, y, epochs=0)
    with pytest.raises(ValueError, match="lr"):
        fine_tune(reg, X, y, lr=-1.0)


def test_bad_strategy_parameters_raise_before_training() -> None:
    clients = _chunks(2, 40)
    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="mu"):
            DPFedProx(**SMALL, mu=bad).fit(clients)
    bad_server: list[dict[str, Any]] = [
        {"server_lr": 0.0},
        {"server_lr": -1.0},
        {"tau": 0.0},
        {"beta1": 1.0},
        {"beta2": -0.1},
    ]
    for kw in bad_server:
        with pytest.raises(ValueError, match=next(iter(kw))):
            DPFedAdam(**SMALL, **kw).fit(clients)
    with pytest.raises(ValueError, match="dp must be"):
        DPFedAvg(**SMALL, dp="server").fit(clients)  # type: ignore[arg-type]
    for model in (DPFedProx(**SMALL, mu=-1.0), DPFedAdam(**SMALL, server_lr=0.0)):
        assert not hasattr(model, "module_")


def test_min_epsilon_and_sklearn_params() -> None:
    assert min_epsilon({"a": 0.8, "b": 0.25}) == 0.25 and min_epsilon([1.0, 0.5]) == 0.5
    for bad in ([], [1.0, 0.0], [float("inf")]):
        with pytest.raises(InvalidPrivacyParameterError):
            min_epsilon(bad)
    prox = clone(DPFedProx(schema=SCHEMA, mu=0.3, rounds=7))
    assert prox.get_params()["mu"] == 0.3 and prox.rounds == 7
    adam = clone(DPFedAdam(schema=SCHEMA, server_lr=0.2, dp="central"))
    assert (adam.server_lr, adam.beta2, adam.dp) == (0.2, 0.99, "central")


@pytest.mark.parametrize("private", [True, False])
def test_engine_grad_hook_sees_the_step_gradient(private: bool) -> None:
    def run(hook: Any) -> MLPStack:
        gens = [torch.Generator().manual_seed(s) for s in range(2)]
        stack = MLPStack.init((3, 4, 2), "tanh", gens)
        Xs = [torch.rand(20, 3, generator=gens[0]), torch.rand(30, 3, generator=gens[1])]
        ys = [(X[:, 0] > 0.5).long() for X in Xs]
        cfg = DPSGDConfig(batch_size=5, epochs=2, lr=0.1, optimizer="sgd", private=private)
        train_dp_stacked(stack, Xs, ys, configs=cfg, generators=gens, grad_hook=hook)
        return stack

    start = MLPStack.init((3, 4, 2), "tanh", [torch.Generator().manual_seed(s) for s in range(2)])
    assert torch.equal(run(None).flat, run(lambda p, g: None).flat)
    assert torch.equal(run(lambda p, g: g.zero_()).flat, start.flat)
