"""A participating site: its public schema, its privacy ledger, its signing key, its subscriptions.

A :class:`Site` is the publisher and/or subscriber of pubsub-ml.txt §3.2 (Algorithm 1).  It talks
to a :class:`~pubsubml.hub.Hub` only, so the same code publishes to an in-process
:class:`~pubsubml.hub.LocalHub` and to the HTTP registry.

Publishing follows DESIGN.md, "Privacy is accounted, never assumed": the artifact is exported
locally, the estimator's DP events are charged to the site's :class:`PrivacyLedger` as one
:class:`Release` (refused, with nothing published, if the budget would be exceeded), and only
then does the artifact leave the site.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from pubsubml.artifacts import (
    Artifact,
    PublishedModel,
    export_model,
    generate_signing_key,
    key_id,
)
from pubsubml.errors import (
    DuplicateReleaseError,
    NotFoundError,
    PrivacyError,
    SeededNoiseWarning,
)
from pubsubml.hub import FeedItem, Hub
from pubsubml.privacy.ledger import PrivacyLedger, Release
from pubsubml.schema import Channel, FeatureSchema

__all__ = ["Site"]


class Site:
    """One institution of the consortium (pubsub-ml.txt §3.2).

    Parameters
    ----------
    name : str
        The site's name, used as publisher in model cards.
    schema : FeatureSchema
        The public schema of the site's features.
    ledger : PrivacyLedger
        The site's (ε, δ) budget; every publication is charged to it.
    signing_key : Ed25519PrivateKey, optional
        Signs the site's model cards (generated when absent).
    trusted_keys : mapping of key id to Ed25519PublicKey, optional
        Publishers whose models :meth:`pull` accepts (see :meth:`trust`).

    Attributes
    ----------
    cursors : dict of str to int
        The last feed position read per subscription.
    published : list of str
        Ids of the models this site published, in order.

    Examples
    --------
    >>> from pubsubml.hub import LocalHub
    >>> site = Site("h1", FeatureSchema.numeric(["age"]),
    ...             PrivacyLedger(site="h1", epsilon_budget=1.0, delta=1e-5))
    >>> sub = site.subscribe(LocalHub(), "age", task="classification")
    >>> site.cursors[sub]
    0
    """

    def __init__(
        self,
        name: str,
        schema: FeatureSchema,
        ledger: PrivacyLedger,
        *,
        signing_key: Ed25519PrivateKey | None = None,
        trusted_keys: Mapping[str, Ed25519PublicKey] | None = None,
    ) -> None:
        if not isinstance(schema, FeatureSchema):
            raise TypeError(f"schema must be a FeatureSchema, got {type(schema).__name__}")
        if not isinstance(ledger, PrivacyLedger):
            raise TypeError(f"ledger must be a PrivacyLedger, got {type(ledger).__name__}")
        self.name = name
        self.schema = schema
        self.ledger = ledger
        self.signing_key = signing_key if signing_key is not None else generate_signing_key()
        self.trusted_keys: dict[str, Ed25519PublicKey] = dict(trusted_keys or {})
        self.cursors: dict[str, int] = {}
        self.published: list[str] = []

    @property
    def public_key(self) -> Ed25519PublicKey:
        """The public half of the signing key, to hand to subscribers."""
        return self.signing_key.public_key()

    def trust(self, *keys: Ed25519PublicKey) -> None:
        """Accept models signed by ``keys`` in :meth:`pull`."""
        for key in keys:
            self.trusted_keys[key_id(key)] = key

    # ---- publishing ---------------------------------------------------------------------
    def register_scopes(self, labels: Sequence[str], hub: Hub | None = None) -> list[str]:
        """Declare disjoint data chunks that publications may name as their ``scope``.

        Registers them in the site's ledger (:meth:`PrivacyLedger.register_scopes`) and, when
        ``hub`` keeps ledgers too (the registry client), there as well.  Returns the labels new
        to the local ledger.
        """
        new = self.ledger.register_scopes(labels)
        remote = getattr(hub, "register_scopes", None)
        if callable(remote):
            remote(self.name, list(labels))
        return new

    def publish(
        self,
        estimator: Any,
        hub: Hub,
        *,
        scope: Sequence[str] | None = None,
        release_id: str | None = None,
        format: Literal["auto", "onnx", "safetensors"] = "auto",
        persist: Callable[[PrivacyLedger], None] | None = None,
    ) -> str:
        """Charge the estimator's DP events to the ledger, then publish it (Algorithm 1, line 2).

        Parameters
        ----------
        estimator : fitted DP estimator
            With ``privacy_events_`` (and ``epsilon_``, ``delta_``), e.g. a ``DPMLPClassifier``.
        hub : Hub
        scope : sequence of str, optional
            The disjoint data chunks the model was trained on (``None``: the whole data set),
            registered beforehand with :meth:`register_scopes`.  Releases on disjoint scopes
            compose in parallel (pubsub-ml.txt §6.2, Theorems 5–6).
        release_id : str, optional
            Ledger id of the release (default: the model id).
        format : {"auto", "onnx", "safetensors"}
        persist : callable, optional
            ``persist(ledger)`` saves the charged ledger (e.g. :meth:`LedgerFile.save
            <pubsubml.privacy.ledger_file.LedgerFile.save>`); it runs after the charge and before
            the model leaves the site, so a crash never leaves a release the saved ledger lacks.
            If it raises, nothing leaves the site.

        Returns
        -------
        str
            The model id.

        Raises
        ------
        PrivacyError
            The estimator recorded no DP events (a non-private model is never published).
        PrivacyBudgetExceededError
            The release would exceed the site's budget: nothing is charged, nothing published.
        DuplicateReleaseError
            ``release_id`` is already charged for a different model, events or scope.

        Warns
        -----
        SeededNoiseWarning
            The estimator's DP noise was seeded (``noise_seed``, a simulation): its card says so
            and a registry refuses it unless started for research.

        Notes
        -----
        Publishing the same model again charges nothing more (same release: same model id, DP
        events and scope) and the hub returns the same id.  If the hub fails after the charge, the charge stays: the ledger errs on the
        side of having released.
        """
        artifact = self._charge(estimator, scope, release_id, format, persist)
        model_id = hub.publish(artifact.card, artifact.weights)
        if model_id not in self.published:
            self.published.append(model_id)
        return model_id

    def release_to(
        self,
        estimator: Any,
        directory: str | os.PathLike[str],
        *,
        scope: Sequence[str] | None = None,
        release_id: str | None = None,
        format: Literal["auto", "onnx", "safetensors"] = "auto",
        persist: Callable[[PrivacyLedger], None] | None = None,
    ) -> Artifact:
        """Charge the estimator's DP events to the ledger, then write its artifact to ``directory``.

        The offline form of :meth:`publish` (Algorithm 1, line 2): the signed artifact
        (``card.json`` and its weights, :meth:`~pubsubml.artifacts.Artifact.save`) is what a
        site hands over by other means than a registry.  Charging, refusals and repeated
        releases are as in :meth:`publish` (``persist`` too); nothing is written when the charge
        is refused.

        Returns
        -------
        Artifact
            The artifact written.

        Warns
        -----
        SeededNoiseWarning
            As in :meth:`publish`.
        """
        artifact = self._charge(estimator, scope, release_id, format, persist)
        artifact.save(directory)
        return artifact

    def _charge(
        self,
        estimator: Any,
        scope: Sequence[str] | None,
        release_id: str | None,
        format: Literal["auto", "onnx", "safetensors"],
        persist: Callable[[PrivacyLedger], None] | None = None,
    ) -> Artifact:
        """Export ``estimator``, charge its DP events as one release (and ``persist`` the
        ledger); return the artifact."""
        events = list(getattr(estimator, "privacy_events_", None) or [])
        if not events:
            raise PrivacyError(
                f"site {self.name!r} refuses to publish {type(estimator).__name__}: it recorded no "
                "DP events (train it with DP; non-private models stay at the site)"
            )
        schema = None if getattr(estimator, "schema_", None) is not None else self.schema
        artifact = export_model(
            estimator,
            publisher=self.name,
            signing_key=self.signing_key,
            format=format,
            data_scope=None if scope is None else list(scope),
            schema=schema,
        )
        if artifact.card.privacy.noise != "secure":
            warnings.warn(
                f"site {self.name!r} releases model {artifact.card.model_id} whose DP noise was "
                "seeded: whoever knows the seed can regenerate the noise and subtract it (train "
                "without noise_seed outside simulations)",
                SeededNoiseWarning,
                stacklevel=3,
            )
        rid = release_id or artifact.card.model_id
        release = Release(
            release_id=rid,
            description=f"model {artifact.card.model_id} published by {self.name}",
            events=tuple(events),
            scope=None if scope is None else tuple(scope),
        )
        charged = next((r for r in self.ledger.releases if r.release_id == rid), None)
        if charged is None:
            self.ledger.charge(release)
            if persist is not None:
                persist(self.ledger)
        elif (charged.description, charged.events, charged.scope) != (
            release.description,
            release.events,
            release.scope,
        ):
            raise DuplicateReleaseError(
                f"site {self.name!r}: release id {rid!r} is already charged for another release "
                f"({charged.description}); a different model, DP events or scope is a new "
                "release and needs its own id; nothing was charged or published"
            )
        return artifact

    # ---- subscribing --------------------------------------------------------------------
    def subscribe(
        self,
        hub: Hub,
        channel: Channel | str,
        *,
        task: str = "classification",
        classes: Sequence[Any] | None = None,
    ) -> str:
        """Subscribe to ``channel`` (F1 ∨ … ∨ Fk, e.g. ``"age & sex | wbc"``); returns its id."""
        ch = Channel.parse(channel) if isinstance(channel, str) else channel
        sub_id = hub.subscribe(self.name, ch, task=task, classes=classes)
        self.cursors.setdefault(sub_id, 0)
        return sub_id

    def poll(self, hub: Hub, subscription_id: str, *, timeout: float = 0.0) -> list[FeedItem]:
        """New feed items of a subscription since the last :meth:`pull` (cursor not advanced)."""
        if subscription_id not in self.cursors:
            raise NotFoundError(f"site {self.name!r} has no subscription {subscription_id!r}")
        return hub.poll(subscription_id, after=self.cursors[subscription_id], timeout=timeout)

    def pull(
        self,
        hub: Hub,
        subscription_id: str | None = None,
        *,
        timeout: float = 0.0,
        check_privacy: bool = True,
    ) -> list[PublishedModel]:
        """Fetch, verify and load the models that arrived since the last pull.

        Parameters
        ----------
        hub : Hub
        subscription_id : str, optional
            One subscription, or all of the site's subscriptions (models deduplicated).
        timeout : float, default=0.0
            Long-poll wait for new items, per subscription.
        check_privacy : bool, default=True
            Recompute ε from each card's DP events.

        Returns
        -------
        list of PublishedModel, in feed order
            The input of CUSTOMIZE once
            :func:`~pubsubml.methods.pubsub.subscription.prepare_subscription` (given
            ``trusted_keys=site.trusted_keys``) has kept those of the task, ordered them and
            settled the public schema and classes, as ``pubsubml customize`` does for an inbox.

        Raises
        ------
        SignatureError, DigestMismatchError, UntrustedArtifactError
            A model fails verification; no cursor moves, so nothing is lost.
        NotFoundError
            Unknown subscription.
        """
        subs = list(self.cursors) if subscription_id is None else [subscription_id]
        loaded: dict[str, PublishedModel] = {}
        advanced: dict[str, int] = {}
        for sub in subs:
            items = self.poll(hub, sub, timeout=timeout)
            for item in items:
                if item.model_id not in loaded:
                    card, weights = hub.fetch(item.model_id)
                    loaded[item.model_id] = PublishedModel.load(
                        card, weights, self.trusted_keys, check_privacy=check_privacy
                    )
            if items:
                advanced[sub] = items[-1].cursor
        self.cursors.update(advanced)
        return list(loaded.values())

    def __repr__(self) -> str:
        return (
            f"Site(name={self.name!r}, features={self.schema.names}, "
            f"spent_epsilon={self.ledger.spent_epsilon():.4g}/{self.ledger.epsilon_budget:g})"
        )
