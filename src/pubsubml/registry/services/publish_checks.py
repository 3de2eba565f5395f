"""The checks of the publish path: everything verified before anything is written.

:func:`prepare_publication` runs every check without writing anything: the card (strict
pydantic), the publisher (a site publishes only as itself), the SHA-256 of the weights, the
Ed25519 signature against the site's registered key; then, in a worker process with CPU-time and
memory limits (:mod:`pubsubml.artifacts.validation_pool`), the safe loader of the weights format
(no pickle, no ONNX external data, no unknown op domain, no loops) and ε recomputed by the PLD
accountant from the card's DP events (a card may not claim less); then the feature dictionary
and a trial charge of the site's ledger (RDP first, PLD when RDP is not enough).  What passes is
a :class:`Publication`, committed by :mod:`~pubsubml.registry.services.publish_commit`.

References
----------
pubsub-ml.txt §3.2 (Algorithm 1: publishers publish (ε^p, δ^p)-DP models; channels) and §6
"Discussion" (registration API, metadata only).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import ValidationError
from sqlalchemy import bindparam, exists, select
from sqlalchemy.orm import Session

from pubsubml.artifacts.card import ModelCard
from pubsubml.artifacts.signing import public_key_from_base64, verify_card
from pubsubml.artifacts.validation_pool import ValidationPool
from pubsubml.errors import (
    DataValidationError,
    DigestMismatchError,
    NotFoundError,
    PermissionDeniedError,
    SeededNoiseError,
    SignatureError,
)
from pubsubml.privacy.ledger import Release
from pubsubml.registry.auth import Principal
from pubsubml.registry.schemas import ModelPublic, check_site_name
from pubsubml.registry.services.features import check_against_dictionary
from pubsubml.registry.services.ledger import charge, release_of_card
from pubsubml.registry.services.model_reads import get_model
from pubsubml.registry.tables import ModelRow, SiteRow

__all__ = ["Publication", "check_noise", "parse_card", "prepare_publication"]


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


# The checks' statement is built once, with bound parameters: building a statement and its
# cache key at every call cost a publish more than running it (docs/registry.md).
_SITE_AND_PUBLISHED = select(
    SiteRow.id,
    SiteRow.name,
    SiteRow.public_key,
    SiteRow.key_id,
    SiteRow.epsilon_budget,
    SiteRow.delta_budget,
    exists().where(ModelRow.id == bindparam("model_id")).label("published"),
).where(SiteRow.name == bindparam("name"))


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


def _card_of_publisher(principal: Principal, card_text: str | bytes) -> ModelCard:
    """The parsed card, once the caller is a publishing site publishing as itself.

    Raises
    ------
    PermissionDeniedError
        The caller is not a publishing site, or the card names another publisher.
    DataValidationError
        Malformed card.
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
    return card


def _check_digest(card: ModelCard, weights: bytes) -> None:
    """Refuse weights whose SHA-256 is not the card's.

    Raises
    ------
    DigestMismatchError
    """
    digest = hashlib.sha256(weights).hexdigest()
    if digest != card.weights_sha256:
        raise DigestMismatchError(
            f"the uploaded weights have SHA-256 {digest}, the card says {card.weights_sha256}"
        )


def _verify_signature(card: ModelCard, site: _PublishingSite) -> None:
    """Verify the card's Ed25519 signature against the key ``site`` registered.

    Raises
    ------
    SignatureError
        The site registered no key, the card names another key, or the signature is bad.
    """
    if site.public_key is None or site.key_id is None:
        raise SignatureError(f"site {site.name!r} has no registered public key to verify with")
    if card.signer_key_id != site.key_id:
        raise SignatureError(
            f"the card is signed by key {str(card.signer_key_id)[:16]}…, site {site.name!r} "
            f"registered key {site.key_id[:16]}…"
        )
    verify_card(card, {site.key_id: public_key_from_base64(site.public_key)})


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
    card = _card_of_publisher(principal, card_text)
    site, published = _site_and_published(session, principal.name, card.model_id)
    _check_digest(card, weights)
    _verify_signature(card, site)
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
