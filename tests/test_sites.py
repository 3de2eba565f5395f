"""Site: publishing charges the ledger first, refuses over budget; pulling verifies."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from pubsubml.artifacts import ModelCard
from pubsubml.errors import (
    DuplicateReleaseError,
    InvalidPrivacyParameterError,
    PrivacyBudgetExceededError,
    PrivacyError,
    SeededNoiseWarning,
    SignatureError,
)
from pubsubml.hub import LocalHub
from pubsubml.learners.mlp import DPMLPClassifier
from pubsubml.methods import Customizer, published_runner
from pubsubml.methods.pubsub.subscription import SubscriptionError, prepare_subscription
from pubsubml.privacy import PrivacyLedger
from pubsubml.schema import FeatureSchema
from pubsubml.sites import Site

logging.getLogger("absl").setLevel(logging.ERROR)
SCHEMA = FeatureSchema.numeric(["x0", "x1", "x2"])


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """The networks here are tiny: one thread avoids spin-waiting on a busy 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _data(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.random((n, 3)), columns=SCHEMA.names)
    return X, (X["x0"] + X["x1"] > 1).to_numpy().astype(int)


def _dp_model(seed: int = 0, features: list[str] | None = None) -> DPMLPClassifier:
    feats = features or SCHEMA.names
    X, y = _data(300, seed)
    return DPMLPClassifier(
        schema=SCHEMA.subset(feats),
        classes=[0, 1],
        hidden_layer_sizes=(8,),
        epochs=3,
        batch_size=50,
        learning_rate=0.05,
        noise_multiplier=1.5,
        accountant="rdp",
        random_state=seed,
    ).fit(X[feats], y)


def _site(name: str, budget: float = 10.0) -> Site:
    return Site(
        name, SCHEMA, PrivacyLedger(site=name, epsilon_budget=budget, delta=1e-5, backend="rdp")
    )


class SpyHub(LocalHub):
    """Records how many releases the publisher's ledger held when each card arrived."""

    def __init__(self, site: Site) -> None:
        super().__init__()
        self.site = site
        self.charged_at_publish: list[int] = []

    def publish(self, card: ModelCard, weights: bytes) -> str:
        self.charged_at_publish.append(len(self.site.ledger.releases))
        return super().publish(card, weights)


def test_publish_charges_the_ledger_before_the_model_leaves() -> None:
    site = _site("pub")
    hub = SpyHub(site)
    model = _dp_model()
    with pytest.raises(InvalidPrivacyParameterError, match="not registered"):
        site.publish(model, hub, scope=["2024-01"])
    assert len(hub) == 0 and site.ledger.releases == []
    site.register_scopes(["2024-01", "2024-02"])
    mid = site.publish(model, hub, scope=["2024-01"])
    assert hub.charged_at_publish == [1]
    release = site.ledger.releases[0]
    assert release.release_id == mid and release.scope == ("2024-01",)
    assert list(release.events) == model.privacy_events_
    card, _ = hub.fetch(mid)
    assert card.publisher == "pub" and card.privacy.data_scope == ["2024-01"]
    # Publishing the same model again charges nothing more and gives the same id.
    assert site.publish(model, hub, scope=["2024-01"]) == mid
    assert len(site.ledger.releases) == 1 and len(hub) == 1


def test_a_reused_release_id_for_another_model_is_refused() -> None:
    # Two different ε-DP models on the same rows compose: reusing the id must not hide the second.
    site = _site("pub")
    hub = LocalHub()
    first, second = _dp_model(seed=0), _dp_model(seed=1)
    site.publish(first, hub, release_id="weekly")
    spent = site.ledger.spent_epsilon()
    with pytest.raises(DuplicateReleaseError, match="already charged for another release"):
        site.publish(second, hub, release_id="weekly")
    assert site.ledger.spent_epsilon() == spent and len(hub) == 1
    with pytest.raises(DuplicateReleaseError):  # the same model on another scope is new too
        site.publish(first, hub, release_id="weekly", scope=["2024-02"])
    # The identical release is idempotent; under its own id the second model is charged.
    site.publish(first, hub, release_id="weekly")
    site.publish(second, hub, release_id="weekly-2")
    assert len(site.ledger.releases) == 2 and site.ledger.spent_epsilon() > spent


def test_publish_over_budget_publishes_nothing() -> None:
    model = _dp_model()
    site = _site("pub", budget=model.epsilon_ / 2)
    hub = SpyHub(site)
    with pytest.raises(PrivacyBudgetExceededError):
        site.publish(model, hub)
    assert len(hub) == 0 and hub.charged_at_publish == [] and site.ledger.releases == []
    assert site.published == []


def test_non_private_models_are_never_published() -> None:
    X, y = _data(100, 0)
    site = _site("pub")
    hub = LocalHub()
    with pytest.raises(PrivacyError, match="no DP events"):
        site.publish(LogisticRegression().fit(SCHEMA.encode(X), y), hub)
    assert len(hub) == 0 and site.ledger.releases == []


def test_pull_verifies_signatures_and_resumes() -> None:
    hub = LocalHub()
    a, b, sub = _site("a"), _site("b"), _site("s")
    sid = sub.subscribe(hub, "x0 & x1", task="classification", classes=[0, 1])
    a.publish(_dp_model(0), hub)
    with pytest.raises(SignatureError):
        sub.pull(hub)
    assert sub.cursors[sid] == 0  # nothing lost
    sub.trust(a.public_key, b.public_key)
    first = sub.pull(hub)
    assert [m.publisher for m in first] == ["a"]
    b.publish(_dp_model(1), hub)
    b.publish(_dp_model(2, ["x2"]), hub)  # outside the channel
    second = sub.pull(hub)
    assert [m.publisher for m in second] == ["b"] and sub.pull(hub) == []


def test_pulled_models_feed_the_customizer() -> None:
    # Prepare: two publishers, one subscriber pulling through the hub.
    hub = LocalHub()
    pubs = [_site(f"p{i}") for i in range(2)]
    sub = _site("s")
    sub.trust(*(p.public_key for p in pubs))
    sub.subscribe(hub, "x0", task="classification", classes=[0, 1])
    for i, p in enumerate(pubs):
        p.publish(_dp_model(i, ["x0", "x1"] if i == 0 else ["x0", "x2"]), hub)
    models = sub.pull(hub)
    X, y = _data(200, 9)
    # Execute: direct calls and the batched runner give the same customized model.
    direct = Customizer(models=models, schema=SCHEMA, random_state=0).fit(X, y)
    batched = Customizer(models=models, schema=SCHEMA, runner=published_runner, random_state=0)
    batched.fit(X, y)
    # Assert
    assert direct.selected_ids_ == ["own", *(m.model_id for m in models)]
    np.testing.assert_allclose(direct.predict_proba(X), batched.predict_proba(X), atol=1e-6)


def test_pulled_models_are_prepared_for_customize_as_the_command_line_prepares_them() -> None:
    hub = LocalHub()
    pubs = [_site(f"p{i}") for i in range(2)]
    sub = _site("s")
    sub.trust(*(p.public_key for p in pubs))
    sub.subscribe(hub, "x0", task="classification", classes=[0, 1])
    for i, p in enumerate(pubs):
        p.publish(_dp_model(i, ["x0", "x1"] if i == 0 else ["x0", "x2"]), hub)
    models = sub.pull(hub)
    X, y = _data(120, 3)
    prepared = prepare_subscription(models, X, y, trusted_keys=sub.trusted_keys)
    assert [m.model_id for m in prepared.models] == sorted(m.model_id for m in models)
    # The union of the cards' schemas, in the order of the models' ids (as `pubsubml customize`).
    assert sorted(prepared.schema.names) == sorted(SCHEMA.names) and prepared.classes == [0, 1]
    first = prepared.models[0].card.input_schema.names
    assert list(prepared.schema.names[: len(first)]) == list(first)
    # A site that trusts no one gets the refusal `pubsubml customize` gives without --trust.
    with pytest.raises(SubscriptionError, match="no trusted keys"):
        prepare_subscription(models, X, y, trusted_keys=_site("t").trusted_keys)
    customizer = prepared.customizer(own_model="logistic", cv=3, random_state=0).fit(X, y)
    assert customizer.selected_ids_[0] == "own"


def test_release_to_charges_then_writes_and_refuses_over_budget(tmp_path: Path) -> None:
    from pubsubml.artifacts import load_artifact
    from pubsubml.errors import PrivacyBudgetExceededError
    from pubsubml.learners.dpsgd_linear import DPSGDLogisticRegression

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.uniform(0, 1, (200, 2)), columns=["a", "b"])
    y = (X["a"] > 0.5).to_numpy().astype(int)
    schema = FeatureSchema.numeric(["a", "b"])
    site = Site("s", schema, PrivacyLedger(site="s", epsilon_budget=1.2, delta=1e-5))
    model = DPSGDLogisticRegression(schema=schema, classes=[0, 1], epsilon=1.0, random_state=0)
    art = site.release_to(model.fit(X, y), tmp_path / "one")
    assert load_artifact(tmp_path / "one").card.model_id == art.card.model_id
    assert [r.release_id for r in site.ledger.releases] == [art.card.model_id]
    other = DPSGDLogisticRegression(schema=schema, classes=[0, 1], epsilon=1.0, random_state=1)
    with pytest.raises(PrivacyBudgetExceededError):
        site.release_to(other.fit(X, y), tmp_path / "two")
    assert not (tmp_path / "two").exists() and len(site.ledger.releases) == 1


def test_a_release_with_seeded_noise_warns_and_says_so_on_its_card() -> None:
    site, hub = _site("h1"), LocalHub()
    secure = _dp_model(1)
    seeded = _dp_model(2).set_params(noise_seed=2).fit(*_data(300, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        site.publish(secure, hub)  # secure noise: no warning
    with pytest.warns(SeededNoiseWarning, match="seeded"):
        model_id = site.publish(seeded, hub)
    assert hub.fetch(model_id)[0].privacy.noise == "seeded"
    assert secure.noise_ == "secure" and seeded.noise_ == "seeded"


def test_persist_saves_the_charged_ledger_before_the_model_leaves(tmp_path: Path) -> None:
    site = _site("h1")
    hub = SpyHub(site)
    saved: list[int] = []
    site.publish(_dp_model(3), hub, persist=lambda ledger: saved.append(len(ledger.releases)))
    assert saved == [1] and hub.charged_at_publish == [1]

    def broken(ledger: PrivacyLedger) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        site.release_to(_dp_model(4), tmp_path / "out", persist=broken)
    assert not (tmp_path / "out").exists()  # nothing left the site
    assert len(site.ledger.releases) == 2  # the charge stays: the ledger errs on the safe side
