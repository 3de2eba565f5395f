"""The subscriber's inputs to CUSTOMIZE, prepared one way for the library and the command line.

Before Algorithm 2 runs (pubsub-ml.txt §4), a subscriber decides what it fuses and on which terms:
the received models it trusts (every card verified against its trusted keys, §3.2), the models of
its task in one order whatever order they arrived in, the public schema (the consortium's, or the
union of the received cards' schemas: §4 Step 3 extends inputs with its public defaults) and its
label set (the labels in its rows and those the cards declare, all public).
:func:`prepare_subscription` does this for models from :meth:`Site.pull
<pubsubml.sites.Site.pull>` and for the artifacts ``pubsubml customize`` reads from an inbox, so
both configure the same :class:`~pubsubml.methods.pubsub.customizer.Customizer` from the same
inputs and refuse the same bad inputs with the same :class:`SubscriptionError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from pubsubml.artifacts import PublishedModel
from pubsubml.artifacts.signing import key_id, public_key_from_base64, verify_card
from pubsubml.errors import PubsubmlError
from pubsubml.methods.pubsub.customizer import Customizer
from pubsubml.methods.pubsub.outputs import published_runner
from pubsubml.methods.pubsub.task import check_task
from pubsubml.schema import Feature, FeatureSchema

__all__ = [
    "REMEDIES",
    "Subscription",
    "SubscriptionError",
    "check_trusted",
    "prepare_subscription",
    "read_trusted_keys",
]

REMEDIES: dict[str, str] = {
    "no_trusted_keys": "trust the publishers' public keys (trusted_keys=, or Site.trust)",
    "unreadable_key": "",
    "cards_disagree": "pass the consortium's schema (schema=)",
    "undefined_columns": "pass the consortium's schema (schema=)",
    "mixed_labels": "pass the class labels (classes=)",
}
"""What a library caller does about each kind of :class:`SubscriptionError`."""


class SubscriptionError(PubsubmlError, ValueError):
    """The received models, keys and rows do not make an input of CUSTOMIZE; nothing was fitted.

    Parameters
    ----------
    kind : str
        One of :data:`REMEDIES`: ``"no_trusted_keys"``, ``"unreadable_key"``,
        ``"cards_disagree"``, ``"undefined_columns"``, ``"mixed_labels"``.
    problem : str
        What is wrong, the same words for every caller (a command line adds its own remedy).
    """

    def __init__(self, kind: str, problem: str) -> None:
        self.kind = kind
        self.problem = problem
        remedy = REMEDIES[kind]
        super().__init__(f"{problem}: {remedy}" if remedy else problem)


@dataclass(frozen=True)
class Subscription:
    """What :func:`prepare_subscription` found: the inputs of one CUSTOMIZE.

    Attributes
    ----------
    task : {"classification", "regression"}
    models : list of PublishedModel
        The trusted received models of ``task``, ordered by model id.
    skipped : list of PublishedModel
        The received models of the other task, in the order received.
    schema : FeatureSchema
        The public schema: the one given, or the union of the models' card schemas.
    classes : list or None
        The subscriber's label set (classification): the one given, or the labels in ``y`` and
        those the cards declare, sorted.
    target : ndarray
        ``y`` as labels (classification) or floats (regression).
    trusted_keys : dict of str to Ed25519PublicKey
        The keys every model was verified with (what ``save_customizer`` records).
    """

    task: str
    models: list[PublishedModel]
    skipped: list[PublishedModel]
    schema: FeatureSchema
    classes: list[Any] | None
    target: np.ndarray
    trusted_keys: dict[str, Ed25519PublicKey]

    def customizer(self, **params: Any) -> Customizer:
        """The :class:`~pubsubml.methods.pubsub.customizer.Customizer` of this subscription.

        Its models, task, schema, classes and the batched ``published_runner`` come from here;
        ``params`` are the other parameters (``own_model``, ``fusion_model``, ``cv``, ``top_m``,
        ``target_bounds``, ``random_state``, ...).
        """
        return Customizer(
            models=self.models,
            task=self.task,  # type: ignore[arg-type]
            schema=self.schema,
            classes=self.classes,
            runner=published_runner,
            **params,
        )


def read_trusted_keys(paths: Iterable[str | Path]) -> dict[str, Ed25519PublicKey]:
    """Public keys from ``.pub`` files (base64, as ``pubsubml keygen`` writes) or JSON files
    mapping key ids to base64 keys (as ``pubsubml pull`` writes), by key id.

    Raises
    ------
    SubscriptionError
        ``"unreadable_key"``: a file holds no public key.
    """
    keys: dict[str, Ed25519PublicKey] = {}
    for path in map(Path, paths):
        try:
            text = path.read_text().strip()
            if text.startswith("{"):
                found = [public_key_from_base64(str(v)) for v in json.loads(text).values()]
            else:
                found = [public_key_from_base64(text)]
        except (OSError, UnicodeDecodeError, ValueError, AttributeError) as exc:
            raise SubscriptionError(
                "unreadable_key", f"{path} holds no public key: {exc}"
            ) from None
        keys.update({key_id(k): k for k in found})
    return keys


def check_trusted(trusted_keys: Mapping[str, Ed25519PublicKey]) -> None:
    """Refuse to go on without a trusted key: no received model could be verified.

    Raises
    ------
    SubscriptionError
        ``"no_trusted_keys"``.
    """
    if not trusted_keys:
        raise SubscriptionError("no_trusted_keys", "no trusted keys")


def prepare_subscription(
    received: Sequence[PublishedModel],
    X: pd.DataFrame,
    y: Any,
    *,
    trusted_keys: Mapping[str, Ed25519PublicKey],
    task: str = "classification",
    schema: FeatureSchema | None = None,
    classes: Sequence[Any] | None = None,
    schema_name: str = "the given schema",
) -> Subscription:
    """Verify the received models, keep those of ``task``, and settle the schema and classes.

    Parameters
    ----------
    received : sequence of PublishedModel
        What :meth:`Site.pull <pubsubml.sites.Site.pull>` returned, or artifacts opened from
        an inbox.
    X : DataFrame
        The subscriber's rows (its columns need a public definition).
    y : array-like
        The subscriber's labels or targets.
    trusted_keys : mapping of key id to Ed25519PublicKey
        Every model's card is verified against these (``Site.trusted_keys`` for pulled models).
    task : {"classification", "regression"}, default="classification"
    schema : FeatureSchema, optional
        The consortium's public schema (default: the union of the cards' schemas).
    classes : sequence, optional
        The subscriber's public label set (default: the data's labels and the cards').
    schema_name : str, default="the given schema"
        How errors name ``schema``'s source (a command line names its file).

    Returns
    -------
    Subscription

    Raises
    ------
    SubscriptionError
        No trusted keys, cards that define a feature differently, a column of ``X`` without a
        public definition, or labels of mixed types.
    SignatureError
        A card is not signed by a trusted key, or was altered after signing.
    """
    check_task(task)
    check_trusted(trusted_keys)
    for model in received:
        verify_card(model.card, trusted_keys)
    models = sorted((m for m in received if m.task == task), key=lambda m: m.model_id)
    public = _public_schema(schema, models, [str(c) for c in X.columns], schema_name)
    labels = np.asarray(y).reshape(-1)
    return Subscription(
        task=task,
        models=models,
        skipped=[m for m in received if m.task != task],
        schema=public,
        classes=_classes(classes, labels, models) if task == "classification" else None,
        target=labels if task == "classification" else labels.astype(np.float64),
        trusted_keys=dict(trusted_keys),
    )


def _public_schema(
    given: FeatureSchema | None, models: Sequence[PublishedModel], columns: list[str], name: str
) -> FeatureSchema:
    """``given``, else the union of the cards' schemas; every column of the subscriber in it."""
    if given is not None:
        schema, where = given, name
    else:
        features: dict[str, Feature] = {}
        for model in models:
            for feature in model.card.input_schema.features:
                known = features.setdefault(feature.name, feature)
                if known != feature:
                    raise SubscriptionError(
                        "cards_disagree",
                        f"the received cards define feature {feature.name!r} differently",
                    )
        schema, where = (
            FeatureSchema(features=tuple(features.values())),
            "the received models' cards",
        )
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise SubscriptionError(
            "undefined_columns", f"no public definition of columns {missing} in {where}"
        )
    return schema


def _classes(given: Sequence[Any] | None, labels: np.ndarray, models: Sequence[Any]) -> list[Any]:
    """``given``, else the labels in the data and those the cards declare (all public), sorted."""
    if given:
        return list(given)
    found = {v.item() if hasattr(v, "item") else v for v in pd.unique(labels)}
    for model in models:
        found.update(model.card.classes or [])
    try:
        return sorted(found)
    except TypeError:
        raise SubscriptionError(
            "mixed_labels", f"labels of mixed types {sorted(map(str, found))}"
        ) from None
