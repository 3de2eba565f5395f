"""The users' side of FL with private domain experts: what a chosen user sends, runs and keeps
(fl-domain-experts.txt §3.1, §3.2)."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest
import torch
from torch import Tensor, nn

from pubsubml.methods.domain_experts.federation import DomainExpertsFL
from pubsubml.methods.domain_experts.gate import general_gradients
from pubsubml.methods.domain_experts.users import Users, local_round
from pubsubml.privacy.dpsgd import init_mlp
from pubsubml.schema import FeatureSchema

SCHEMA = FeatureSchema.numeric(["a", "b"])


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """Tiny models: one intra-op thread avoids hand-off overhead on a shared machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _labels(user: int, n: int, rng: np.random.Generator) -> tuple[pd.DataFrame, np.ndarray]:
    X = pd.DataFrame(rng.random((n, 2)), columns=["a", "b"])
    rule = X.a > X.b if user == 0 else X.a + X.b > 1
    return X, rule.astype(int).to_numpy()


def _users(general: nn.Sequential, sigmas: list[float], C: float) -> Users:
    """Three users of 12 expert rows and 6 gate rows; sample rate 1 (every row, every round)."""
    g = torch.Generator().manual_seed(1)
    train, held = [], []
    for _ in sigmas:
        X = torch.rand(18, 2, generator=g)
        y = (X[:, 0] > X[:, 1]).long()
        train.append((X[:12], y[:12]))
        held.append((X[12:], y[12:]))
    privates = [copy.deepcopy(general) for _ in sigmas]
    gates = [nn.Linear(2, 1) for _ in sigmas]
    return Users(
        train=train,
        held=held,
        privates=privates,
        gates=gates,
        private_opts=[torch.optim.Adam(m.parameters(), lr=0.01) for m in privates],
        gate_opts=[torch.optim.Adam(m.parameters(), lr=0.05) for m in gates],
        rates=[1.0] * len(sigmas),
        sigmas=np.asarray(sigmas),
        generators=[torch.Generator().manual_seed(10 + i) for i in range(len(sigmas))],
        messages=[],
        algorithm=2,
        task="classification",
        dp=True,
        max_grad_norm=C,
        record_messages=True,
    )


def _state(modules: list[nn.Module]) -> list[Tensor]:
    return [p.detach().clone() for m in modules for p in m.parameters()]


def test_a_round_sends_clipped_gradients_over_l_and_accounts_only_noisy_users() -> None:
    general = init_mlp((2, 3, 2), "tanh", torch.Generator().manual_seed(0))
    users = _users(general, sigmas=[0.0, 1.0, 2.0], C=0.05)
    before_general = _state([general])
    before_user_1 = _state([users.privates[1], users.gates[1]])
    before_user_0 = _state([users.privates[0]])
    X0, y0 = users.train[0]
    grads, norms = general_gradients(
        general, users.privates[0], users.gates[0], X0, y0,
        algorithm=2, task="classification", max_grad_norm=0.05,
    )  # fmt: skip
    assert bool((norms > 0.05).any())  # clipping matters here
    updates = local_round(
        users, general, 3, np.array([0, 2]), list(general.parameters()), lambda center: None
    )
    # User 0 (σ = 0): the clipped per-sample gradients of its whole batch, summed, over L = 12.
    names = [k for k, _ in general.named_parameters()]
    for k, sent in zip(names, updates.params, strict=True):
        assert sent.shape[0] == 2
        torch.testing.assert_close(sent[0], grads[k].sum(0) / 12)
    # Only the noisy user ran a DP event: one subsampled Gaussian step (σ, q).
    assert updates.events[0] == []
    (event,) = updates.events[1]
    assert (event.noise_multiplier, event.sample_rate, event.count) == (2.0, 1.0, 1)
    assert [(m["round"], m["user"]) for m in users.messages] == [(3, 0), (3, 2)]
    # Users never change M_G; a chosen user steps its expert, a user not chosen keeps everything.
    assert all(torch.equal(a, b) for a, b in zip(before_general, _state([general]), strict=True))
    after_user_1 = _state([users.privates[1], users.gates[1]])
    assert all(torch.equal(a, b) for a, b in zip(before_user_1, after_user_1, strict=True))
    after_user_0 = _state([users.privates[0]])
    assert not all(torch.equal(a, b) for a, b in zip(before_user_0, after_user_0, strict=True))


def test_only_general_model_gradients_are_sent() -> None:
    rng = np.random.default_rng(4)
    users = [_labels(u, 100, rng) for u in range(3)]
    m = DomainExpertsFL(
        schema=SCHEMA, classes=[0, 1], hidden_layer_sizes=(4,), rounds=6, batch_size=10,
        noise_multiplier=1.0, accountant="rdp", record_messages=True,
    ).fit(users)  # fmt: skip
    shapes = [tuple(p.shape) for p in m.general_.parameters()]
    assert len(m.messages_) == 6 * 3
    secret = [p.detach() for mod in (*m.privates_, *m.gates_) for p in mod.parameters()]
    for message in m.messages_:
        assert set(message) == {"round", "user", "gradient"}
        assert [tuple(g.shape) for g in message["gradient"]] == shapes
        for g in message["gradient"]:
            for s in secret:
                assert g.shape != s.shape or not torch.allclose(g, s)
    # The gates hold weights no message could carry: a gate is Linear(d, 1), sent tensors are not.
    assert all(tuple(p.shape) not in shapes for g in m.gates_ for p in g.parameters())
