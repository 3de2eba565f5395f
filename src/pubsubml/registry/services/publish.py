"""The publish path: validate everything, then commit model, ledger entry and feeds at once.

:func:`publish_model` runs the two halves of a publish, in this order and with nothing written
by the first: every check (:func:`~pubsubml.registry.services.publish_checks.prepare_publication`:
card, publisher, weights digest, signature, the weights' safe loader and ε recomputed in a
validation worker, the feature dictionary, a trial charge of the ledger), then the commit
(:mod:`~pubsubml.registry.services.publish_commit`: the weights staged durably in the store, ONE
transaction holding the feed lock that re-checks and inserts the model, its ledger entry, its
event and its deliveries, then the readers' wake-up), alone or in a group with concurrent
publishes (:mod:`~pubsubml.registry.infrastructure.group_commit`).

References
----------
pubsub-ml.txt §3.2 (Algorithm 1: publishers publish (ε^p, δ^p)-DP models; channels) and §6
"Discussion" (registration API, metadata only).
"""

from __future__ import annotations

from collections.abc import Sequence

from pubsubml.artifacts.validation_pool import ValidationPool
from pubsubml.registry.auth import Principal
from pubsubml.registry.infrastructure.artifact_store import ArtifactStorage
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.infrastructure.group_commit import GroupCommitter
from pubsubml.registry.infrastructure.upload_lock import UploadLock
from pubsubml.registry.schemas import ModelPublic
from pubsubml.registry.services.publish_checks import Publication, prepare_publication
from pubsubml.registry.services.publish_commit import (
    commit_publication,
    committed_model,
    stage_weights,
)

__all__ = ["publish_model"]


def publish_model(
    db: Database,
    store: ArtifactStorage,
    principal: Principal,
    card_text: str | bytes,
    weights: bytes,
    *,
    lock: UploadLock,
    validator: ValidationPool,
    visible_to: Sequence[str] | None = None,
    max_weights_bytes: int,
    committer: GroupCommitter[Publication] | None = None,
    allow_seeded_noise: bool = False,
) -> ModelPublic:
    """Validate and publish a model (see the module docstring); idempotent per weights digest.

    ``committer`` (:func:`~pubsubml.registry.services.publish_commit.group_committer`) commits
    it together with the publications of concurrent requests; without one it commits alone.
    Returns the model with ``created`` true when it is new, false when it was already published.
    """
    # Every check reads with single statements (no snapshot is needed: the commit re-checks
    # what may have changed since, see publish_commit._commit_one).
    prepared = db.read_statements(
        lambda session: prepare_publication(
            session,
            principal,
            card_text,
            weights,
            validator=validator,
            visible_to=visible_to,
            max_weights_bytes=max_weights_bytes,
            allow_seeded_noise=allow_seeded_noise,
        )
    )
    if isinstance(prepared, ModelPublic):
        return prepared
    if committer is None:
        return commit_publication(db, store, lock, principal, prepared)
    # The weights are written (and fsynced) here, concurrently with other requests, not by the
    # group's leader while the others wait; the lock is held until the group has committed.
    with lock.shared():
        staged = stage_weights(store, prepared)
        result = committer.commit(prepared, store, staged)
    return committed_model(db, principal, prepared, result)
