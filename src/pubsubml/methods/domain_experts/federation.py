"""Federated learning with private domain experts (fl-domain-experts.txt §3).

Every user i holds a general model M_G (shared, trained by federation with local DP), a private
expert M_P_i (a copy of M_G at the start, updated without noise and never shared) and a gate
α_i(x) = sigmoid(w_iᵀx + b_i) trained on a held-out split H of the user's data.  The user predicts
with Eq. 3, ŷ = α·M_G + (1 − α)·M_P.

One round is one minibatch of Algorithm 1 at every chosen user: a Poisson sample of its expert
data, the per-sample gradients with respect to Θ_G clipped to C and summed, Gaussian noise
N(0, σ²C²) added, and g_G/L sent to the server (L the expected batch size); the private expert
takes a noise-free step on the mixture loss of the same batch and the gate a step on a sample of
H.  The server averages the users' messages (weights n_i/Σn) and takes one optimizer step on Θ_G
(FedSGD; averaging DP outputs is post-processing).  Algorithm 1 differentiates the mixture loss,
Algorithm 2 the general model's own loss (§3.2.1), which makes its M_G exactly DP-FL's.

Privacy is record-level and local (users do not trust the server): each user's accountant
records one subsampled-Gaussian step (σ, q = L/n_i) per round it took part in; σ is given or
calibrated per user so that it ends at the target (ε, δ).

The rounds run in the shared federated loop (:func:`~pubsubml.methods.federated.loop.run_federation`):
the users' side of a round is Algorithm 1 (or 2) at each chosen user
(:func:`~pubsubml.methods.domain_experts.users.local_round`), the server's is
:class:`~pubsubml.methods.federated.strategies.FedSGD`, and the accounting is
:class:`~pubsubml.methods.federated.dp.LocalDP`'s.
"""

from __future__ import annotations

import copy
import functools
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted
from torch import Tensor, nn

from pubsubml.errors import (
    DataValidationError,
    InvalidPrivacyParameterError,
    LabelError,
    PaperAccountingWarning,
)
from pubsubml.learners.base import check_labels, check_regression_targets
from pubsubml.methods.domain_experts.gate import mixture_output
from pubsubml.methods.domain_experts.users import Split, Users, local_round
from pubsubml.methods.federated.dp import LocalDP, noise_multipliers
from pubsubml.methods.federated.loop import LocalTraining, participation, run_federation
from pubsubml.methods.federated.strategies import FedSGD
from pubsubml.privacy.dpsgd import init_mlp
from pubsubml.privacy.events import DPEvent
from pubsubml.schema import FeatureSchema

__all__ = ["DomainExpertsFL"]


@dataclass(kw_only=True, eq=False, repr=False)
class DomainExpertsFL(BaseEstimator):
    """FL with private domain experts: DP general model, private experts and gates per user.

    Parameters
    ----------
    schema : FeatureSchema
        Public schema shared by all users (inputs scaled by its public bounds).
    task : {"classification", "regression"}, default="classification"
    classes : sequence, optional
        Public label set; required with DP (the labels present in private data can leak).
        Without DP it defaults to the union of the users' labels.
    algorithm : {1, 2}, default=2
        1: send the clipped gradient of the mixture loss (the gate suppresses it); 2: send the
        clipped gradient of M_G's own loss regardless of the gate (§3.2.1).
    hidden_layer_sizes : tuple of int, default=()
        Hidden layers of M_G (``()`` is a linear model, as in §4.1 and §4.3).
    activation : {"tanh", "relu", "sigmoid"}, default="tanh"
    rounds : int, default=500
        Federation rounds (one Algorithm-1 minibatch per chosen user each).
    batch_size : int, default=50
        L, the expected batch; the Poisson rate is ``min(1, L / n_i)``.
    client_fraction : float, default=1.0
        Fraction of the users chosen per round (schedule of :func:`client_schedule`).
    gate_fraction : float, default=0.5
        Share of each user's rows held out as H to train the gate only (§3.2: "we split the
        training data in two").
    server_optimizer : {"sgd", "adam"}, default="sgd"
        How the server applies the averaged noisy gradient to Θ_G (post-processing either way).
    lr_general, lr_private, lr_gate : float, default=0.1, 0.01, 0.05
        Learning rates of the server update and of the users' Adam steps on experts and gates.
    dp : bool, default=True
        ``False``: no clipping and no noise (the σ = 0, unclipped reference).
    target_epsilon, target_delta : float, default=2.0, 1e-5
        Per-user budget (§4.2); σ is calibrated to it unless ``noise_multiplier`` is given.
    noise_multiplier : float, optional
        σ.  ``0`` clips without noise: ε is then infinite.
    max_grad_norm : float, default=1.0
        C.
    accountant : {"pld", "rdp"}, default="pld"
    record_messages : bool, default=False
        Keep every message sent to the server in ``messages_`` (for audits and tests).
    random_state : int, default=0

    Attributes
    ----------
    general_ : nn.Sequential
        The general model M_G after the last round.
    privates_ : list of nn.Sequential
        The users' private experts M_P_i (never sent).
    gates_ : list of nn.Linear
        The users' gates; α_i(x) = sigmoid(gates_[i](x)).
    classes_ : ndarray (classification)
    client_events_ : list of list of DPEvent
    client_epsilons_ : ndarray of shape (n_users,)
    epsilon_, delta_ : float
        The largest user ε at ``target_delta``: what the accountant gives for the noisy steps.
    privacy_guarantee_ : {"dp", "paper accounting", "none"}
        ``"dp"``: ``epsilon_`` bounds what was sent (Algorithm 2 with noise).  ``"paper
        accounting"``: Algorithm 1 with noise; each clipped gradient carries α(x) and M_P(x),
        trained on all of the user's rows without noise, so one record moves every other
        record's gradient too and ``epsilon_`` is not a DP guarantee (a
        :class:`~pubsubml.errors.PaperAccountingWarning` is issued).  ``"none"``: no DP.
    noise_multiplier_ : ndarray of shape (n_users,)
        Each user's σ (calibrated per user to ``target_epsilon`` unless ``noise_multiplier``).
    participation_ : ndarray of shape (n_users,)
    messages_ : list of dict
        With ``record_messages``: ``{"round", "user", "gradient"}``, the gradient a list of
        tensors shaped like ``general_``'s parameters.

    References
    ----------
    fl-domain-experts.txt §3.1 (local DP), §3.2 (Eq. 3, Algorithm 1), §3.2.1 (Algorithm 2).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> schema = FeatureSchema.numeric(["a", "b"])
    >>> users = []
    >>> for _ in range(2):
    ...     X = pd.DataFrame(rng.random((80, 2)), columns=["a", "b"])
    ...     users.append((X, (X.a > X.b).astype(int).to_numpy()))
    >>> m = DomainExpertsFL(schema=schema, classes=[0, 1], rounds=5, batch_size=10,
    ...                     noise_multiplier=1.0, accountant="rdp").fit(users)
    >>> m.predict(users[0][0], user=0).shape, bool(m.epsilon_ > 0)
    ((80,), True)
    """

    schema: FeatureSchema
    task: Literal["classification", "regression"] = "classification"
    classes: Sequence[Any] | None = None
    algorithm: Literal[1, 2] = 2
    hidden_layer_sizes: tuple[int, ...] = ()
    activation: str = "tanh"
    rounds: int = 500
    batch_size: int = 50
    client_fraction: float = 1.0
    gate_fraction: float = 0.5
    server_optimizer: Literal["sgd", "adam"] = "sgd"
    lr_general: float = 0.1
    lr_private: float = 0.01
    lr_gate: float = 0.05
    dp: bool = True
    target_epsilon: float = 2.0
    target_delta: float = 1e-5
    noise_multiplier: float | None = None
    max_grad_norm: float = 1.0
    accountant: Literal["pld", "rdp"] = "pld"
    record_messages: bool = False
    random_state: int = 0

    # ---- inputs ---------------------------------------------------------------------------
    def encode(self, X: pd.DataFrame) -> Tensor:
        """Inputs scaled by the public schema, shape (n_samples, n_encoded)."""
        return torch.from_numpy(self.schema.encode(X, extra="ignore", missing="default"))

    def encode_target(self, y: Any, n: int) -> Tensor:
        """Targets as float values (regression) or class codes (classification), shape (n,)."""
        if self.task == "regression":
            return torch.from_numpy(check_regression_targets(y, n))
        return torch.from_numpy(check_labels(y, list(self.classes_), n)[1])

    def _check_params(self, n_users: int) -> None:
        if not isinstance(self.schema, FeatureSchema):
            raise TypeError("schema must be a FeatureSchema (inputs use its public bounds)")
        if self.task not in ("classification", "regression"):
            raise ValueError(f"unknown task {self.task!r}")
        if self.algorithm not in (1, 2):
            raise ValueError(f"algorithm must be 1 or 2, got {self.algorithm!r}")
        if n_users == 0:
            raise DataValidationError("no users")
        if not 0 < self.client_fraction <= 1 or not 0 < self.gate_fraction < 1:
            raise ValueError("need 0 < client_fraction <= 1 and 0 < gate_fraction < 1")
        if self.server_optimizer not in ("sgd", "adam"):
            raise ValueError(f"unknown server_optimizer {self.server_optimizer!r}")
        if self.rounds < 1 or self.batch_size < 1:
            raise ValueError("rounds and batch_size must be >= 1")
        if self.noise_multiplier is not None and not (
            self.noise_multiplier >= 0 and math.isfinite(self.noise_multiplier)
        ):
            raise InvalidPrivacyParameterError("noise_multiplier must be finite and >= 0")
        if not self.max_grad_norm > 0:
            raise InvalidPrivacyParameterError("max_grad_norm must be > 0")

    def _sigmas(self, rates: list[float], counts: np.ndarray) -> np.ndarray:
        """Noise multiplier of each user (fl-domain-experts.txt §4.2: per-user budgets).

        With a target ε, each user calibrates its own σ to its own sampling rate and the number
        of rounds it takes part in, so every user ends at (just under) the target.
        """
        n_users = len(rates)
        if not self.dp:
            return np.zeros(n_users)
        if self.noise_multiplier is not None:
            return np.full(n_users, float(self.noise_multiplier))
        return np.asarray(
            noise_multipliers(
                self.target_epsilon, self.target_delta, rates, counts.tolist(), self.accountant
            )
        )

    # ---- training -------------------------------------------------------------------------
    def _split(self, Xs: list[Tensor], ys: list[Tensor]) -> tuple[list[Split], list[Split]]:
        """Each user's rows for its expert and general model, and H for its gate (§3.2)."""
        rng = np.random.default_rng(self.random_state)
        train, held = [], []
        for X, y in zip(Xs, ys, strict=True):
            n_gate = round(self.gate_fraction * len(X))
            if n_gate < 1 or len(X) - n_gate < 1:
                raise DataValidationError("every user needs rows for both its expert and gate")
            perm = torch.from_numpy(rng.permutation(len(X)))
            train.append((X[perm[n_gate:]], y[perm[n_gate:]]))
            held.append((X[perm[:n_gate]], y[perm[:n_gate]]))
        return train, held

    def _init_models(
        self,
        sizes: tuple[int, ...],
        splits: tuple[list[Split], list[Split]],
        rates: list[float],
        sigmas: np.ndarray,
    ) -> tuple[nn.Sequential, Users]:
        """M_G, and per user a copy of it as private expert and a gate at α = 1/2."""
        general = init_mlp(sizes, self.activation, torch.Generator().manual_seed(self.random_state))
        train, held = splits
        privates = [copy.deepcopy(general) for _ in train]
        gates = [nn.Linear(sizes[0], 1) for _ in train]
        with torch.no_grad():
            for gate in gates:
                gate.weight.zero_()
                gate.bias.zero_()  # α = 1/2: no prior preference
        seed = self.random_state * 1_000_003
        users = Users(
            train=train,
            held=held,
            privates=privates,
            gates=gates,
            private_opts=[torch.optim.Adam(m.parameters(), lr=self.lr_private) for m in privates],
            gate_opts=[torch.optim.Adam(g.parameters(), lr=self.lr_gate) for g in gates],
            rates=rates,
            sigmas=sigmas,
            generators=[
                torch.Generator().manual_seed(seed + 7919 * i + 1) for i in range(len(train))
            ],
            messages=[],
            algorithm=self.algorithm,
            task=self.task,
            dp=self.dp,
            max_grad_norm=self.max_grad_norm,
            record_messages=self.record_messages,
        )
        return general, users

    def fit(self, users: Sequence[tuple[pd.DataFrame, Any]]) -> DomainExpertsFL:
        """Federate over ``users`` (each a ``(DataFrame, targets)`` pair).

        Returns
        -------
        self

        Raises
        ------
        DataValidationError, LabelError
            Malformed user data, or a user too small to split into expert and gate rows.
        InvalidPrivacyParameterError
            Bad σ or C, or an unreachable target ε.
        """
        self._check_params(len(users))
        if self.task == "classification":
            if self.dp and self.classes is None:
                raise LabelError(
                    "DomainExpertsFL with DP needs the public label set, e.g. classes=[0, 1]: "
                    "reading it from the users' labels would leak which labels occur"
                )
            self.classes_ = (
                np.unique(np.concatenate([np.asarray(y).reshape(-1) for _, y in users]))
                if self.classes is None
                else np.asarray(list(self.classes))
            )
        Xs = [self.encode(X) for X, _ in users]
        ys = [self.encode_target(y, len(X)) for X, (_, y) in zip(Xs, users, strict=True)]
        splits = self._split(Xs, ys)
        n_users, ns = len(Xs), [len(X) for X, _ in splits[0]]
        server = FedSGD(
            client_fraction=self.client_fraction,
            optimizer=self.server_optimizer,
            lr=self.lr_general,
        )
        schedule = server.sample(n_users, self.rounds, self.random_state)
        counts = participation(schedule, n_users)
        rates = [min(1.0, self.batch_size / n) for n in ns]
        sigmas = self._sigmas(rates, counts)
        n_out = 1 if self.task == "regression" else len(self.classes_)
        sizes = (Xs[0].shape[1], *self.hidden_layer_sizes, n_out)
        general, held_by_users = self._init_models(sizes, splits, rates, sigmas)
        local_training: LocalTraining = functools.partial(local_round, held_by_users, general)
        if self.dp:
            local_training = LocalDP(local_training, n_users, self.accountant)
        run_federation(list(general.parameters()), schedule, local_training, server, ns)
        self.general_, self.privates_ = general, held_by_users.privates
        self.gates_ = held_by_users.gates
        self._set_privacy(local_training, sigmas)
        self.participation_ = counts
        self.messages_ = held_by_users.messages
        self.n_features_in_ = len(self.schema)
        return self

    def _set_privacy(self, local_training: LocalTraining, sigmas: np.ndarray) -> None:
        n_users = len(sigmas)
        self.client_events_: list[list[DPEvent]] = [[] for _ in range(n_users)]
        eps = np.full(n_users, math.inf)
        if isinstance(local_training, LocalDP):
            self.client_events_ = local_training.client_events()
            eps = local_training.client_epsilons(self.target_delta, idle=math.inf)
        self.client_epsilons_ = eps
        self.epsilon_ = float(eps.max())
        noisy = self.dp and bool(np.any(sigmas > 0))
        self.privacy_guarantee_ = (
            "none" if not noisy else "dp" if self.algorithm == 2 else "paper accounting"
        )
        if self.privacy_guarantee_ == "paper accounting":
            warnings.warn(
                f"DomainExpertsFL Algorithm 1: ε = {self.epsilon_:.3g} is the paper's accounting, "
                "not a DP guarantee: the gradient sent depends on the gate and the private expert, "
                "trained on all of the user's rows without noise (use algorithm=2 for DP)",
                PaperAccountingWarning,
                stacklevel=3,
            )
        self.delta_ = float(self.target_delta) if noisy else 0.0
        self.noise_multiplier_ = sigmas

    # ---- prediction -----------------------------------------------------------------------
    def _check_user(self, user: int) -> None:
        check_is_fitted(self, "general_")
        if not 0 <= user < len(self.privates_):
            raise DataValidationError(f"unknown user {user}; there are {len(self.privates_)}")

    def gate(self, X: pd.DataFrame, *, user: int) -> np.ndarray:
        """α_user(x), the weight of the general model, shape (n_samples,)."""
        self._check_user(user)
        with torch.no_grad():
            return torch.sigmoid(self.gates_[user](self.encode(X))[:, 0]).numpy().astype(float)

    def _mixture(self, X: pd.DataFrame, user: int) -> Tensor:
        self._check_user(user)
        Z = self.encode(X)
        with torch.no_grad():
            alpha = torch.sigmoid(self.gates_[user](Z)[:, 0])
            return mixture_output(self.general_(Z), self.privates_[user](Z), alpha, self.task)

    def predict_proba(self, X: pd.DataFrame, *, user: int) -> np.ndarray:
        """Eq. 3 class probabilities at ``user``, shape (n_samples, n_classes)."""
        if self.task != "classification":
            raise ValueError("predict_proba needs task='classification'")
        return self._mixture(X, user).numpy().astype(np.float64)

    def predict(self, X: pd.DataFrame, *, user: int) -> np.ndarray:
        """Eq. 3 prediction at ``user``: labels or values, shape (n_samples,)."""
        out = self._mixture(X, user)
        if self.task == "classification":
            return np.asarray(self.classes_[out.argmax(dim=1).numpy()])
        return out.numpy().astype(np.float64)

    def predict_general(self, X: pd.DataFrame) -> np.ndarray:
        """Prediction of the general model M_G alone (the DP-FL model), shape (n_samples,)."""
        check_is_fitted(self, "general_")
        with torch.no_grad():
            out = self.general_(self.encode(X))
        if self.task == "classification":
            return np.asarray(self.classes_[out.argmax(dim=1).numpy()])
        return out[:, 0].numpy().astype(np.float64)
