"""The publish path: validate everything, then commit model, ledger entry and feeds at once.

:func:`prepare_publication` runs every check without writing anything: the card (strict
pydantic), the publisher (a site publishes only as itself), the SHA-256 of the weights, the
Ed25519 signature against the site's registered key; then, in a worker process with CPU-time and
memory limits (:mod:`pubsubml.artifacts.validation_pool`), the safe loader of the weights format
(no pickle, no ONNX external data, no unknown op domain, no loops) and ε recomputed by the PLD
accountant from the card's DP events (a card may not claim less); then the feature dictionary
and a trial charge of the site's ledger (RDP first, PLD when RDP is not enough).
:func:`commit_publication` then (:func:`commit_group` for several at once: group commit, one
transaction, one database fsync and one statement per table for concurrent publishes), holding
the upload lock shared (:mod:`pubsubml.registry.upload_lock`), writes the weights to a temporary
file, fsyncs it, renames it into the store under a fresh key (fsync of the directory), and in ONE
transaction holding the feed lock re-checks idempotency and the ledger, inserts the model, its
ledger entry, the ``model.published`` event and one delivery per matching subscription, and
commits.  The file is invisible until that
commit; if anything fails, the transaction is rolled back and the file removed (or collected at
the next start).

References
----------
pubsub-ml.txt §3.2 (Algorithm 1: publishers publish (ε^p, δ^p)-DP models; channels) and §6
"Discussion" (registration API, metadata only).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from sqlalchemy import bindparam, exists, insert, or_, select
from sqlalchemy.orm import Session

from pubsubml.artifacts.card import ModelCard
from pubsubml.artifacts.signing import public_key_from_base64, verify_card
from pubsubml.artifacts.validation_pool import ValidationPool
from pubsubml.errors import (
    ConflictError,
    DataValidationError,
    DigestMismatchError,
    NotFoundError,
    PermissionDeniedError,
    SeededNoiseError,
    SignatureError,
)
from pubsubml.privacy.ledger import Release
from pubsubml.registry.auth import Principal
from pubsubml.registry.bulk_insert import insert_rows
from pubsubml.registry.database import Database
from pubsubml.registry.schemas import ModelPublic, check_site_name
from pubsubml.registry.services.features import check_against_dictionary
from pubsubml.registry.services.feed import FeedWriter, SubscriptionMatch, event_values
from pubsubml.registry.services.ledger import (
    charge,
    count_releases,
    ledger_row,
    release_counts,
    release_of_card,
)
from pubsubml.registry.services.models import get_model, model_public
from pubsubml.registry.store import ArtifactStorage, StagedArtifact
from pubsubml.registry.tables import (
    LedgerEntryRow,
    ModelFeatureRow,
    ModelRow,
    ModelVisibilityRow,
    SiteRow,
    SubscriptionRow,
    utcnow,
)
from pubsubml.registry.upload_lock import UploadLock

__all__ = [
    "Publication",
    "check_noise",
    "commit_group",
    "commit_publication",
    "committed_model",
    "parse_card",
    "prepare_publication",
    "publish_model",
    "stage_weights",
]

log = logging.getLogger("pubsubml.registry")


@dataclass
class Publication:
    """A publication that passed every check and is ready to commit."""

    card: ModelCard
    card_json: str
    weights: bytes
    epsilon: float
    release: Release
    site_id: int
    visible_to: list[int] | None
    ledger_size: int
    visible_names: list[str] | None = None
    row: ModelRow | None = field(default=None, repr=False)
    """The model row this publication inserted (set by the commit; read only once it committed)."""


def parse_card(card_text: str | bytes) -> ModelCard:
    """Strictly parse a model card received from a client.

    Raises
    ------
    DataValidationError
        Malformed JSON or an invalid field (the message lists the first problems).
    UntrustedArtifactError
        The card is larger than the card size limit.
    """
    try:
        return ModelCard.from_json(card_text)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'card'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise DataValidationError(f"malformed model card: {problems}") from None


def _visible_ids(session: Session, names: Sequence[str] | None) -> list[int] | None:
    if names is None:
        return None
    for n in names:
        try:
            check_site_name(n)
        except ValueError as exc:
            raise DataValidationError(f"visible_to: {exc}") from None
    wanted = sorted(set(names))
    rows = session.execute(select(SiteRow.name, SiteRow.id).where(SiteRow.name.in_(wanted))).all()
    found = {n: i for n, i in rows}
    unknown = [n for n in wanted if n not in found]
    if unknown:
        raise DataValidationError(f"visible_to names unknown sites {unknown[:10]}")
    return [found[n] for n in wanted]


# The publish path's statements are built once, with bound parameters: building a statement and
# its cache key at every call cost a publish more than running it (docs/registry.md).
_SITE_AND_PUBLISHED = select(
    SiteRow.id,
    SiteRow.name,
    SiteRow.public_key,
    SiteRow.key_id,
    SiteRow.epsilon_budget,
    SiteRow.delta_budget,
    exists().where(ModelRow.id == bindparam("model_id")).label("published"),
).where(SiteRow.name == bindparam("name"))
_INSERT_MODELS = insert(ModelRow)
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


@dataclass(frozen=True)
class _PublishingSite:
    """The columns of the publishing site that the checks read."""

    id: int
    name: str
    public_key: str | None
    key_id: str | None
    epsilon_budget: float
    delta_budget: float


def _site_and_published(session: Session, name: str, model_id: str) -> tuple[_PublishingSite, bool]:
    """The publishing site's columns and whether ``model_id`` is published, in one statement
    (only whether it exists: not the stored card's text; plain columns, no ORM object).

    Raises
    ------
    NotFoundError
        No such site.
    """
    params = {"name": name, "model_id": model_id}
    row = session.connection().execute(_SITE_AND_PUBLISHED, params).one_or_none()
    if row is None:
        raise NotFoundError(f"site {name!r} not found")
    site_id, site_name, public_key, key_id, epsilon_budget, delta_budget, published = row
    site = _PublishingSite(site_id, site_name, public_key, key_id, epsilon_budget, delta_budget)
    return site, bool(published)


def check_noise(card: ModelCard, allow_seeded_noise: bool) -> None:
    """Refuse a private card whose noise is not recorded as secure, unless seeded noise is allowed.

    Raises
    ------
    SeededNoiseError
        ``privacy.noise`` is ``"seeded"`` or absent (cards made before the field existed were
        all trained with seeded noise) and ``allow_seeded_noise`` is false.
    """
    privacy = card.privacy
    if allow_seeded_noise or not privacy.is_private or privacy.noise_is_secure:
        return
    said = "seeded" if privacy.noise == "seeded" else "not recorded"
    raise SeededNoiseError(
        f"model {card.model_id}: its DP noise is {said} (a simulation's seed can regenerate it); "
        "this registry accepts only secure noise: train without noise_seed, or start the "
        "registry for research with --allow-seeded-noise"
    )


def prepare_publication(
    session: Session,
    principal: Principal,
    card_text: str | bytes,
    weights: bytes,
    *,
    validator: ValidationPool,
    visible_to: Sequence[str] | None = None,
    max_weights_bytes: int,
    allow_seeded_noise: bool = False,
) -> Publication | ModelPublic:
    """Run every check of the publish path; writes nothing.

    The checks on untrusted bytes (the weights' loader, ε from the DP events) run in
    ``validator``'s worker processes; ``session``'s read transaction is ended before them, so no
    snapshot is held while they run.

    Returns the already published model when the same publisher published the same weights
    before (idempotent publish: no second charge), else a :class:`Publication` to commit.

    Raises
    ------
    PermissionDeniedError
        The caller is not a publishing site, or the card names another publisher.
    DataValidationError
        Malformed card, unknown ``visible_to`` sites.
    DigestMismatchError, SignatureError, UntrustedArtifactError
        Weights that do not match the card, a bad signature, an unsafe payload.
    SchemaMismatchError
        Features outside the dictionary.
    SeededNoiseError
        The card's DP noise was seeded (or it does not say), and ``allow_seeded_noise`` is off.
    InvalidPrivacyParameterError
        No DP events, δ outside (0, 1) (δ = 0 only for pure ε-DP events) or above the site's δ,
        or a claimed ε below the recomputed one.
    PrivacyBudgetExceededError
        The release would exceed the site's budget.
    ServiceBusyError
        Every validation worker stayed busy.
    """
    if principal.is_admin or not principal.can_publish():
        raise PermissionDeniedError(
            f"{principal.name!r} may not publish: only sites with the publisher role publish models"
        )
    card = parse_card(card_text)
    if card.publisher != principal.name:
        raise PermissionDeniedError(
            f"site {principal.name!r} may not publish as {card.publisher!r}: a site publishes only "
            "its own models"
        )
    site, published = _site_and_published(session, principal.name, card.model_id)
    digest = hashlib.sha256(weights).hexdigest()
    if digest != card.weights_sha256:
        raise DigestMismatchError(
            f"the uploaded weights have SHA-256 {digest}, the card says {card.weights_sha256}"
        )
    if site.public_key is None or site.key_id is None:
        raise SignatureError(f"site {site.name!r} has no registered public key to verify with")
    if card.signer_key_id != site.key_id:
        raise SignatureError(
            f"the card is signed by key {str(card.signer_key_id)[:16]}…, site {site.name!r} "
            f"registered key {site.key_id[:16]}…"
        )
    verify_card(card, {site.key_id: public_key_from_base64(site.public_key)})
    check_noise(card, allow_seeded_noise)
    if published:
        public = get_model(session, principal, card.model_id)
        return public.model_copy(update={"created": False})
    # No snapshot (nor connection) held while the worker runs.
    session.rollback()
    epsilon = validator.validate(
        card, weights, site_delta=site.delta_budget, max_weights_bytes=max_weights_bytes
    )
    check_against_dictionary(session, card.input_schema)
    visible = _visible_ids(session, visible_to)
    release = release_of_card(card)
    ledger_size = charge(session, site, release)
    return Publication(
        card=card,
        card_json=card.to_json(),
        weights=weights,
        epsilon=epsilon,
        release=release,
        site_id=site.id,
        visible_to=visible,
        ledger_size=ledger_size,
        visible_names=None if visible_to is None else sorted(set(visible_to)),
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
        pub.row = ModelRow(  # not added to the session: the answer is built from it
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
        entry = ledger_row(
            pub.site_id,
            pub.release,
            epsilon=pub.epsilon,
            delta=card.privacy.delta,
            model_id=card.model_id,
        )
        entries.append({c: getattr(entry, c) for c in _LEDGER_COLUMNS})
        for subscription_id in _receivers(subscriptions, pub):
            receivers.append(subscription_id)
            cursors.append(writer.next_position())
            delivered.append(card.model_id)
    if not models:
        return
    conn = session.connection()
    conn.execute(
        _INSERT_MODELS, models
    )  # a few wide rows: executemany (pubsubml.registry.bulk_insert)
    writer.events(events)
    insert_rows(conn, ModelFeatureRow.__table__, features)  # many narrow rows: one statement
    insert_rows(conn, ModelVisibilityRow.__table__, visibility)
    conn.execute(_INSERT_LEDGER, entries)
    writer.deliver_at(receivers, cursors, delivered)


_MODEL_COLUMNS = tuple(c.key for c in ModelRow.__table__.columns)
_LEDGER_COLUMNS = tuple(c.key for c in LedgerEntryRow.__table__.columns if c.key != "id")


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
    holding ``lock`` shared throughout (see :mod:`pubsubml.registry.upload_lock`): a group of one
    (:func:`commit_group`).

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
    committer: Any = None,
    allow_seeded_noise: bool = False,
) -> ModelPublic:
    """Validate and publish a model (see the module docstring); idempotent per weights digest.

    ``committer`` (a :class:`~pubsubml.registry.services.group_commit.GroupCommitter`) commits
    it together with the publications of concurrent requests; without one it commits alone.
    Returns the model with ``created`` true when it is new, false when it was already published.
    """
    # Every check reads with single statements (no snapshot is needed: the commit re-checks
    # what may have changed since, see _commit_one).
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
