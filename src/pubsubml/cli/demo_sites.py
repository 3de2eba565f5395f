"""What the demo's sites do over HTTP: register, publish DP models, subscribe and customize.

pubsub-ml.txt Algorithm 3: the publishers train DP-SGD logistic regressions and publish them
(line 2), each subscriber pulls the models its channel matches and runs CUSTOMIZE (line 5), then
scores Own, PubSub-ML and the non-private reference PubSub-ML* on fresh rows
(:mod:`pubsubml.cli.demo`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from pubsubml.artifacts.signing import generate_signing_key, public_key_to_base64
from pubsubml.cli.demo_consortium import PUBLISHERS, SUBSCRIBERS, DemoConfig
from pubsubml.data import Dataset
from pubsubml.errors import SeededNoiseWarning
from pubsubml.learners import DPSGDLogisticRegression
from pubsubml.methods import ContributionReport, Customizer, OwnLearner
from pubsubml.methods.pubsub.own import own_estimator
from pubsubml.privacy import PrivacyLedger, compute_epsilon
from pubsubml.registry.client import RegistryClient
from pubsubml.schema import FeatureSchema
from pubsubml.sites import Site

__all__ = ["AsPublished", "customize_subscriber", "publish_models", "register_sites"]


def register_sites(
    admin: RegistryClient, url: str, schema: FeatureSchema, cfg: DemoConfig
) -> tuple[dict[str, Site], dict[str, RegistryClient]]:
    """The consortium's dictionary, then every site with its key, budget, ledger and token."""
    admin.add_features(schema.features)
    sites: dict[str, Site] = {}
    clients: dict[str, RegistryClient] = {}
    for name in list(PUBLISHERS) + list(SUBSCRIBERS):
        key = generate_signing_key()
        answer = admin.add_site(
            name,
            roles="publisher" if name in PUBLISHERS else "subscriber",
            public_key=public_key_to_base64(key.public_key()),
            epsilon_budget=cfg.epsilon,
            delta_budget=cfg.delta,
        )
        clients[name] = RegistryClient(url, answer["token"])
        own = PUBLISHERS.get(name) or SUBSCRIBERS[name][0]
        ledger = PrivacyLedger(site=name, epsilon_budget=cfg.epsilon, delta=cfg.delta)
        sites[name] = Site(name, schema.subset(own), ledger, signing_key=key)
    trusted = admin.trusted_keys()
    for site in sites.values():
        site.trust(*trusted.values())
    return sites, clients


def publish_models(
    sites: dict[str, Site],
    clients: dict[str, RegistryClient],
    parts: dict[str, Dataset],
    data: Dataset,
    seed: int,
    cfg: DemoConfig,
    console: Console,
    seeded_noise: bool,
) -> list[AsPublished]:
    """Every publisher trains and publishes its DP model; returns the non-DP references.

    With ``seeded_noise`` each learner gets ``noise_seed = seed`` (a simulation) and
    :class:`~pubsubml.errors.SeededNoiseWarning`, expected then, is silenced; the ``noise``
    column is what the card stored by the registry records.
    """
    published = Table(
        title="Publishers (DP-SGD logistic regression on public-bound inputs, Poisson sampling)"
    )
    columns = ("site", "features", "rows", "σ", "steps", "ε PLD", "ε RDP", "δ", "ledger ε", "noise")
    for col in columns:
        published.add_column(
            col, justify="left" if col in ("site", "features", "noise") else "right"
        )
    classes = list(data.classes or ())
    reference_models: list[AsPublished] = []
    for name, features in PUBLISHERS.items():
        site, part = sites[name], parts[name]
        X = part.X[features]
        model = DPSGDLogisticRegression(
            schema=site.schema,
            classes=data.classes,
            epsilon=cfg.epsilon,
            delta=cfg.delta,
            random_state=seed,
            noise_seed=seed if seeded_noise else None,
        )
        with console.status(f"{name}: DP-SGD training"):
            model.fit(X, part.y)
        with warnings.catch_warnings():
            if seeded_noise:
                warnings.simplefilter("ignore", SeededNoiseWarning)
            model_id = site.publish(model, clients[name])
        card = clients[name].get_model(model_id)["card"] or {}
        # PubSub-ML*: a logistic regression of the same inputs without DP, kept in-process as
        # the reference (§8.3.4).
        reference = own_estimator("logistic", "classification", site.schema, features, seed)
        reference_models.append(AsPublished(reference.fit(X, part.y), site.schema, classes))
        eps_rdp = compute_epsilon(model.privacy_events_, cfg.delta, backend="rdp")
        ledger_eps = clients[name].ledger(name)["spent_epsilon"]
        published.add_row(
            name,
            _features_text(features),
            str(len(part)),
            f"{model.noise_multiplier_:.3f}",
            str(model.steps_),
            f"{model.epsilon_:.4f}",
            f"{eps_rdp:.4f}",
            f"{model.delta_:g}",
            f"{float(ledger_eps):.4f}",
            str(card.get("privacy", {}).get("noise", "not recorded")),
        )
    console.print(published)
    return reference_models


def customize_subscriber(
    name: str,
    site: Site,
    client: RegistryClient,
    part: Dataset,
    fresh: Dataset,
    data: Dataset,
    references: list[AsPublished],
    seed: int,
    console: Console,
) -> dict[str, float]:
    """One subscriber: subscribe, pull, CUSTOMIZE (Algorithm 3, line 5), score on fresh rows."""
    features, channel = SUBSCRIBERS[name]
    sub_id = site.subscribe(client, channel, task="classification", classes=data.classes)
    models = site.pull(client, sub_id)
    X_tr, y_tr = part.X[features], part.y
    X_te, y_te = fresh.X[features], fresh.y
    own = OwnLearner(schema=site.schema, classes=data.classes, random_state=seed)
    own.fit(X_tr, y_tr)
    custom = Customizer(models=models, schema=site.schema, classes=data.classes, random_state=seed)
    custom.fit(X_tr, y_tr)
    # Opt-in, and not DP: the scores come from the subscriber's private rows (see the docs).
    ContributionReport.from_customizer(custom, name).report(client, disclose=True)
    matching = [
        m
        for m, feats in zip(references, PUBLISHERS.values(), strict=True)
        if _matches(channel, feats)
    ]
    star = Customizer(
        models=matching, schema=site.schema, classes=data.classes, random_state=seed
    ).fit(X_tr, y_tr)
    scores = {
        "Own": float(own.score(X_te, y_te)),
        "PubSub-ML": float(custom.score(X_te, y_te)),
        "PubSub-ML*": float(star.score(X_te, y_te)),
    }
    table = Table(
        title=f"{name}: channel '{channel}', {len(models)} models received; "
        f"accuracy on {len(y_te)} fresh rows"
    )
    table.add_column("method")
    table.add_column("test accuracy", justify="right")
    table.add_column("what it uses")
    table.add_row(
        "Own",
        f"{scores['Own']:.3f}",
        f"own model ({own.choice_}, chosen by 5-fold CV) on {len(X_tr)} rows",
    )
    publisher = {str(m.model_id): m.card.publisher for m in models}
    weights = ", ".join(f"{publisher.get(k, k)} {w:.2f}" for k, w in custom.fusion_weights_.items())
    table.add_row(
        "PubSub-ML",
        f"{scores['PubSub-ML']:.3f}",
        "CUSTOMIZE over own model + DP models (ε = 1 each); "
        + ("fell back to Own" if custom.fallback_ else f"weights: {weights}"),
    )
    table.add_row(
        "PubSub-ML*", f"{scores['PubSub-ML*']:.3f}", "same, publishers without DP (reference)"
    )
    console.print(table)
    return scores


def _features_text(features: list[str]) -> str:
    return f"{features[0]}…{features[-1]}" if len(features) > 3 else ",".join(features)


def _matches(channel: str, features: list[str]) -> bool:
    from pubsubml.schema import Channel

    return Channel.parse(channel).matches(features)


class AsPublished:
    """A non-private local model seen through the same black-box interface as a published one."""

    def __init__(self, model: Any, schema: FeatureSchema, classes: Sequence[Any]) -> None:
        self._model = model
        self.schema = schema
        self.input_features = schema.names
        self.classes = list(classes)
        self.task = "classification"

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        # Features the subscriber lacks take the public defaults, as a published model does.
        proba = np.asarray(self._model.predict_proba(self.schema.extend(X)))
        out = np.zeros((len(X), len(self.classes)))
        out[:, [self.classes.index(c) for c in self._model.classes_]] = proba
        return out

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return np.asarray(self._model.predict(self.schema.extend(X)))
