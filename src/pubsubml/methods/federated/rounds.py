"""DP federated learning over MLPs: clients train locally, a server aggregates.

:class:`FederatedMLP` holds the round loop, client sampling, local training on the stacked engine
(all participants of a round train at once) and the privacy accounting; subclasses give the
server update.  DPFedAvg, DPFedProx, DPFedAdam (pubsub-ml.txt §7.3, the "(V)" baselines),
:func:`min_epsilon` (§8.2.1) live in :mod:`pubsubml.methods.federated.strategies`, and
:func:`fine_tune` (the "(F)" baselines) in :mod:`pubsubml.methods.federated.finetune`; the
package :mod:`pubsubml.methods.federated` exports them all.  Two kinds of DP:

* ``dp=True`` / ``"local"``: record-level DP at every client, whose accountant records exactly the
  DP-SGD steps it ran, round after round.  The server sees only DP outputs, so aggregation is
  post-processing (§3.1, Theorem 2).  Sampling gives no amplification (a chosen client runs all
  its steps): every client takes part ⌊R·m/N⌋ or ⌈R·m/N⌉ times and σ covers the larger count.
* ``dp="central"``: client-level DP by a trusted server (McMahan et al. 2018; §7.3 "the server
  adds noise").  Each round each client takes part with probability ``q = client_fraction``
  (Poisson), trains without noise and sends its model; the server clips each update to norm
  C = ``max_grad_norm``, adds N(0, σ²C²) to the sum and divides by ``qN`` (clients weigh the same),
  one subsampled-Gaussian event per round.  The unit of privacy is a whole client: adding or
  removing one client changes the sum by at most C.  Changing one record *inside* a client that
  takes part moves its clipped update by up to 2C (replace-one), so at the record level the same σ
  gives only the guarantee of two add/remove steps (group privacy of size 2), not ε.  The server
  sees every client's model in the clear: it must be trusted.
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABCMeta, abstractmethod
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch
from sklearn.base import BaseEstimator

from pubsubml.errors import DataValidationError, InvalidPrivacyParameterError, LabelError
from pubsubml.learners.base import check_labels, check_regression_targets
from pubsubml.methods.federated.finetune import GlobalModelMixin
from pubsubml.privacy.accountant import PrivacyAccountant, check_delta
from pubsubml.privacy.calibration import calibrate_noise
from pubsubml.privacy.dpsgd import DPSGDConfig, MLPStack, init_mlp, train_dp_stacked
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.mlp_stack import GradHook
from pubsubml.schema import FeatureSchema

__all__ = ["Client", "FederatedMLP", "client_schedule"]

Client = tuple[pd.DataFrame, Any]
_DP_MODES: dict[Any, str] = {True: "local", "local": "local", "central": "central", False: "none"}


def client_schedule(n_clients: int, per_round: int, rounds: int, seed: int) -> list[np.ndarray]:
    """Which clients take part in each round: consecutive blocks of shuffled passes over all.

    Every client takes part ⌊R·m/N⌋ or ⌈R·m/N⌉ times.

    Returns
    -------
    list of ``rounds`` sorted int arrays of length ``per_round``

    Examples
    --------
    >>> rounds = client_schedule(4, 2, 3, seed=0)
    >>> sorted(np.bincount(np.concatenate(rounds), minlength=4).tolist())
    [1, 1, 2, 2]
    """
    if not 1 <= per_round <= n_clients or rounds < 0:
        raise ValueError(
            f"need 1 <= per_round <= n_clients and rounds >= 0, got per_round={per_round}, "
            f"n_clients={n_clients}, rounds={rounds}"
        )
    rng = np.random.default_rng(seed)
    order: list[int] = []
    out = []
    for _ in range(rounds):
        if len(order) < per_round:
            # Append a whole new pass (every client once).  The clients still owed by the current
            # pass go last in the new one, so no client is chosen twice in a round.
            owed = set(order)
            perm = rng.permutation(n_clients).tolist()
            order += [c for c in perm if c not in owed] + [c for c in perm if c in owed]
        out.append(np.sort(np.asarray(order[:per_round])))
        del order[:per_round]
    return out


def _privatize(
    params: list[torch.Tensor],
    clients: list[torch.Tensor] | None,
    C: float,
    sigma: float,
    denominator: float,
    gen: torch.Generator,
) -> list[torch.Tensor]:
    """One virtual client ``w + (Σ_k clip_C(w_k − w) + N(0, σ²C²)) / denominator`` (k, 1, …)."""
    flat = torch.cat([p.reshape(-1) for p in params])
    total = torch.randn(flat.shape, generator=gen).mul_(sigma * C)
    if clients is not None:
        deltas = torch.cat([c.reshape(c.shape[0], -1) for c in clients], 1) - flat
        norms = torch.linalg.vector_norm(deltas, dim=1, keepdim=True)
        total += (deltas * (C / (norms + 1e-12)).clamp(max=1.0)).sum(0)
    out = (flat + total / denominator).split([p.numel() for p in params])
    return [o.reshape(1, *p.shape) for o, p in zip(out, params, strict=True)]


class FederatedMLP(GlobalModelMixin, BaseEstimator, metaclass=ABCMeta):
    """Base of the DP federated baselines over MLPs: rounds of local training, then aggregation.

    Subclasses implement :meth:`aggregate` (the server update); they may also set up server state
    (:meth:`_reset_server`) and add a data-independent term to the local gradients
    (:meth:`_grad_hook`).

    Parameters
    ----------
    schema : FeatureSchema
        Public schema shared by all clients (inputs are scaled by its public bounds).
    task : {"classification", "regression"}, default="classification"
    classes : sequence, optional
        Public label set; required with DP (the labels present in private data can leak).
        Without DP it defaults to the union of the clients' labels.
    hidden_layer_sizes : tuple of int, default=(100, 50)
    activation : {"tanh", "relu", "sigmoid"}, default="tanh"
    rounds : int, default=30
    local_epochs : int, default=1
        Local DP-SGD epochs per round (``round(1/q)`` steps each).
    batch_size : int, default=100
        Expected local batch; the Poisson sample rate is ``batch_size / n_client``.
    client_fraction : float, default=0.1
        Fraction of the clients chosen per round (pubsub-ml.txt §8.2.3 samples 10%; §7.3 takes
        all, 1.0); with ``dp="central"`` the Poisson client sampling rate q.
    lr : float, default=1e-3
    optimizer : {"adam", "sgd"}, default="adam"
        Local optimizer (its state restarts every round).
    dp : {True, "local", "central", False}, default=True
        Record-level DP-SGD at every client (``True`` or ``"local"``), client-level DP added by a
        trusted server (``"central"``), or none; see the module notes.
    target_epsilon, target_delta : float, default=1.0, 1e-4
        Budget (pubsub-ml.txt §8: ε = 1, δ = 10⁻⁴) of every client (local) or of the federation
        at client level (central); σ is calibrated to it unless ``noise_multiplier`` is given.
        With personalized budgets use :func:`min_epsilon` (pubsub-ml.txt §8.2.1).
    noise_multiplier : float, optional
    max_grad_norm : float, default=1.0
        C: per-sample gradient clip (local) or per-client update clip (central).
    accountant : {"pld", "rdp"}, default="pld"
        Calibrates σ and reports ε (PLD is tight, RDP a fast conservative bound).
    random_state : int, default=0

    Attributes
    ----------
    module_ : torch.nn.Sequential
        The global model.
    classes_ : ndarray (classification)
    client_events_ : list of list of DPEvent
        The DP events that read each client's data (central: the server's, for every client).
    client_epsilons_ : ndarray of shape (n_clients,)
    epsilon_, delta_ : float
        The largest client ε, at ``target_delta`` (``inf``, 0 without DP).
    privacy_unit_ : {"record", "client", None}
        What ``epsilon_`` protects: one record of a client (local), a whole client (central).
    noise_multiplier_ : ndarray
        σ per client (local) or the server's σ, shape (1,) (central).
    participation_ : ndarray of shape (n_clients,)
        Rounds each client took part in.
    """

    def __init__(
        self,
        *,
        schema: FeatureSchema,
        task: Literal["classification", "regression"] = "classification",
        classes: Sequence[Any] | None = None,
        hidden_layer_sizes: tuple[int, ...] = (100, 50),
        activation: str = "tanh",
        rounds: int = 30,
        local_epochs: int = 1,
        batch_size: int = 100,
        client_fraction: float = 0.1,
        lr: float = 1e-3,
        optimizer: Literal["adam", "sgd"] = "adam",
        dp: bool | Literal["local", "central"] = True,
        target_epsilon: float = 1.0,
        target_delta: float = 1e-4,
        noise_multiplier: float | None = None,
        max_grad_norm: float = 1.0,
        accountant: Literal["pld", "rdp"] = "pld",
        random_state: int = 0,
    ) -> None:
        self.schema = schema
        self.task = task
        self.classes = classes
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.rounds = rounds
        self.local_epochs = local_epochs
        self.batch_size = batch_size
        self.client_fraction = client_fraction
        self.lr = lr
        self.optimizer = optimizer
        self.dp = dp
        self.target_epsilon = target_epsilon
        self.target_delta = target_delta
        self.noise_multiplier = noise_multiplier
        self.max_grad_norm = max_grad_norm
        self.accountant = accountant
        self.random_state = random_state

    # ---- server strategy ------------------------------------------------------------------
    @abstractmethod
    def aggregate(
        self,
        global_params: list[torch.Tensor],
        client_params: list[torch.Tensor],
        weights: torch.Tensor,
    ) -> list[torch.Tensor]:
        """The server update of one round.

        Parameters
        ----------
        global_params : list of Tensor of shape param.shape
            The global model before the round (W0, b0, W1, b1, …).
        client_params : list of Tensor of shape (k, *param.shape)
            The ``k`` participants' models after local training, stacked.
        weights : Tensor of shape (k,)
            Client weights ``n_k / Σ n_k``.

        Returns
        -------
        list of Tensor: the new global parameters
        """

    def _reset_server(self, global_params: list[torch.Tensor]) -> None:
        """Set up server state (e.g. optimizer moments) at the start of :meth:`fit`; none here."""

    def _grad_hook(self, center: torch.Tensor) -> GradHook | None:
        """A data-independent term for the local gradients, given the global model flat as
        (1, P) (:func:`~pubsubml.privacy.mlp_stack.train_dp_stacked`); none here."""
        return None

    # ---- training -------------------------------------------------------------------------
    def _encode_clients(
        self, clients: Sequence[Client], private: bool = False
    ) -> tuple[list[torch.Tensor], list[torch.Tensor], np.ndarray | None]:
        if not isinstance(self.schema, FeatureSchema):
            raise TypeError("schema must be a FeatureSchema (inputs use its public bounds)")
        if len(clients) == 0:
            raise DataValidationError("no clients")
        Xs = [torch.from_numpy(self.schema.encode(X, extra="ignore")) for X, _ in clients]
        pairs = [(len(X), y) for X, (_, y) in zip(Xs, clients, strict=True)]
        if self.task != "classification":
            return Xs, [torch.from_numpy(check_regression_targets(y, n)) for n, y in pairs], None
        if private and self.classes is None:
            raise LabelError(
                f"{type(self).__name__} with DP needs the public label set, e.g. classes=[0, 1]: "
                "reading it from the clients' labels would leak which labels occur"
            )
        labels = (
            np.unique(np.concatenate([np.asarray(y).reshape(-1) for _, y in clients]))
            if self.classes is None
            else np.asarray(list(self.classes))
        )
        codes = [check_labels(y, labels.tolist(), n)[1] for n, y in pairs]
        return Xs, [torch.from_numpy(c) for c in codes], labels

    def _noise(
        self, steps_per_round: list[int], rates: list[float], max_rounds: int
    ) -> list[float]:
        if self.noise_multiplier is not None:
            if not self.noise_multiplier > 0:
                raise InvalidPrivacyParameterError("noise_multiplier must be > 0")
            return [float(self.noise_multiplier)] * len(rates)
        cache: dict[tuple[float, int], float] = {}
        out = []
        for q, k in zip(rates, steps_per_round, strict=True):
            key = (q, k * max_rounds)
            if key not in cache:
                cache[key] = float(
                    calibrate_noise(
                        self.target_epsilon, self.target_delta, q, k * max_rounds, self.accountant
                    )
                )
            out.append(cache[key])
        return out

    def fit(self, clients: Sequence[Client]) -> FederatedMLP:
        """Run ``rounds`` rounds over ``clients`` (each a ``(DataFrame, labels)`` pair).

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Bad ``client_fraction``, ``rounds``, ``local_epochs`` or ``dp``.
        InvalidPrivacyParameterError
            σ ≤ 0, C ≤ 0, δ ≥ 1 / n_c for a client of n_c records (local DP) or
            δ ≥ 1 / n_clients (central DP).
        DataValidationError, LabelError
            Malformed client data.
        """
        if not 0 < self.client_fraction <= 1 or self.rounds < 1 or self.local_epochs < 1:
            raise ValueError("need 0 < client_fraction <= 1, rounds >= 1 and local_epochs >= 1")
        mode = _DP_MODES.get(self.dp) if isinstance(self.dp, bool | str) else None
        if mode is None:
            raise ValueError(f"dp must be True, False, 'local' or 'central', got {self.dp!r}")
        if mode != "none" and not self.max_grad_norm > 0:
            raise InvalidPrivacyParameterError("max_grad_norm must be > 0")
        Xs, ys, classes = self._encode_clients(clients, private=mode != "none")
        N, q, ns = len(Xs), float(self.client_fraction), [len(X) for X in Xs]
        per_round = max(1, round(q * N))
        schedule = client_schedule(N, per_round, self.rounds, self.random_state)
        if mode == "local":  # record-level DP at each client: δ < 1 / n_c
            for n_c in ns:
                check_delta(self.target_delta, n_c)
        if mode == "central":  # Poisson client sampling: what the accounted event assumes
            check_delta(self.target_delta, N)  # one client is the unit of privacy
            rng = np.random.default_rng((self.random_state, 1))
            schedule = [np.flatnonzero(rng.random(N) < q) for _ in range(self.rounds)]
        base = DPSGDConfig(
            batch_size=self.batch_size,
            epochs=self.local_epochs,
            lr=self.lr,
            optimizer=self.optimizer,
            private=mode == "local",
            max_grad_norm=self.max_grad_norm,
        )
        rates, steps = [base.sample_rate_for(n) for n in ns], [base.steps_for(n) for n in ns]
        max_rounds = int(np.bincount(np.concatenate(schedule), minlength=N).max())
        sigmas = self._noise(steps, rates, max_rounds) if mode == "local" else [0.0] * N
        configs = [dataclasses.replace(base, noise_multiplier=s) for s in sigmas]
        server_sigma = self._noise([self.rounds], [q], 1)[0] if mode == "central" else 0.0
        n_out = 1 if classes is None else len(classes)
        sizes = (Xs[0].shape[1], *self.hidden_layer_sizes, n_out)
        root = torch.Generator().manual_seed(self.random_state)
        params = [p.detach().clone() for p in init_mlp(sizes, self.activation, root).parameters()]
        self._reset_server(params)
        accountants = [PrivacyAccountant(backend=self.accountant) for _ in range(N + 1)]
        server_gen = torch.Generator().manual_seed(self.random_state * 1_000_003 + 7)
        seed = self.random_state * 1_000_003
        for r, chosen in enumerate(schedule):
            k, trained = len(chosen), None
            if k:
                stack = MLPStack(
                    [params[i].unsqueeze(0).repeat(k, 1, 1) for i in range(0, len(params), 2)],
                    [params[i].unsqueeze(0).repeat(k, 1) for i in range(1, len(params), 2)],
                    self.activation,
                )
                results = train_dp_stacked(
                    stack,
                    [Xs[c] for c in chosen],
                    [ys[c] for c in chosen],
                    configs=[configs[c] for c in chosen],
                    generators=[
                        torch.Generator().manual_seed(seed + r * 100_003 + int(c)) for c in chosen
                    ],
                    loss="cross_entropy" if self.task == "classification" else "mse",
                    grad_hook=self._grad_hook(stack.flat[:1].clone()),
                )
                trained = stack.parameters()
                for c, res in zip(chosen, results, strict=True):
                    if res.private:  # what ran, step by step (merged into one event per client)
                        accountants[c].step(
                            noise_multiplier=res.noise_multiplier,
                            sample_rate=res.sample_rate,
                            steps=res.steps,
                        )
            if mode == "central":  # the server's release (every round, even an empty one)
                accountants[N].step(noise_multiplier=server_sigma, sample_rate=q, steps=1)
                C = float(self.max_grad_norm)
                virtual = _privatize(params, trained, C, server_sigma, q * N, server_gen)
                params = self.aggregate(params, virtual, torch.ones(1))
            elif trained is not None:
                w = torch.tensor([ns[c] for c in chosen], dtype=torch.float32)
                params = self.aggregate(params, trained, w / w.sum())
        module = init_mlp(sizes, self.activation, torch.Generator().manual_seed(0))
        with torch.no_grad():
            for p, v in zip(module.parameters(), params, strict=True):
                p.copy_(v)
        self.module_ = module
        if classes is not None:
            self.classes_ = classes
        accountants = accountants[N:] * N if mode == "central" else accountants[:N]
        eps = np.array([a.get_epsilon(self.target_delta) if a.events else 0.0 for a in accountants])
        self.client_events_: list[list[DPEvent]] = [list(a.events) for a in accountants]
        self.client_epsilons_ = eps
        self.epsilon_ = float(eps.max()) if mode != "none" else math.inf
        self.delta_ = float(self.target_delta) if mode != "none" else 0.0
        self.privacy_unit_ = {"local": "record", "central": "client"}.get(mode)
        self.noise_multiplier_ = np.asarray([server_sigma] if mode == "central" else sigmas)
        self.participation_ = np.bincount(np.concatenate(schedule), minlength=N).astype(int)
        self.n_features_in_ = len(self.schema)
        return self
