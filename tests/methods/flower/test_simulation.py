"""A whole Flower run on the Simulation Engine, bridged to a real registry over HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest

from pubsubml.artifacts.signing import public_key_to_base64
from pubsubml.data.dataset import Dataset
from pubsubml.methods.flower.client_app import DPClientConfig, dp_client_app
from pubsubml.methods.flower.server_app import FlowerRun, check_publishable, dp_server_app
from pubsubml.methods.flower.simulation import run_local_simulation
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.ledger import PrivacyLedger
from pubsubml.registry.client import RegistryClient
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.migrate import upgrade
from pubsubml.sites import Site
from registry.conftest import ADMIN_TOKEN, make_settings, thread_server

LACKS = {0: [], 1: ["x0"], 2: ["x3", "x4"]}  # each site records its own subset of the columns


@pytest.mark.slow
@pytest.mark.ray
def test_a_three_site_run_publishes_the_global_model_with_every_rounds_events(
    own_ray: None, sites: list[Dataset], config: DPClientConfig, tmp_path: Path
) -> None:
    def load(context: object) -> tuple[object, object]:
        part = int(context.node_config["partition-id"])  # type: ignore[attr-defined]
        data = sites[part]
        return data.X.drop(columns=LACKS[part]), data.y

    path = tmp_path / "registry.db"
    database = Database(f"sqlite:///{path}")
    upgrade(database)  # a real SQLite file, migrated as `pubsubml registry migrate` does
    database.dispose()
    settings = make_settings(f"sqlite:///{path}", tmp_path / "store")
    with thread_server(settings) as base:
        admin = RegistryClient(base, ADMIN_TOKEN)
        admin.add_features(config.schema.features)
        site = Site(
            "federation",
            config.schema,
            PrivacyLedger(site="federation", epsilon_budget=1.0, delta=1e-5),
        )
        token = admin.add_site(
            "federation",
            public_key=public_key_to_base64(site.public_key),
            epsilon_budget=1.0,
            delta_budget=1e-5,
        )["token"]
        published: list[str] = []

        def bridge(run: FlowerRun) -> None:
            with RegistryClient(base, token) as hub:
                published.append(site.publish(check_publishable(run), hub))

        server, run = dp_server_app(
            config, n_clients=3, rounds=2, strategy="fedprox", on_finish=bridge
        )
        run_local_simulation(server, dp_client_app(config, load), 3)

        assert [s.partition_id for s in run.sites] == [0, 1, 2]
        for s in run.sites:
            assert s.rounds == 2 and len(s.events) == 2 and s.noise == "secure"
            assert s.epsilon == pytest.approx(compute_epsilon(s.events, config.delta), rel=1e-12)
            assert s.epsilon <= config.epsilon_budget
        assert len(run.round_seconds) == 2
        model = run.model
        assert model is not None and model.predict_proba(sites[0].X).shape == (300, 2)
        assert model.epsilon_ == pytest.approx(max(run.epsilons.values()), rel=1e-12)
        with RegistryClient(base, token) as hub:
            card, _ = hub.fetch(published[0])
            ledger = hub.ledger("federation")
        assert len(card.privacy.events) == 2  # both rounds, not one
        assert card.privacy.epsilon == pytest.approx(model.epsilon_, rel=1e-9)
        assert card.privacy.noise == "secure"
        assert ledger["spent_epsilon"] == pytest.approx(card.privacy.epsilon, rel=1e-9)
