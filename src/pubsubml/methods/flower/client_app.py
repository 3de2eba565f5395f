"""A Flower ``ClientApp`` that trains one site's MLP with record-level DP-SGD on our engine.

Flower's own record-level DP story is "put Opacus in your ClientApp"; its example builds a new
privacy engine on every round, so the ε it prints is one round's.  Here a site's accountant
lives in the run's persistent ``context.state`` (kept per node across rounds by Flower), so
the ε a site reports is composed over every round it took part in (pubsub-ml.txt §3.1:
sequential composition), and a round that would take the site past its budget is refused before
any record is read: the site answers with an error and drops out of the round (Flower's
strategies aggregate the other replies).

Each round (``train`` message): the global parameters arrive; the site's rows, from the user's
``load_data(context)``, are extended with the schema's public defaults for the features the site
lacks and encoded by the public bounds (pubsub-ml.txt §8.1.3); DP-SGD runs ``local_epochs``
epochs of Poisson-sampled steps (:func:`~pubsubml.privacy.dpsgd.train_dp_stacked`) with noise
from the secure source (:class:`~pubsubml.privacy.noise.SecureNoise`) unless the config gives a
``noise_seed`` (simulations only); FedProx's ``proximal-mu`` adds μ(w − w_global) to every
step's gradient after the noise (data-independent, no privacy cost).  The reply carries the new
parameters and a ``MetricRecord`` with ``num-examples``, ``epsilon`` (composed, at the site's δ),
``rounds`` and ``unit-weight`` (1: the weight of every site under client-level DP).

At the end of a run the server's ``query.pubsubml_privacy`` message asks every site for its DP
events (for the global model's card); a site given ``publish`` also publishes its last local
model then, with the events of all its rounds (the bridge to the registry).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch
from flwr.app import ArrayRecord, Context, Error, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from pubsubml.errors import DataValidationError, InvalidPrivacyParameterError
from pubsubml.learners.base import check_labels
from pubsubml.learners.dpsgd_base import centred
from pubsubml.methods.flower.model import FlowerMLP, build
from pubsubml.methods.flower.records import (
    PRIVACY_QUERY,
    STATE_KEY,
    events_from_json,
    params_from_record,
    params_to_record,
    state_record,
)
from pubsubml.privacy.accountants import DEFAULT_DELTA, check_delta, check_epsilon, compute_epsilon
from pubsubml.privacy.calibration import calibrate_noise
from pubsubml.privacy.dpsgd import DPSGDConfig, MLPStack, train_dp_stacked
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.noise import NoiseSource, SecureNoise, SeededNoise, check_noise_seed
from pubsubml.schema import FeatureSchema

__all__ = ["ClientConfigError", "DPClientConfig", "dp_client_app"]

#: ``load_data(context)``: the site's own rows and labels (e.g. by ``node_config["partition-id"]``).
LoadData = Callable[[Context], tuple[pd.DataFrame, Any]]
#: ``publish(context, model)``: release the site's last local model, e.g. through ``Site.publish``.
Publish = Callable[[Context, FlowerMLP], object]


class ClientConfigError(DataValidationError):
    """A client configuration that cannot train privately (no public schema, no classes, …)."""


@dataclass(frozen=True, kw_only=True)
class DPClientConfig:
    """What every site of the federation agrees on in public, and its privacy budget.

    Parameters
    ----------
    schema : FeatureSchema
        The consortium's public schema: inputs are encoded by its public bounds, features a site
        lacks take its public defaults.
    classes : sequence
        The public label set (reading it from private labels would leak which occur).
    hidden_layer_sizes : tuple of int, default=(100, 50)
        Must match the server's.
    activation : {"tanh", "relu", "sigmoid"}, default="tanh"
    local_epochs : int, default=1
        DP-SGD epochs per round, ``round(1/q)`` steps each.
    batch_size : int, default=100
        Expected batch; the Poisson sample rate is ``q = batch_size / n``.
    lr : float, default=1e-3
    optimizer : {"adam", "sgd"}, default="adam"
    max_grad_norm : float, default=1.0
        C, the per-sample gradient clip.
    dp : bool, default=True
        Record-level DP-SGD.  ``False`` trains in the clear (for client-level DP added by the
        server, :class:`~pubsubml.methods.flower.server_app.CentralDPConfig`, or a baseline).
    epsilon_budget : float, default=1.0
        The site's total ε over the run: a round that would pass it is refused.
    delta : float, default=DEFAULT_DELTA (1e-5)
    noise_multiplier : float, optional
        σ.  Without it σ is calibrated so that ``planned_rounds`` rounds spend ``epsilon_budget``.
    planned_rounds : int, optional
        Rounds the site expects to take part in (needed when σ is calibrated).
    accountant : {"pld", "rdp"}, default="pld"
    noise_seed : int, optional
        Seeds the DP noise for reproducible simulations; ``None`` (default) draws it from the
        secure source, as any model that may be released must.

    Raises
    ------
    ClientConfigError
        No public schema, no classes, or neither σ nor ``planned_rounds`` with DP.
    InvalidPrivacyParameterError
        A bad budget, δ, σ or C.
    """

    schema: FeatureSchema
    classes: Sequence[Any]
    hidden_layer_sizes: tuple[int, ...] = (100, 50)
    activation: str = "tanh"
    local_epochs: int = 1
    batch_size: int = 100
    lr: float = 1e-3
    optimizer: Literal["adam", "sgd"] = "adam"
    max_grad_norm: float = 1.0
    dp: bool = True
    epsilon_budget: float = 1.0
    delta: float = DEFAULT_DELTA
    noise_multiplier: float | None = None
    planned_rounds: int | None = None
    accountant: Literal["pld", "rdp"] = "pld"
    noise_seed: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.schema, FeatureSchema):
            raise ClientConfigError(
                "a Flower client needs the consortium's public FeatureSchema (schema=...): inputs "
                "are encoded by its public bounds, never by statistics of the site's rows"
            )
        if self.classes is None or isinstance(self.classes, str) or len(self.classes) < 2:
            raise ClientConfigError(
                "a Flower client needs the public label set (classes=[...], at least two): "
                "reading it from the site's labels would leak which labels occur"
            )
        if self.local_epochs < 1 or self.batch_size < 1 or not self.lr > 0:
            raise ClientConfigError("need local_epochs >= 1, batch_size >= 1 and lr > 0")
        check_noise_seed(self.noise_seed)
        if not self.dp:
            return
        check_epsilon(self.epsilon_budget)
        check_delta(self.delta)
        if not (self.max_grad_norm > 0 and math.isfinite(self.max_grad_norm)):
            raise InvalidPrivacyParameterError("max_grad_norm must be a finite number > 0")
        if self.noise_multiplier is not None and not self.noise_multiplier > 0:
            raise InvalidPrivacyParameterError("noise_multiplier must be > 0")
        if self.noise_multiplier is None and not (
            isinstance(self.planned_rounds, int) and self.planned_rounds >= 1
        ):
            raise ClientConfigError(
                "give noise_multiplier, or planned_rounds (>= 1) so that σ is calibrated to "
                "spend epsilon_budget over that many rounds"
            )

    @property
    def layer_sizes(self) -> tuple[int, ...]:
        """Inputs, hidden sizes, outputs."""
        return (self.schema.n_encoded, *self.hidden_layer_sizes, len(self.classes))

    def sgd_config(self, n: int) -> DPSGDConfig:
        """The local DP-SGD configuration of one round on ``n`` rows."""
        base = DPSGDConfig(
            batch_size=self.batch_size,
            epochs=self.local_epochs,
            lr=self.lr,
            optimizer=self.optimizer,
            private=self.dp,
            max_grad_norm=self.max_grad_norm,
            noise_multiplier=0.0,
        )
        if not self.dp:
            return base
        sigma = self.noise_multiplier
        if sigma is None:
            assert self.planned_rounds is not None  # checked in __post_init__
            sigma = _calibrated(
                self.epsilon_budget,
                self.delta,
                base.sample_rate_for(n),
                base.steps_for(n) * self.planned_rounds,
                self.accountant,
            )
        return dataclasses.replace(base, noise_multiplier=float(sigma))


@functools.lru_cache(maxsize=256)
def _calibrated(epsilon: float, delta: float, q: float, steps: int, backend: str) -> float:
    """σ for ``steps`` subsampled-Gaussian steps at rate ``q`` to end at (ε, δ), cached."""
    return float(calibrate_noise(epsilon, delta, q, steps, backend))  # type: ignore[arg-type]


@dataclass
class _SiteData:
    X: torch.Tensor
    y: torch.Tensor
    defaulted: list[str]


def _site_data(config: DPClientConfig, frame: pd.DataFrame, labels: Any) -> _SiteData:
    """Extend and encode the site's rows by the public schema (pubsub-ml.txt §8.1.3)."""
    if not isinstance(frame, pd.DataFrame):
        raise DataValidationError(
            f"load_data must return (DataFrame, labels), got {type(frame).__name__}"
        )
    Z = config.schema.encode(frame, missing="default", extra="ignore")
    _, codes = check_labels(labels, list(config.classes), len(Z))
    defaulted = [n for n in config.schema.names if n not in frame.columns]
    return _SiteData(centred(Z), torch.from_numpy(codes), defaulted)


def _stored(context: Context) -> tuple[list[DPEvent], int]:
    if STATE_KEY not in context.state:
        return [], 0
    record = context.state[STATE_KEY]
    return events_from_json(str(record["events"])), int(record["rounds"])  # type: ignore[arg-type]


def _noise(config: DPClientConfig, context: Context, round_: int) -> NoiseSource:
    if config.noise_seed is None:
        return SecureNoise()
    site = int(context.node_config.get("partition-id", context.node_id))  # type: ignore[arg-type]
    seed = np.random.SeedSequence([config.noise_seed, site, round_]).generate_state(1)[0]
    return SeededNoise(torch.Generator().manual_seed(int(seed)))


def _proximal(mu: float, center: torch.Tensor) -> Callable[[torch.Tensor, torch.Tensor], None]:
    def term(params: torch.Tensor, grad: torch.Tensor) -> None:
        grad.add_(params - center, alpha=mu)

    return term


def train_round(
    config: DPClientConfig,
    data: _SiteData,
    params: Sequence[np.ndarray],
    *,
    mu: float,
    noise: NoiseSource,
    generator: torch.Generator,
) -> tuple[list[np.ndarray], list[DPEvent]]:
    """One round of local training from the global ``params``: the new parameters and events."""
    tensors = [torch.from_numpy(np.array(p, dtype=np.float32)) for p in params]
    stack = MLPStack(
        [tensors[i].unsqueeze(0) for i in range(0, len(tensors), 2)],
        [tensors[i].unsqueeze(0) for i in range(1, len(tensors), 2)],
        config.activation,
    )
    hook = _proximal(mu, stack.flat[:1].clone()) if mu > 0 else None
    (result,) = train_dp_stacked(
        stack,
        [data.X],
        [data.y],
        configs=[config.sgd_config(len(data.X))],
        generators=[generator],
        loss="cross_entropy",
        grad_hook=hook,
        noise=[noise] if config.dp else None,
    )
    return [p[0].detach().numpy().copy() for p in stack.parameters()], list(result.events)


def dp_client_app(
    config: DPClientConfig, load_data: LoadData, *, publish: Publish | None = None
) -> ClientApp:
    """A Flower ``ClientApp`` training one site with record-level DP-SGD, ε composed over rounds.

    Parameters
    ----------
    config : DPClientConfig
        Validated when built: a config without a public schema or classes is refused here,
        before any training.
    load_data : callable
        ``load_data(context) -> (DataFrame, labels)``: the site's rows (columns may be a subset
        of the schema's).
    publish : callable, optional
        ``publish(context, model)`` at the end of the run, when the server asks: releases the
        site's last local model (a :class:`FlowerMLP` with the events of all its rounds), e.g.
        ``lambda ctx, m: site.publish(m, hub)``.

    Returns
    -------
    flwr.clientapp.ClientApp

    Raises
    ------
    ClientConfigError
        ``config`` is not a :class:`DPClientConfig`.
    """
    if not isinstance(config, DPClientConfig):
        raise ClientConfigError(
            f"config must be a DPClientConfig (public schema and classes), got "
            f"{type(config).__name__}"
        )
    app = ClientApp()
    cache: dict[int, _SiteData] = {}

    def data_of(context: Context) -> _SiteData:
        if context.node_id not in cache:
            cache[context.node_id] = _site_data(config, *load_data(context))
        return cache[context.node_id]

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        data = data_of(context)
        events, rounds = _stored(context)
        reason = _budget_refusal(config, len(data.X), events)
        if reason is not None:
            return Message(Error(code=0, reason=reason), reply_to=msg)
        round_ = int(msg.content["config"].get("server-round", rounds + 1))  # type: ignore[arg-type]
        mu = float(msg.content["config"].get("proximal-mu", 0.0))  # type: ignore[arg-type]
        generator = torch.Generator().manual_seed(int(config.noise_seed or 0) + round_)
        params, new = train_round(
            config,
            data,
            params_from_record(msg.content["arrays"]),  # type: ignore[arg-type]
            mu=mu,
            noise=_noise(config, context, round_),
            generator=generator,
        )
        events = [*events, *new]
        context.state[STATE_KEY] = state_record(events, rounds + 1, len(data.X))
        context.state[STATE_KEY + "-model"] = params_to_record(params)
        metrics = _train_metrics(config, len(data.X), events, rounds + 1)
        return Message(
            RecordDict({"arrays": params_to_record(params), "metrics": metrics}), reply_to=msg
        )

    @app.query(PRIVACY_QUERY.split(".", 1)[1])
    def privacy(msg: Message, context: Context) -> Message:
        data = data_of(context)
        events, rounds = _stored(context)
        reply = state_record(events, rounds, len(data.X))
        reply["partition-id"] = int(context.node_config.get("partition-id", -1))  # type: ignore[arg-type]
        reply["noise"] = "seeded" if config.noise_seed is not None else "secure"
        reply["defaulted"] = list(data.defaulted)
        if publish is not None and rounds > 0 and events:
            model = _last_local_model(config, context, data, events)
            reply["published"] = str(publish(context, model))
        return Message(RecordDict({"privacy": reply}), reply_to=msg)

    return app


def _budget_refusal(config: DPClientConfig, n: int, events: list[DPEvent]) -> str | None:
    """Why the site refuses another round (its ε would pass its budget), or ``None``."""
    sgd = config.sgd_config(n)
    if not config.dp:
        return None
    check_delta(config.delta, n)
    planned = DPEvent(
        mechanism="subsampled_gaussian",
        noise_multiplier=sgd.noise_multiplier,
        sample_rate=sgd.sample_rate_for(n),
        count=sgd.steps_for(n),
    )
    after = compute_epsilon([*events, planned], config.delta, backend=config.accountant)
    if after > config.epsilon_budget * (1 + 1e-9):
        return (
            f"over budget: another round would take ε to {after:.4g} > "
            f"{config.epsilon_budget:g} (δ = {config.delta:g}); the site drops out"
        )
    return None


def _train_metrics(
    config: DPClientConfig, n: int, events: list[DPEvent], rounds: int
) -> MetricRecord:
    """What a site reports with its update: its rows, its ε over all rounds so far."""
    epsilon = compute_epsilon(events, config.delta, backend=config.accountant) if events else 0.0
    return MetricRecord(
        {
            "num-examples": n,
            "unit-weight": 1,  # client-level DP averages the sites with equal weights
            "epsilon": float(epsilon),
            "rounds": rounds,
        }
    )


def _last_local_model(
    config: DPClientConfig, context: Context, data: _SiteData, events: list[DPEvent]
) -> FlowerMLP:
    """The site's last local model with the events of all its rounds."""
    model_record = context.state[STATE_KEY + "-model"]
    assert isinstance(model_record, ArrayRecord)
    return build(
        schema=config.schema,
        classes=config.classes,
        layer_sizes=config.layer_sizes,
        activation=config.activation,
        params=params_from_record(model_record),
        events=events,
        delta=config.delta,
        accountant=config.accountant,
        noise="seeded" if config.noise_seed is not None else "secure",
        defaulted_features=data.defaulted,
    )
