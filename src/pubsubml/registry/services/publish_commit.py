"""The commit of the publish path: model, ledger entry and feeds in one transaction.

:func:`commit_publication` (:func:`commit_group` for several at once: group commit, one
transaction, one database fsync and one statement per table for concurrent publishes, see
:mod:`~pubsubml.registry.infrastructure.group_commit`), holding the upload lock shared
(:mod:`pubsubml.registry.infrastructure.upload_lock`), writes the weights to a temporary file,
fsyncs it, renames it into the store under a fresh key (fsync of the directory), and in ONE
transaction holding the feed lock re-checks idempotency and the ledger, inserts the model, its
ledger entry, the ``model.published`` event and one delivery per matching subscription, and
commits.  The file is invisible until that commit; if anything fails, the transaction is rolled
back and the file removed (or collected at the next start).  The publications come checked from
:func:`~pubsubml.registry.services.publish_checks.prepare_publication`.

References
----------
pubsub-ml.txt §3.2 (Algorithm 1: publishers publish (ε^p, δ^p)-DP models; channels).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import bindparam, insert, or_, select
from sqlalchemy.orm import Session

from pubsubml.errors import ConflictError
from pubsubml.registry.auth import Principal
from pubsubml.registry.infrastructure.artifact_store import ArtifactStorage, StagedArtifact
from pubsubml.registry.infrastructure.bulk_insert import insert_rows
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.infrastructure.group_commit import GroupCommitter
from pubsubml.registry.infrastructure.upload_lock import UploadLock
from pubsubml.registry.schemas import ModelPublic
from pubsubml.registry.services.feed_writer import FeedWriter, event_values
from pubsubml.registry.services.ledger import charge, count_releases, ledger_row, release_counts
from pubsubml.registry.services.model_reads import get_model, model_public
from pubsubml.registry.services.publish_checks import Publication
from pubsubml.registry.services.subscription_match import SubscriptionMatch
from pubsubml.registry.tables import (
    LedgerEntryRow,
    ModelFeatureRow,
    ModelRow,
    ModelVisibilityRow,
    SiteRow,
    SubscriptionRow,
    utcnow,
)

__all__ = [
    "commit_group",
    "commit_publication",
    "committed_model",
    "group_committer",
    "stage_weights",
]

# The commit's statements are built once, with bound parameters: building a statement and its
# cache key at every call cost a publish more than running it (docs/registry.md).
_INSERT_MODELS = insert(ModelRow)
_MODEL_COLUMNS = tuple(c.key for c in ModelRow.__table__.columns)
_LEDGER_COLUMNS = tuple(c.key for c in LedgerEntryRow.__table__.columns if c.key != "id")
_INSERT_LEDGER = insert(LedgerEntryRow)
_SUBSCRIPTIONS_OF_TASKS = (
    select(
        SubscriptionRow.id,
        SubscriptionRow.site_id,
        SubscriptionRow.channel,
        SubscriptionRow.task,
        SubscriptionRow.classes_json,
    )
    .where(SubscriptionRow.task.in_(bindparam("tasks", expanding=True)))
    .order_by(SubscriptionRow.id)
)
_TAKEN = select(ModelRow.id, ModelRow.weights_sha256).where(
    or_(
        ModelRow.id.in_(bindparam("ids", expanding=True)),
        ModelRow.weights_sha256.in_(bindparam("digests", expanding=True)),
    )
)


def _subscriptions(session: Session, tasks: Iterable[str]) -> list[SubscriptionMatch]:
    """The subscriptions to models of ``tasks``, in id order, read as plain columns (a model
    matched against thousands of subscriptions costs no ORM object per subscription)."""
    rows = session.connection().execute(_SUBSCRIPTIONS_OF_TASKS, {"tasks": sorted(set(tasks))})
    return [SubscriptionMatch.from_columns(*row) for row in rows]


def _receivers(subscriptions: Sequence[SubscriptionMatch], pub: Publication) -> list[str]:
    """Ids of the subscriptions among ``subscriptions`` that receive ``pub``, in their order."""
    card = pub.card
    visible = frozenset(pub.visible_to or ())
    features = frozenset(card.trained_features)
    return [
        m.subscription_id
        for m in subscriptions
        if m.accepts(
            publisher_id=pub.site_id,
            task=card.task,
            classes=card.classes,
            features=features,
            public=pub.visible_to is None,
            visible_to=visible,
        )
    ]


def _new_model_row(pub: Publication, storage_key: str, position: int) -> ModelRow:
    """The ``models`` row of ``pub`` at feed ``position`` (not added to any session)."""
    card = pub.card
    return ModelRow(
        id=card.model_id,
        publisher_id=pub.site_id,
        task=card.task,
        epsilon=pub.epsilon,
        delta=card.privacy.delta,
        claimed_epsilon=card.privacy.epsilon,
        format=card.format,
        weights_sha256=card.weights_sha256,
        size_bytes=len(pub.weights),
        storage_key=storage_key,
        card_json=pub.card_json,
        public=pub.visible_to is None,
        position=position,
        created_at=utcnow(),
    )


def _ledger_values(pub: Publication) -> dict[str, Any]:
    """The columns of ``pub``'s ledger entry."""
    card = pub.card
    entry = ledger_row(
        pub.site_id,
        pub.release,
        epsilon=pub.epsilon,
        delta=card.privacy.delta,
        model_id=card.model_id,
    )
    return {c: getattr(entry, c) for c in _LEDGER_COLUMNS}


def _insert(
    session: Session,
    writer: FeedWriter,
    items: Sequence[tuple[Publication, str]],
    subscriptions: Sequence[SubscriptionMatch],
) -> None:
    """Insert the models of ``items`` (publication, storage key), with their events, features,
    visibility, ledger entries and deliveries: each table in one statement for all of them,
    without ORM objects (this runs holding the feed lock, which every publish of every replica
    waits for).  Positions are handed out as one publication after the other would take them:
    a model's, then its deliveries'."""
    models: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    features: list[dict[str, Any]] = []
    visibility: list[dict[str, Any]] = []
    entries: list[dict[str, Any]] = []
    receivers: list[str] = []
    cursors: list[int] = []
    delivered: list[str] = []
    for pub, storage_key in items:
        card = pub.card
        position = writer.next_position()
        pub.row = _new_model_row(pub, storage_key, position)  # the answer is built from it
        models.append({c: getattr(pub.row, c) for c in _MODEL_COLUMNS})
        events.append(
            event_values(
                "model.published",
                {"model_id": card.model_id, "publisher": card.publisher, "task": card.task},
                site_id=pub.site_id,
                model_id=card.model_id,
                position=position,
            )
        )
        features.extend(
            {"model_id": card.model_id, "feature_name": n} for n in card.trained_features
        )
        visibility.extend({"model_id": card.model_id, "site_id": s} for s in pub.visible_to or ())
        entries.append(_ledger_values(pub))
        for subscription_id in _receivers(subscriptions, pub):
            receivers.append(subscription_id)
            cursors.append(writer.next_position())
            delivered.append(card.model_id)
    if not models:
        return
    conn = session.connection()
    # A few wide rows: executemany (pubsubml.registry.infrastructure.bulk_insert).
    conn.execute(_INSERT_MODELS, models)
    writer.events(events)
    insert_rows(conn, ModelFeatureRow.__table__, features)  # many narrow rows: one statement
    insert_rows(conn, ModelVisibilityRow.__table__, visibility)
    conn.execute(_INSERT_LEDGER, entries)
    writer.deliver_at(receivers, cursors, delivered)


def _is_committed(db: Database, storage_key: str) -> bool:
    """True when a model row references ``storage_key`` (a commit that reported an error)."""
    try:
        with db.read() as session:
            stmt = select(ModelRow.id).where(ModelRow.storage_key == storage_key)
            return session.execute(stmt).first() is not None
    except Exception:  # the database is unreachable: keep the file, start-up collection decides
        return True


def _conflict(pub: Publication) -> ConflictError:
    return ConflictError(
        f"weights with SHA-256 {pub.card.weights_sha256} are already published by another site"
    )


def _commit_one(
    session: Session,
    writer: FeedWriter,
    pub: Publication,
    storage_key: str,
    subscriptions: Sequence[SubscriptionMatch] | None = None,
) -> bool:
    """Re-check and insert one publication in the open transaction; False if already there."""
    card = pub.card
    same = session.execute(  # one round trip for both checks
        select(ModelRow.id).where(
            or_(ModelRow.id == card.model_id, ModelRow.weights_sha256 == card.weights_sha256)
        )
    ).scalars()
    found = set(same)
    if card.model_id in found:
        return False
    if found:
        raise _conflict(pub)
    if count_releases(session, pub.site_id) != pub.ledger_size:
        site = session.get(SiteRow, pub.site_id)
        assert site is not None
        charge(session, site, pub.release)
    if subscriptions is None:
        subscriptions = _subscriptions(session, [card.task])
    _insert(session, writer, [(pub, storage_key)], subscriptions)
    return True


def _commit_alone(
    session: Session,
    writer: FeedWriter,
    pub: Publication,
    storage_key: str,
    subscriptions: Sequence[SubscriptionMatch] | None = None,
) -> bool | BaseException:
    """:func:`_commit_one` inside its own SAVEPOINT: its outcome, or its error (rolled back)."""
    mark = writer.mark()
    pub.row = None
    try:
        with session.begin_nested():
            return _commit_one(session, writer, pub, storage_key, subscriptions)
    except Exception as exc:
        writer.rewind(mark)
        pub.row = None
        return exc


def _commit_together(
    session: Session, writer: FeedWriter, pubs: Sequence[Publication], keys: Sequence[str]
) -> list[bool | BaseException]:
    """Re-check and insert ``pubs`` in the open transaction with a few statements for all.

    The re-checks of :func:`_commit_one` are read once for the group (which of their model ids
    and weights digests are published, each site's number of releases, the subscriptions of
    their tasks) and applied in order, each publication seeing the ones before it: one whose
    model id is already there is not inserted (False), one whose weights another model has is a
    conflict.  The publications that pass are inserted together (:func:`_insert`).  A
    publication whose site's ledger changed since its checks (a release of a concurrent request,
    or of an earlier publication of the group) is charged again and inserted alone, in a
    savepoint (:func:`_commit_alone`), after the ones before it.  Any other failure propagates.
    """
    card_ids = [p.card.model_id for p in pubs]
    digests = [p.card.weights_sha256 for p in pubs]
    rows = session.connection().execute(_TAKEN, {"ids": card_ids, "digests": digests})
    taken_ids: set[str] = set()
    taken_digests: set[str] = set()
    for model_id, digest in rows:
        taken_ids.add(model_id)
        taken_digests.add(digest)
    counts = release_counts(session, [p.site_id for p in pubs])
    subscriptions = _subscriptions(session, [p.card.task for p in pubs])
    results: list[bool | BaseException] = []
    batch: list[tuple[Publication, str]] = []
    for pub, key in zip(pubs, keys, strict=True):
        card = pub.card
        if card.model_id in taken_ids:
            results.append(False)
            continue
        if card.weights_sha256 in taken_digests:
            results.append(_conflict(pub))
            continue
        if counts[pub.site_id] != pub.ledger_size:
            if batch:  # the ones before it first: its charge reads their releases
                _insert(session, writer, batch, subscriptions)
                batch = []
            result = _commit_alone(session, writer, pub, key, subscriptions)
            results.append(result)
            if result is not True:
                continue
        else:
            batch.append((pub, key))
            results.append(True)
        taken_ids.add(card.model_id)
        taken_digests.add(card.weights_sha256)
        counts[pub.site_id] += 1
    if batch:
        _insert(session, writer, batch, subscriptions)
    return results


def stage_weights(store: ArtifactStorage, pub: Publication) -> StagedArtifact:
    """Write ``pub``'s weights into ``store`` durably under a fresh key (fsync of the file and of
    its folder); invisible until a committed row references it.  Hold the upload lock shared
    from before this call until the commit.  A file that could not be promoted is removed."""
    staged = store.stage(pub.weights, sha256=pub.card.weights_sha256)
    try:
        store.promote(staged)
    except BaseException:
        store.discard(staged)
        raise
    return staged


def commit_group(
    db: Database,
    store: ArtifactStorage,
    lock: UploadLock,
    pubs: Sequence[Publication],
    staged: Sequence[StagedArtifact | None] | None = None,
) -> list[bool | BaseException]:
    """Commit several publications in ONE transaction with a few statements for all (group commit).

    Holding ``lock`` shared, every weights file is written, fsynced and renamed into the store
    (:func:`stage_weights`, except those given in ``staged``: written by callers who hold the
    lock); then one transaction takes the feed lock once, re-checks the publications together
    and inserts the ones that pass with one statement per table (:func:`_commit_together`), and
    commits once (one commit, one fsync of the database for the group).  A publication that
    fails its re-checks (a conflict, a budget an earlier publication used first) is left out:
    the others commit.  Should a statement of the group fail, its savepoint is rolled back and
    each publication is committed alone in a savepoint of its own, so a failing publication
    still rolls back only itself.  If the transaction itself fails, none is committed.  Files of
    publications that did not commit are removed.

    Returns
    -------
    list of bool or BaseException
        Per publication: True (published), False (it was already published) or its error.
    """
    results: list[bool | BaseException] = [False] * len(pubs)
    files: list[StagedArtifact | None] = list(staged) if staged is not None else [None] * len(pubs)
    if len(files) != len(pubs):
        raise ValueError(f"{len(files)} staged files for {len(pubs)} publications")
    with lock.shared():
        try:
            for i, pub in enumerate(pubs):
                if files[i] is None:
                    try:
                        files[i] = stage_weights(store, pub)
                    except Exception as exc:
                        results[i] = exc
            with db.write() as session:
                writer = FeedWriter(session)
                order = [i for i, item in enumerate(files) if item is not None]
                group = [pubs[i] for i in order]
                keys = [item.key for item in files if item is not None]
                mark = writer.mark()
                try:
                    with session.begin_nested():
                        outcomes = _commit_together(session, writer, group, keys)
                except Exception:  # a statement of the group failed: each in its own savepoint
                    writer.rewind(mark)
                    outcomes = [
                        _commit_alone(session, writer, pub, key)
                        for pub, key in zip(group, keys, strict=True)
                    ]
                for i, outcome in zip(order, outcomes, strict=True):
                    results[i] = outcome
                writer.close()
        except BaseException as exc:  # the transaction failed: nothing committed
            results = [r if isinstance(r, BaseException) else exc for r in results]
            for item in files:
                if item is not None and not (item.promoted and _is_committed(db, item.key)):
                    store.discard(item)
            if not isinstance(exc, Exception):
                raise
            return results
    for item, result in zip(files, results, strict=True):
        if item is not None and result is not True:
            store.discard(item)
    return results


def commit_publication(
    db: Database, store: ArtifactStorage, lock: UploadLock, principal: Principal, pub: Publication
) -> ModelPublic:
    """Store the weights durably, then commit model, ledger entry, event and deliveries at once,
    holding ``lock`` shared throughout (see :mod:`pubsubml.registry.infrastructure.upload_lock`): a
    group of one (:func:`commit_group`).

    Raises
    ------
    ConflictError
        The same weights were published by another site.
    PrivacyBudgetExceededError
        A concurrent publish of the same site used the budget first.
    ServiceBusyError
        A starting replica held the upload lock past its timeout.
    """
    (result,) = commit_group(db, store, lock, [pub])
    return committed_model(db, principal, pub, result)


def committed_model(
    db: Database, principal: Principal, pub: Publication, result: bool | BaseException
) -> ModelPublic:
    """The published model as the publisher sees it (``created`` from ``result``), or the error."""
    if isinstance(result, BaseException):
        raise result
    if result and pub.row is not None:  # just inserted: answer from the row, no read
        return model_public(
            pub.row,
            pub.card.publisher,
            features=sorted(set(pub.card.trained_features)),
            visible_to=pub.visible_names,
            with_card=True,
            created=True,
        )
    public = db.read_statements(lambda session: get_model(session, principal, pub.card.model_id))
    return public.model_copy(update={"created": result})


def group_committer(
    db: Database, lock: UploadLock, *, max_group: int = 16
) -> GroupCommitter[Publication]:
    """The process's :class:`~pubsubml.registry.infrastructure.group_commit.GroupCommitter`:
    each group committed by :func:`commit_group` into ``db``, holding ``lock`` shared."""

    def commit(
        store: ArtifactStorage,
        pubs: Sequence[Publication],
        staged: Sequence[StagedArtifact | None],
    ) -> list[bool | BaseException]:
        return commit_group(db, store, lock, pubs, staged)

    return GroupCommitter(commit, max_group=max_group)
