"""DP federated learning baselines: clients run DP-SGD locally, a server aggregates.

:class:`FederatedMLP` holds what every such baseline shares — the round loop, client sampling,
local DP-SGD on the stacked engine (all participants of a round train at once), per-client privacy
accounting — and leaves the server's aggregation step to a subclass.  :class:`DPFedAvg` is
federated averaging (McMahan et al.) with DP-SGD at each client, the DP-FL baseline of
pubsub-ml.txt §7.3 and §8.2.3 ("FL(V)").

Privacy is record-level and per client: each client's accountant records exactly the DP-SGD steps
it ran on its own data, round after round (sequential composition).  The server only sees outputs
of DP mechanisms, so averaging is post-processing (pubsub-ml.txt §3.1, Theorem 2).  Client sampling
gives no amplification here: a client that is chosen runs all its local steps.  Clients are chosen
by a seeded schedule in which every client takes part ⌊R·m/N⌋ or ⌈R·m/N⌉ times, and the noise is
calibrated for the larger count, so every client ends within its target ε.
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
from sklearn.utils.validation import check_is_fitted

from pubsubml.errors import DataValidationError, InvalidPrivacyParameterError
from pubsubml.learners.base import check_labels, check_regression_targets
from pubsubml.privacy.accountant import PrivacyAccountant
from pubsubml.privacy.calibration import calibrate_noise
from pubsubml.privacy.dpsgd import DPSGDConfig, MLPStack, init_mlp, train_dp_stacked
from pubsubml.privacy.events import DPEvent
from pubsubml.schema import FeatureSchema

__all__ = ["DPFedAvg", "FederatedMLP", "client_schedule"]

Client = tuple[pd.DataFrame, Any]


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
    rng = np.random.default_rng(seed)
    order: list[int] = []
    out = []
    for _ in range(rounds):
        if len(order) < per_round:
            # Start a new pass; clients still owed this pass come first, no client twice a round.
            rest = [c for c in rng.permutation(n_clients).tolist() if c not in order]
            order += rest
        out.append(np.sort(np.asarray(order[:per_round])))
        del order[:per_round]
    return out


class FederatedMLP(BaseEstimator, metaclass=ABCMeta):
    """Base of the DP federated baselines over MLPs: rounds of local DP-SGD, then aggregation.

    Subclasses implement :meth:`aggregate` (the server update).

    Parameters
    ----------
    schema : FeatureSchema
        Public schema shared by all clients (inputs are scaled by its public bounds).
    task : {"classification", "regression"}, default="classification"
    classes : sequence, optional
        Public label set (default: the union of the clients' labels, which is not private-safe).
    hidden_layer_sizes : tuple of int, default=(100, 50)
    activation : {"tanh", "relu", "sigmoid"}, default="tanh"
    rounds : int, default=30
    local_epochs : int, default=1
        Local DP-SGD epochs per round (``round(1/q)`` steps each).
    batch_size : int, default=100
        Expected local batch; the Poisson sample rate is ``batch_size / n_client``.
    client_fraction : float, default=0.1
        Fraction of the clients chosen per round (pubsub-ml.txt §8.2.3 samples 10%).
    lr : float, default=1e-3
    optimizer : {"adam", "sgd"}, default="adam"
        Local optimizer (its state restarts every round).
    dp : bool, default=True
    target_epsilon, target_delta : float, default=1.0, 1e-4
        Per-client budget (pubsub-ml.txt §8: ε = 1, δ = 10⁻⁴); σ is calibrated to it unless
        ``noise_multiplier`` is given.
    noise_multiplier : float, optional
    max_grad_norm : float, default=1.0
    accountant : {"pld", "rdp"}, default="pld"
        Calibrates σ and reports ε (PLD is tight, RDP a fast conservative bound).
    random_state : int, default=0

    Attributes
    ----------
    module_ : torch.nn.Sequential
        The global model.
    classes_ : ndarray (classification)
    client_events_ : list of list of DPEvent
        What each client's accountant recorded.
    client_epsilons_ : ndarray of shape (n_clients,)
    epsilon_, delta_ : float
        The largest client ε, at ``target_delta``.
    noise_multiplier_ : float or ndarray
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
        dp: bool = True,
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

    # ---- training -------------------------------------------------------------------------
    def _encode_clients(
        self, clients: Sequence[Client]
    ) -> tuple[list[torch.Tensor], list[torch.Tensor], np.ndarray | None]:
        if not isinstance(self.schema, FeatureSchema):
            raise TypeError("schema must be a FeatureSchema (inputs use its public bounds)")
        if len(clients) == 0:
            raise DataValidationError("no clients")
        Xs = [torch.from_numpy(self.schema.encode(X, extra="ignore")) for X, _ in clients]
        if self.task == "classification":
            labels = (
                np.unique(np.concatenate([np.asarray(y).reshape(-1) for _, y in clients]))
                if self.classes is None
                else np.asarray(list(self.classes))
            )
            codes = [
                check_labels(y, labels.tolist(), len(X))[1]
                for X, (_, y) in zip(Xs, clients, strict=True)
            ]
            ys = [torch.from_numpy(c) for c in codes]
            return Xs, ys, labels
        ys = [
            torch.from_numpy(check_regression_targets(y, len(X)))
            for X, (_, y) in zip(Xs, clients, strict=True)
        ]
        return Xs, ys, None

    def _noise(
        self, steps_per_round: list[int], rates: list[float], max_rounds: int
    ) -> list[float]:
        if not self.dp:
            return [0.0] * len(rates)
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
        DataValidationError, LabelError
            Malformed client data.
        """
        if not 0 < self.client_fraction <= 1 or self.rounds < 1 or self.local_epochs < 1:
            raise ValueError("need 0 < client_fraction <= 1, rounds >= 1 and local_epochs >= 1")
        Xs, ys, classes = self._encode_clients(clients)
        N = len(Xs)
        per_round = max(1, round(self.client_fraction * N))
        schedule = client_schedule(N, per_round, self.rounds, self.random_state)
        max_rounds = math.ceil(self.rounds * per_round / N)
        ns = [len(X) for X in Xs]
        base = DPSGDConfig(
            batch_size=self.batch_size,
            epochs=self.local_epochs,
            lr=self.lr,
            optimizer=self.optimizer,
            private=self.dp,
            max_grad_norm=self.max_grad_norm,
        )
        rates = [base.sample_rate_for(n) for n in ns]
        sigmas = self._noise([base.steps_for(n) for n in ns], rates, max_rounds)
        configs = [dataclasses.replace(base, noise_multiplier=s) for s in sigmas]
        n_out = 1 if classes is None else len(classes)
        sizes = (Xs[0].shape[1], *self.hidden_layer_sizes, n_out)
        root = torch.Generator().manual_seed(self.random_state)
        params = [p.detach().clone() for p in init_mlp(sizes, self.activation, root).parameters()]
        accountants = [PrivacyAccountant(backend=self.accountant) for _ in range(N)]
        loss = "cross_entropy" if self.task == "classification" else "mse"
        for r, chosen in enumerate(schedule):
            k = len(chosen)
            stack = MLPStack(
                [params[i].unsqueeze(0).repeat(k, 1, 1) for i in range(0, len(params), 2)],
                [params[i].unsqueeze(0).repeat(k, 1) for i in range(1, len(params), 2)],
                self.activation,
            )
            gens = [
                torch.Generator().manual_seed(self.random_state * 1_000_003 + r * 100_003 + int(c))
                for c in chosen
            ]
            results = train_dp_stacked(
                stack,
                [Xs[c] for c in chosen],
                [ys[c] for c in chosen],
                configs=[configs[c] for c in chosen],
                generators=gens,
                loss=loss,
            )
            for c, res in zip(chosen, results, strict=True):
                if res.private:  # what ran, step by step (merged into one event per client)
                    accountants[c].step(
                        noise_multiplier=res.noise_multiplier,
                        sample_rate=res.sample_rate,
                        steps=res.steps,
                    )
            w = torch.tensor([ns[c] for c in chosen], dtype=torch.float32)
            params = self.aggregate(params, stack.parameters(), w / w.sum())
        module = init_mlp(sizes, self.activation, torch.Generator().manual_seed(0))
        with torch.no_grad():
            for p, v in zip(module.parameters(), params, strict=True):
                p.copy_(v)
        eps = np.array([a.get_epsilon(self.target_delta) if a.events else 0.0 for a in accountants])
        self.module_ = module
        if classes is not None:
            self.classes_ = classes
        self.client_events_: list[list[DPEvent]] = [list(a.events) for a in accountants]
        self.client_epsilons_ = eps
        self.epsilon_ = float(eps.max()) if self.dp else math.inf
        self.delta_ = float(self.target_delta) if self.dp else 0.0
        self.noise_multiplier_ = np.asarray(sigmas)
        counts = np.zeros(N, dtype=int)
        for chosen in schedule:
            counts[chosen] += 1
        self.participation_ = counts
        self.n_features_in_ = len(self.schema)
        return self

    # ---- prediction -----------------------------------------------------------------------
    def _forward(self, X: pd.DataFrame) -> torch.Tensor:
        check_is_fitted(self, "module_")
        Z = torch.from_numpy(self.schema.encode(X, extra="ignore", missing="default"))
        with torch.no_grad():
            out: torch.Tensor = self.module_(Z)
        return out

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """Class probabilities of the global model, shape (n_samples, n_classes)."""
        return torch.softmax(self._forward(X), dim=1).numpy().astype(np.float64)

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Labels (classification) or values (regression), shape (n_samples,)."""
        if self.task == "classification":
            return np.asarray(self.classes_[self.predict_proba(X).argmax(axis=1)])
        return self._forward(X)[:, 0].numpy().astype(np.float64)

    def score(self, X: pd.DataFrame, y: Any) -> float:
        """Accuracy (classification) or R² (regression)."""
        from sklearn.metrics import accuracy_score, r2_score

        pred = self.predict(X)
        return float(
            accuracy_score(y, pred) if self.task == "classification" else r2_score(y, pred)
        )


class DPFedAvg(FederatedMLP):
    """DP-FedAvg: local DP-SGD at every client, the server takes the data-weighted average.

    See :class:`FederatedMLP` for the parameters and the privacy accounting.

    References
    ----------
    pubsub-ml.txt §7.3 and §8.2.3 (the DP-FL baselines, 10% of clients per round); McMahan et
    al., "Communication-efficient learning of deep networks from decentralized data" (FedAvg).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> schema = FeatureSchema.numeric(["a", "b"])
    >>> clients = []
    >>> for _ in range(4):
    ...     X = pd.DataFrame(rng.random((60, 2)), columns=["a", "b"])
    ...     clients.append((X, (X.a > X.b).astype(int).to_numpy()))
    >>> fl = DPFedAvg(schema=schema, classes=[0, 1], hidden_layer_sizes=(8,), rounds=2,
    ...               client_fraction=0.5, batch_size=20, noise_multiplier=1.0,
    ...               accountant="rdp").fit(clients)
    >>> fl.participation_.tolist(), bool(fl.epsilon_ > 0)
    ([1, 1, 1, 1], True)
    """

    def aggregate(
        self,
        global_params: list[torch.Tensor],
        client_params: list[torch.Tensor],
        weights: torch.Tensor,
    ) -> list[torch.Tensor]:
        """Weighted average of the clients' models (FedAvg)."""
        return [torch.einsum("k,k...->...", weights, p) for p in client_params]
