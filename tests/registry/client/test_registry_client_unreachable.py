"""``RegistryClient`` against a registry that does not answer: one
:class:`~pubsubml.errors.RegistryUnreachableError` (a pubsubml error and a ``ConnectionError``)
with a one-line message, whether nothing listens, the answer never comes, or the URL is wrong."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest

from pubsubml.errors import PubsubmlError, RegistryUnreachableError
from pubsubml.methods.proxyfl.peers import free_port
from pubsubml.registry.client import RegistryClient


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A URL whose port accepts connections (the kernel's backlog) but never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def test_nothing_listening_is_unreachable_after_the_retries() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with RegistryClient(url, "psm_x", retries=1) as client:
        with pytest.raises(RegistryUnreachableError) as info:
            client.whoami()

    error = info.value
    assert str(error) == f"cannot reach the registry at {url} (connection refused)"
    assert (error.url, error.reason, error.sent) == (url, "connection refused", False)
    assert isinstance(error, PubsubmlError) and isinstance(error, ConnectionError)
    assert isinstance(error.__cause__, httpx.ConnectError)


def test_an_answer_that_never_comes_is_a_timeout_naming_its_seconds(silent_url: str) -> None:
    with RegistryClient(silent_url, "psm_x", timeout=0.2, retries=0) as client:
        with pytest.raises(RegistryUnreachableError) as read:
            client.list_sites()
        with pytest.raises(RegistryUnreachableError) as post:
            client.add_site("clinic", epsilon_budget=1.0, delta_budget=1e-5)
        with pytest.raises(RegistryUnreachableError) as download:
            client.download_weights("0" * 32)

    assert str(read.value) == f"the registry at {silent_url} did not answer (timed out after 0.2 s)"
    assert read.value.sent and isinstance(read.value.__cause__, httpx.ReadTimeout)
    assert str(post.value).endswith("; the POST request may have been carried out")
    assert "did not answer (timed out after 0.2 s)" in str(download.value)


def test_a_long_poll_waits_its_own_time_before_timing_out(silent_url: str) -> None:
    with RegistryClient(silent_url, "psm_x", timeout=0.2, retries=0) as client:
        with pytest.raises(RegistryUnreachableError, match=r"timed out after 0\.5 s"):
            client.poll("sub", timeout=0.3)


def test_a_url_without_http_is_unreachable_with_httpx_reason() -> None:
    with RegistryClient("ftp://127.0.0.1:9", "psm_x", retries=0) as client:
        with pytest.raises(RegistryUnreachableError, match="cannot reach the registry at ftp://"):
            client.health()
