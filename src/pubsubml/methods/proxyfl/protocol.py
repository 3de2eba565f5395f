"""ProxyFL: a private model and a DP proxy per client, mutual learning, proxies shared by PushSum.

A round of Algorithm 1 (proxyfl.txt §3) is one local epoch of deep mutual learning for every
client (:mod:`pubsubml.methods.proxyfl.local`: the private model without DP, the proxy with DP-SGD)
followed by one round of communication (PushSum over the directed exponential graph,
:mod:`pubsubml.methods.proxyfl.pushsum`).  Before each round every client checks with its accountant that
the round keeps it within its declared ε budget, and drops out (stops training and sharing its
proxy) otherwise (§3.3).

:func:`run_rounds` is the algorithm; a :class:`Communicator` is the transport.  The in-process
simulation runs all clients in one cohort with :class:`~pubsubml.methods.proxyfl.pushsum.SimulatedPushSum`;
a real peer runs a cohort of one client with the gloo transport of
:mod:`pubsubml.methods.proxyfl.peers`.  The same code therefore runs in both modes; the baselines of
§4.1 (:mod:`pubsubml.methods.proxyfl.baselines`) run it with other communicators, the
server-averaged ones (FedAvg, FML) with a server that aggregates through a
:class:`~pubsubml.methods.federated.loop.Strategy` of the federated loop.

The rounds run on the loop every federated method shares
(:func:`~pubsubml.methods.federated.loop.run_loop`); what ProxyFL gives it is its own federation:
before every round each client decides from its own accountant whether it still takes part (in
the multi-process mode through a membership all-reduce), clients keep their own models and
optimizer state across rounds, and most methods have no server at all (PushSum, CWT, Regular).

References
----------
proxyfl.txt §3 (Algorithm 1, Eq. 2–8), §3.3 (per-client accounting and drop-out), §3.4 and §4.1.
"""

from __future__ import annotations

import logging
import warnings
from abc import ABCMeta, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted
from torch import Tensor

from pubsubml.errors import PaperAccountingWarning
from pubsubml.methods.federated.loop import RoundTiming, run_loop
from pubsubml.methods.proxyfl.local import (
    ClientCohort,
    DMLConfig,
    PrivateFactory,
    mlp_factory,
)
from pubsubml.methods.proxyfl.pushsum import SimulatedPushSum
from pubsubml.privacy.accountants import compute_epsilon

__all__ = [
    "WEAK_EPSILON",
    "ClientCohort",
    "Communicator",
    "DMLConfig",
    "ProxyFL",
    "ProxyMethod",
    "RoundRecord",
    "WeakPrivacyWarning",
    "run_rounds",
    "warn_if_weak",
]

logger = logging.getLogger(__name__)

#: ε above which a configuration is reported as a weak guarantee (WeakPrivacyWarning).
WEAK_EPSILON = 10.0


class WeakPrivacyWarning(UserWarning):
    """The configuration shares proxies with no DP, or with an ε above :data:`WEAK_EPSILON`."""


class Communicator(Protocol):
    """How proxies travel after local training (PushSum, a server, a ring, nothing).

    ``membership`` maps the local clients' willingness (S,) to the global participation (K,);
    ``exchange`` takes the local proxies (S, d) and push weights (S,) and returns their new values.
    ``bytes_sent`` counts what left the local clients (the proxies' messages only).
    """

    bytes_sent: int

    def membership(self, client_ids: Sequence[int], willing: Tensor) -> Tensor: ...

    def exchange(
        self,
        round_: int,
        client_ids: Sequence[int],
        theta: Tensor,
        weights: Tensor,
        participants: Sequence[int],
    ) -> tuple[Tensor, Tensor]: ...


@dataclass
class RoundRecord:
    """What one round did: per local client DP steps so far, participation, communication cost.

    ε is computed on demand from the accountants (:meth:`ClientCohort.epsilon`), not every round.
    """

    round: int
    dp_steps: list[int]
    active: list[bool]
    bytes_sent: int
    comm_seconds: float
    train_seconds: float
    extra: dict[str, Any] = field(default_factory=dict)


class _PeerFederation:
    """ProxyFL's side of the shared round loop: budget drop-out, local DML, the communicator."""

    def __init__(self, cohort: ClientCohort, communicator: Communicator) -> None:
        self.cohort = cohort
        self.communicator = communicator
        self.bytes_before = 0

    def select(self, round_: int) -> Sequence[int]:
        """Clients that are still within their budget, agreed on through the communicator."""
        cohort = self.cohort
        willing = cohort.willing()
        for s, k in enumerate(cohort.client_ids):
            if bool(cohort.active[s]) and not bool(willing[s]):
                logger.info(
                    "client %d reached its privacy budget: it stops sharing (round %d)", k, round_
                )
        active = self.communicator.membership(cohort.client_ids, willing)
        cohort.active = active[cohort.client_ids].clone()
        return [int(k) for k in active.nonzero().flatten().tolist()]

    def train(self, round_: int, participants: Sequence[int]) -> None:
        """One local epoch of DML at every active local client; the cohort accounts its steps."""
        self.cohort.train_round()

    def communicate(self, round_: int, participants: Sequence[int]) -> None:
        """The communicator's exchange of the proxies (PushSum, a server, a ring, nothing)."""
        cohort = self.cohort
        self.bytes_before = self.communicator.bytes_sent
        theta, w = self.communicator.exchange(
            round_, cohort.client_ids, cohort.flat_proxies(), cohort.push_weights, participants
        )
        cohort.load_proxies(theta)
        cohort.push_weights = w


def run_rounds(
    cohort: ClientCohort,
    communicator: Communicator,
    rounds: int,
    callback: Callable[[int, ClientCohort], None] | None = None,
) -> list[RoundRecord]:
    """Algorithm 1 on the shared round loop (:func:`~pubsubml.methods.federated.loop.run_loop`):
    ``rounds`` times, budget drop-out (§3.3), local DML, then communication.

    Returns
    -------
    list of RoundRecord, one per round.
    """
    federation = _PeerFederation(cohort, communicator)
    history: list[RoundRecord] = []

    def record(timing: RoundTiming) -> None:
        history.append(
            RoundRecord(
                round=timing.round,
                comm_seconds=timing.comm_seconds,
                train_seconds=timing.train_seconds,
                dp_steps=cohort.dp_steps(),
                active=[bool(a) for a in cohort.active],
                bytes_sent=communicator.bytes_sent - federation.bytes_before,
            )
        )
        if callback is not None:
            callback(timing.round, cohort)

    run_loop(federation, rounds, record)
    return history


def warn_if_weak(cohort: ClientCohort, rounds: int) -> None:
    """Warn (WeakPrivacyWarning + a log line) when the planned run implies a weak guarantee."""
    cfg = cohort.config
    if not cfg.dp:
        msg = "proxies are shared without DP-SGD (dp=False): no privacy guarantee at all"
    else:
        worst = max(
            min(
                compute_epsilon(
                    [cohort.round_event(s).model_copy(update={"count": cohort.steps[s] * rounds})],
                    cfg.delta,
                ),
                cfg.budget_of(k),
            )
            for s, k in enumerate(cohort.client_ids)
        )
        if worst <= WEAK_EPSILON:
            return
        msg = (
            f"this configuration allows ε up to {worst:.1f} at δ={cfg.delta:g} per client "
            f"(> {WEAK_EPSILON:g}): a weak guarantee; raise noise_multiplier, run fewer rounds or "
            "set epsilon_budget"
        )
    logger.warning(msg)
    warnings.warn(msg, WeakPrivacyWarning, stacklevel=3)


class ProxyMethod(BaseEstimator, metaclass=ABCMeta):  # type: ignore[misc]
    """Base of ProxyFL and its baselines: per-client DP proxies, optional private models.

    Subclasses choose whether clients keep a private model (:attr:`uses_private`) and how proxies
    travel (:meth:`_communicator`).  See :class:`ProxyFL` for the parameters and attributes.
    """

    uses_private: ClassVar[bool] = True

    def __init__(
        self,
        *,
        n_classes: int,
        rounds: int = 20,
        proxy_hidden: tuple[int, ...] = (200, 200),
        private_model: PrivateFactory | Sequence[PrivateFactory] | None = None,
        config: DMLConfig | None = None,
        seed: int = 0,
    ) -> None:
        self.n_classes = n_classes
        self.rounds = rounds
        self.proxy_hidden = proxy_hidden
        self.private_model = private_model
        self.config = config
        self.seed = seed

    @abstractmethod
    def _communicator(self, cohort: ClientCohort) -> Communicator:
        """The in-process transport over all of ``cohort``'s clients (each concrete method's)."""

    @property
    def default_model(self) -> Literal["private", "proxy"]:
        """The model a client uses for inference: its private model if it has one."""
        return "private" if self.uses_private else "proxy"

    def _factories(self, n: int) -> list[PrivateFactory] | None:
        if not self.uses_private:
            return None
        spec = self.private_model
        if spec is None:
            return [mlp_factory(self.proxy_hidden)] * n
        if callable(spec):
            return [spec] * n
        if len(spec) != n:
            raise ValueError(f"{len(spec)} private model factories for {n} clients")
        return list(spec)

    def _make_cohort(self, clients: Sequence[tuple[Any, Any]], ids: list[int]) -> ClientCohort:
        if isinstance(self.rounds, bool) or not isinstance(self.rounds, int) or self.rounds < 1:
            raise ValueError(f"rounds must be a positive integer, got {self.rounds!r}")
        data = [
            (
                torch.as_tensor(np.asarray(X, dtype=np.float32)),
                torch.as_tensor(np.asarray(y, dtype=np.int64)),
            )
            for X, y in clients
        ]
        return ClientCohort(
            client_ids=ids,
            data=data,
            n_classes=self.n_classes,
            proxy_hidden=self.proxy_hidden,
            private_factories=self._factories(len(data)),
            config=self.config if self.config is not None else DMLConfig(),
            seed=self.seed,
        )

    def fit(
        self,
        clients: Sequence[tuple[Any, Any]],
        *,
        client_ids: Sequence[int] | None = None,
        communicator: Communicator | None = None,
        callback: Callable[[int, ClientCohort], None] | None = None,
    ) -> ProxyMethod:
        """Run the rounds.

        Parameters
        ----------
        clients : sequence of (array-like of shape (n_k, d), array-like of shape (n_k,))
            The private data of the clients held here.
        client_ids : sequence of int, optional
            Their global ids (default ``0..len(clients)-1``, the whole federation in-process).
        communicator : Communicator, optional
            Defaults to the method's in-process transport over ``len(clients)`` clients.
        callback : callable, optional
            ``callback(round, cohort)`` after every round (evaluation).

        Returns
        -------
        self

        Raises
        ------
        DataValidationError, InvalidPrivacyParameterError
            On bad data or privacy parameters; nothing is trained.
        """
        ids = list(range(len(clients))) if client_ids is None else [int(k) for k in client_ids]
        cohort = self._make_cohort(clients, ids)
        comm = communicator if communicator is not None else self._communicator(cohort)
        warn_if_weak(cohort, self.rounds)
        self.privacy_guarantee_ = cohort.privacy_guarantee
        if self.privacy_guarantee_ == "paper accounting":
            warnings.warn(
                f"{type(self).__name__} with beta = {cohort.config.beta:g} > 0: the proxies' ε is "
                "the paper's accounting, not a DP guarantee (the proxy's loss uses the private "
                "model, trained on the same rows without noise); set DMLConfig(beta=0) for DP",
                PaperAccountingWarning,
                stacklevel=2,
            )
        self.cohort_ = cohort
        self.history_ = run_rounds(cohort, comm, self.rounds, callback)
        self.epsilons_ = [cohort.epsilon(s) for s in range(len(ids))]
        return self

    def predict_proba(
        self, X: Any, *, client: int = 0, model: Literal["private", "proxy"] | None = None
    ) -> np.ndarray:
        """Probabilities (n, n_classes) of a local client's model (default :attr:`default_model`)."""
        check_is_fitted(self, "cohort_")
        X_t = torch.as_tensor(np.asarray(X, dtype=np.float32))
        return self.cohort_.predict_proba(client, X_t, model or self.default_model).numpy()

    def predict(
        self, X: Any, *, client: int = 0, model: Literal["private", "proxy"] | None = None
    ) -> np.ndarray:
        """Predicted labels (n,) of a local client's model."""
        return self.predict_proba(X, client=client, model=model).argmax(1)


class ProxyFL(ProxyMethod):
    """ProxyFL (proxyfl.txt Algorithm 1) over in-process clients, or one client of a peer group.

    Parameters
    ----------
    n_classes : int
        Public number of classes.
    rounds : int, default=20
    proxy_hidden : tuple of int, default=(200, 200)
        Hidden sizes of the common proxy MLP (the paper's MNIST proxy is 784-200-200-10).
    private_model : callable or sequence of callable, optional
        ``factory(n_features, n_classes) -> nn.Module``, one for all clients or one per client
        (heterogeneous architectures).  Defaults to an MLP like the proxy.
    config : DMLConfig, optional
        Local training and privacy settings (defaults: §4.1, δ = 1e-5, no budget).
    push_share : float, default=0.5
        Fraction of its PushSum mass a client sends each round (``P_{out,k}``).
    seed : int, default=0

    Attributes
    ----------
    cohort_ : ClientCohort
        Models, accountants and push weights of the clients.
    history_ : list of RoundRecord
    epsilons_ : list of float
        Each client's final ε at ``config.delta``, from the DP-SGD steps it ran.
    privacy_guarantee_ : {"dp", "paper accounting", "none"}
        What ``epsilons_`` cover: with β > 0 (the paper's 0.5) the proxy's loss uses the private
        model, trained on the same rows without noise, so they are the paper's accounting, not
        a DP guarantee; ``DMLConfig(beta=0)`` makes them one.

    Warns
    -----
    PaperAccountingWarning
        With β > 0 and private models (see ``privacy_guarantee_``).
    WeakPrivacyWarning
        When the planned rounds allow ε > :data:`WEAK_EPSILON` (or ``dp=False``).

    Notes
    -----
    The method's authors report ProxyFL as patented: check your rights before commercial use.

    Examples
    --------
    >>> g = torch.Generator().manual_seed(0)
    >>> clients = [(torch.rand(60, 4, generator=g), torch.randint(0, 2, (60,), generator=g)) for _ in range(3)]
    >>> cfg = DMLConfig(batch_size=20, delta=1e-3)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", WeakPrivacyWarning)
    ...     m = ProxyFL(n_classes=2, rounds=2, proxy_hidden=(8,), config=cfg).fit(clients)
    >>> len(m.history_), m.predict_proba(clients[0][0], client=1).shape
    (2, (60, 2))
    """

    def __init__(
        self,
        *,
        n_classes: int,
        rounds: int = 20,
        proxy_hidden: tuple[int, ...] = (200, 200),
        private_model: PrivateFactory | Sequence[PrivateFactory] | None = None,
        config: DMLConfig | None = None,
        push_share: float = 0.5,
        seed: int = 0,
    ) -> None:
        super().__init__(
            n_classes=n_classes,
            rounds=rounds,
            proxy_hidden=proxy_hidden,
            private_model=private_model,
            config=config,
            seed=seed,
        )
        self.push_share = push_share

    def _communicator(self, cohort: ClientCohort) -> Communicator:
        return SimulatedPushSum(len(cohort.client_ids), share=self.push_share)
