"""The demo's registry: served on loopback while the context is open, stopped after."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from pubsubml.cli.demo_registry import embedded_registry
from pubsubml.registry.client import RegistryClient


def test_the_registry_answers_on_loopback_until_the_context_closes(tmp_path: Path) -> None:
    with embedded_registry(tmp_path, "x" * 32, allow_seeded_noise=False) as url:
        assert url.startswith("http://127.0.0.1:")
        assert RegistryClient(url, "x" * 32).health()
    assert (tmp_path / "registry.db").is_file()
    with pytest.raises(httpx.TransportError):
        httpx.get(url, timeout=2)
