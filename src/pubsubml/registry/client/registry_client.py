"""``RegistryClient``: the :class:`~pubsubml.hub.Hub` protocol over HTTP.

Methods written against a :class:`~pubsubml.hub.Hub` run unchanged against a deployed registry
(DESIGN.md, "Simulation and deployment share method code").  Requests that are safe to repeat
(reads, and publish, which is idempotent per weights digest) are retried on connection errors
with exponential back-off; a subscription is retried only when the connection could not be
opened at all, so it is never created twice.  Error answers raise the same :mod:`pubsubml.errors`
classes the server raised, and a request that got no answer (connection refused, unknown host,
timeout, connection lost, once the retries are spent) raises
:class:`~pubsubml.errors.RegistryUnreachableError`, with httpx's error as its cause.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from pubsubml.artifacts.card import ModelCard
from pubsubml.artifacts.signing import public_key_from_base64
from pubsubml.errors import DigestMismatchError
from pubsubml.hub import FeedItem
from pubsubml.registry.client.wire_format import (
    _CHUNK,
    _RETRYABLE,
    Progress,
    _card,
    _multipart,
    _plain,
    _raise_for,
    _unreachable,
    default_tls_context,
)
from pubsubml.schema import Channel, Feature

__all__ = ["RegistryClient"]


class RegistryClient:
    """HTTP client of the registry, implementing :class:`~pubsubml.hub.Hub`.

    Parameters
    ----------
    base_url : str
        E.g. ``"http://127.0.0.1:8000"``.
    token : str
        A site token (from ``pubsubml site add``) or the admin token.
    timeout : float, default=30
        Seconds per request (long polls add their own wait).
    retries : int, default=3
        Extra attempts after a connection error.
    http_client : httpx.Client, optional
        Use this client (e.g. FastAPI's ``TestClient``) instead of opening one.

    Examples
    --------
    >>> client = RegistryClient("http://127.0.0.1:9", "psm_x", retries=0)
    >>> client.base_url
    'http://127.0.0.1:9'
    >>> client.close()
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        http_client: httpx.Client | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.retries = retries
        self._headers = {"Authorization": f"Bearer {token}"}
        self._owned = http_client is None
        self._http = http_client or httpx.Client(
            base_url=self.base_url, timeout=timeout, verify=default_tls_context()
        )

    # ---- plumbing -----------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection pool (if this client opened it)."""
        if self._owned:
            self._http.close()

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(
        self,
        method: str,
        path: str,
        *,
        retry_on: tuple[type[Exception], ...] = _RETRYABLE,
        timeout: float | None = None,
        body: Callable[[], Iterable[bytes]] | None = None,
        headers: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        url = f"{self.base_url}/v1{path}"
        for attempt in range(self.retries + 1):
            try:
                response = self._http.request(
                    method,
                    url,
                    headers={**self._headers, **(headers or {})},
                    timeout=timeout or self.timeout,
                    content=None if body is None else body(),
                    **kwargs,
                )
            except httpx.TransportError as exc:
                if isinstance(exc, retry_on) and attempt < self.retries:
                    time.sleep(min(2.0, 0.1 * 2**attempt))
                    continue
                raise _unreachable(self.base_url, method, exc, timeout or self.timeout) from exc
            _raise_for(response)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._request(method, path, **kwargs).json()

    # ---- Hub protocol -------------------------------------------------------------------
    def publish(
        self,
        card: ModelCard,
        weights: bytes,
        *,
        visible_to: Sequence[str] | None = None,
        progress: Progress | None = None,
    ) -> str:
        """Publish a signed card and its weights; returns the model id (idempotent).

        ``visible_to`` limits the model to those sites (default: every site).
        """
        return str(
            self.publish_model(card, weights, visible_to=visible_to, progress=progress)["model_id"]
        )

    def publish_model(
        self,
        card: ModelCard,
        weights: bytes,
        *,
        visible_to: Sequence[str] | None = None,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Like :meth:`publish`, returning the registry's model summary (``created`` says if new)."""
        ctype, length, chunks = _multipart(
            card.to_json().encode(), bytes(weights), visible_to, progress
        )
        result: dict[str, Any] = self._json(
            "POST",
            "/models",
            body=chunks,
            headers={"Content-Type": ctype, "Content-Length": str(length)},
        )
        return result

    def subscribe(
        self,
        site: str,
        channel: Channel | str,
        *,
        task: str,
        classes: Sequence[Any] | None = None,
    ) -> str:
        """Subscribe ``site`` to ``channel``; returns the subscription id."""
        text = str(channel) if isinstance(channel, Channel) else str(Channel.parse(channel))
        payload = {
            "site": site,
            "channel": text,
            "task": task,
            "classes": None if classes is None else [_plain(c) for c in classes],
        }
        body = self._json(
            "POST",
            "/subscriptions",
            json=payload,
            retry_on=(httpx.ConnectError, httpx.ConnectTimeout),
        )
        return str(body["id"])

    def poll(
        self, subscription_id: str, *, after: int = 0, timeout: float = 0.0, limit: int = 100
    ) -> list[FeedItem]:
        """Feed items with cursor > ``after``, oldest first; waits up to ``timeout`` s (long poll)."""
        body = self._json(
            "GET",
            f"/subscriptions/{subscription_id}/models",
            params={"after": after, "timeout": timeout, "limit": limit},
            timeout=self.timeout + timeout,
        )
        return [
            FeedItem(int(i["cursor"]), str(i["model_id"]), _card(i["card"])) for i in body["items"]
        ]

    def fetch(self, model_id: str, *, progress: Progress | None = None) -> tuple[ModelCard, bytes]:
        """The card and the weights of a model (the weights' digest is checked against the card)."""
        card = ModelCard.from_json(self._request("GET", f"/models/{model_id}/card").content)
        weights = self.download_weights(model_id, progress=progress)
        digest = hashlib.sha256(weights).hexdigest()
        if digest != card.weights_sha256:
            raise DigestMismatchError(
                f"downloaded weights of {model_id} have SHA-256 {digest}, the card says {card.weights_sha256}"
            )
        return card, weights

    def report_contributions(self, subscriber: str, scores: Mapping[str, float]) -> None:
        """Record ``subscriber``'s normalized contribution score per model id."""
        self._json(
            "POST",
            "/contributions",
            json={
                "subscriber": subscriber,
                "scores": {str(k): float(v) for k, v in scores.items()},
            },
            retry_on=(httpx.ConnectError, httpx.ConnectTimeout),
        )

    # ---- feeds --------------------------------------------------------------------------
    def iter_models(
        self,
        subscription_id: str,
        *,
        after: int = 0,
        wait: float = 30.0,
        idle_stop: float | None = None,
    ) -> Iterator[FeedItem]:
        """Iterate the subscription's feed forever by long polling (resumes from ``after``).

        ``idle_stop`` ends the iteration after that many seconds without a new item.
        """
        last = time.monotonic()
        while True:
            items = self.poll(subscription_id, after=after, timeout=wait)
            for item in items:
                after = item.cursor
                yield item
            if items:
                last = time.monotonic()
            elif idle_stop is not None and time.monotonic() - last >= idle_stop:
                return

    def stream_models(self, subscription_id: str, *, after: int = 0) -> Iterator[FeedItem]:
        """Iterate the feed over Server-Sent Events, reconnecting from the last cursor seen."""
        cursor = after
        while True:
            try:
                with self._http.stream(
                    "GET",
                    f"{self.base_url}/v1/subscriptions/{subscription_id}/stream",
                    params={"after": cursor},
                    headers=self._headers,
                    timeout=httpx.Timeout(self.timeout, read=None),
                ) as response:
                    if response.status_code >= 400:
                        response.read()
                        _raise_for(response)
                    data = ""
                    for line in response.iter_lines():
                        if line.startswith("data: "):
                            data = line[6:]
                        elif line == "" and data:
                            item = json.loads(data)
                            data = ""
                            cursor = int(item["cursor"])
                            yield FeedItem(cursor, str(item["model_id"]), _card(item["card"]))
            except _RETRYABLE:
                time.sleep(0.2)
            except httpx.TransportError as exc:
                raise _unreachable(self.base_url, "GET", exc, self.timeout) from exc

    # ---- other resources ----------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        """``/v1/health`` (no authentication needed)."""
        result: dict[str, Any] = self._json("GET", "/health")
        return result

    def whoami(self) -> dict[str, Any]:
        """The caller's kind (``admin`` or ``site``), name and roles."""
        result: dict[str, Any] = self._json("GET", "/whoami")
        return result

    def add_site(
        self,
        name: str,
        *,
        roles: str = "both",
        public_key: str | None = None,
        epsilon_budget: float,
        delta_budget: float,
    ) -> dict[str, Any]:
        """Register a site (admin token); the answer's ``token`` is shown only once."""
        payload = {
            "name": name,
            "roles": roles,
            "public_key": public_key,
            "epsilon_budget": epsilon_budget,
            "delta_budget": delta_budget,
        }
        result: dict[str, Any] = self._json(
            "POST", "/sites", json=payload, retry_on=(httpx.ConnectError, httpx.ConnectTimeout)
        )
        return result

    def list_sites(self) -> list[dict[str, Any]]:
        """Every site."""
        return list(self._json("GET", "/sites")["sites"])

    def trusted_keys(self) -> dict[str, Ed25519PublicKey]:
        """Public keys of every registered publisher, by key id (for ``PublishedModel.load``)."""
        return {
            s["key_id"]: public_key_from_base64(s["public_key"])
            for s in self.list_sites()
            if s.get("public_key") and s.get("key_id")
        }

    def add_features(self, features: Iterable[Feature]) -> list[Feature]:
        """Add features to the dictionary (admin token); returns those that were new."""
        payload = {"features": [f.model_dump(mode="json") for f in features]}
        body = self._json("POST", "/features", json=payload)
        return [Feature.model_validate(f) for f in body["features"]]

    def list_features(self) -> list[Feature]:
        """The feature dictionary."""
        return [Feature.model_validate(f) for f in self._json("GET", "/features")["features"]]

    def list_models(self, **filters: Any) -> list[dict[str, Any]]:
        """Models the caller may see (filters: publisher, task, features, min_epsilon, max_epsilon,
        max_delta, after, limit)."""
        params = {k: v for k, v in filters.items() if v is not None}
        return list(self._json("GET", "/models", params=params)["models"])

    def get_model(self, model_id: str) -> dict[str, Any]:
        """One model's summary with its card."""
        result: dict[str, Any] = self._json("GET", f"/models/{model_id}")
        return result

    def download_weights(self, model_id: str, *, progress: Progress | None = None) -> bytes:
        """The weights of a model, streamed."""
        for attempt in range(self.retries + 1):
            try:
                with self._http.stream(
                    "GET", f"{self.base_url}/v1/models/{model_id}/weights", headers=self._headers
                ) as response:
                    if response.status_code >= 400:
                        response.read()
                        _raise_for(response)
                    parts = []
                    for chunk in response.iter_bytes(_CHUNK):
                        parts.append(chunk)
                        if progress is not None:
                            progress(len(chunk))
                    return b"".join(parts)
            except httpx.TransportError as exc:
                if not isinstance(exc, _RETRYABLE) or attempt == self.retries:
                    raise _unreachable(self.base_url, "GET", exc, self.timeout) from exc
                time.sleep(min(2.0, 0.1 * 2**attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    def list_subscriptions(self) -> list[dict[str, Any]]:
        """The caller's subscriptions."""
        return list(self._json("GET", "/subscriptions")["subscriptions"])

    def rotate_token(self, site: str, *, expires_in_days: int | None = None) -> str:
        """A new token for ``site`` (its own token or the admin's); the old one stops working."""
        body = self._json("POST", f"/sites/{site}/token", json={"expires_in_days": expires_in_days})
        return str(body["token"])

    def revoke_token(self, site: str) -> dict[str, Any]:
        """Revoke ``site``'s token until the administrator rotates it; returns the site."""
        result: dict[str, Any] = self._json("DELETE", f"/sites/{site}/token")
        return result

    def register_scopes(self, site: str, labels: Sequence[str]) -> list[str]:
        """Declare disjoint data chunks of ``site`` (its own token); returns the new labels."""
        body = self._json("POST", f"/sites/{site}/scopes", json={"scopes": list(labels)})
        return list(body["new"])

    def scopes(self, site: str) -> list[str]:
        """The data chunks ``site`` registered, oldest first."""
        return [s["label"] for s in self._json("GET", f"/sites/{site}/scopes")["scopes"]]

    def ledger(self, site: str) -> dict[str, Any]:
        """A site's privacy ledger (the site itself or the admin)."""
        result: dict[str, Any] = self._json("GET", f"/sites/{site}/ledger")
        return result

    def events(self, *, after: int = 0, timeout: float = 0.0) -> dict[str, Any]:
        """Registry events after a position (long poll)."""
        result: dict[str, Any] = self._json(
            "GET",
            "/events",
            params={"after": after, "timeout": timeout},
            timeout=self.timeout + timeout,
        )
        return result

    def contributions(
        self, *, model_id: str | None = None, subscriber: str | None = None
    ) -> list[dict[str, Any]]:
        """Stored contribution scores of models the caller may see."""
        params = {k: v for k, v in {"model_id": model_id, "subscriber": subscriber}.items() if v}
        return list(self._json("GET", "/contributions", params=params)["contributions"])
