"""A registry refuses models whose DP noise was seeded unless started for research."""

from __future__ import annotations

from typing import Any

import pytest

from pubsubml.registry.settings import RegistrySettings


def _with_sites(reg: Any) -> Any:
    reg.add_features()
    reg.add_site("a")
    return reg


@pytest.mark.parametrize("noise", ["seeded", None])
def test_a_default_registry_refuses_seeded_or_unrecorded_noise_and_stores_nothing(
    registry: Any, support: Any, noise: str | None
) -> None:
    art = registry.artifacts("a", seed=31, privacy=support.privacy_record(noise=noise))
    before = registry.snapshot()

    r = registry.publish(art, site="a")

    assert r.status_code == 422 and r.json()["error"] == "seeded_noise", r.text
    assert "--allow-seeded-noise" in r.json()["detail"]
    assert registry.snapshot() == before


def test_a_research_registry_accepts_seeded_noise(registry_factory: Any, support: Any) -> None:
    reg = _with_sites(registry_factory(allow_seeded_noise=True))
    art = reg.artifacts("a", seed=32, privacy=support.privacy_record(noise="seeded"))

    r = reg.publish(art, site="a")

    assert r.status_code == 201, r.text
    assert r.json()["card"]["privacy"]["noise"] == "seeded"


def test_secure_noise_is_accepted_by_default(registry: Any, support: Any) -> None:
    art = registry.artifacts("a", seed=33, privacy=support.privacy_record(noise="secure"))

    assert registry.publish(art, site="a").status_code == 201


def test_the_research_flag_is_read_from_the_environment(tmp_path: Any) -> None:
    env = {"PUBSUBML_REGISTRY_DATA": str(tmp_path), "PUBSUBML_ALLOW_SEEDED_NOISE": "1"}

    assert RegistrySettings.from_env(env, dev=True).allow_seeded_noise
    off = RegistrySettings.from_env({**env, "PUBSUBML_ALLOW_SEEDED_NOISE": ""}, dev=True)
    assert not off.allow_seeded_noise
