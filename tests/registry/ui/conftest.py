"""Fixtures of the dashboard tests: registries on SQLite with published models, a subscription
and contribution scores, and clients that log in like a browser.

The dashboard reads through the registry's service functions, whose storage behaviour the
contract suite checks on SQLite and PostgreSQL; its own tests run on SQLite only, to stay fast.
Tests that only read share one populated registry per session (``dashboard``); tests that
change it take a fresh one (``fresh_dashboard``).  The browser test uses ``seeded_server`` (a
real uvicorn server with content) and ``browser_factory`` (headless Chromium).
"""

from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from pubsubml.registry.app import create_app
from pubsubml.registry.infrastructure.database import Database

CSRF_RE = re.compile(r'name="csrf_token" value="([^"]+)"')


@pytest.fixture
def backend(request: pytest.FixtureRequest, tmp_path: Path, support: Any) -> Any:
    """SQLite only (see the module docstring)."""
    path = tmp_path / "registry.db"
    shutil.copy(request.getfixturevalue("sqlite_template"), path)
    return support.Backend("sqlite", f"sqlite:///{path}")


def csrf_of(html: str) -> str:
    """The CSRF token of the first form of a page."""
    found = CSRF_RE.search(html)
    assert found is not None, html[:500]
    return found.group(1)


@dataclass
class Dashboard:
    """A registry with content, and clients that log in to its dashboard.

    Sites a, b, c (both roles); a published a public model on (age, sex) and a model on
    (age, wbc) that only b may see, b a regression model on (bmi); c subscribes to
    ``age & sex | wbc`` and gave a's public model the score 0.7.
    """

    registry: Any
    models: dict[str, str]
    subscription: str
    admin_token: str

    @staticmethod
    def login(client: TestClient, token: str) -> Any:
        """Log ``client`` in with ``token`` through the form; returns the POST's answer."""
        page = client.get("/ui/login")
        assert page.status_code == 200, page.text
        return client.post("/ui/login", data={"token": token, "csrf_token": csrf_of(page.text)})

    def visitor(self, token: str | None = None) -> TestClient:
        """A fresh client (cookies of its own) on the same app, logged in with ``token``."""
        client = TestClient(self.registry.client.app, follow_redirects=False)
        if token is not None:
            answer = self.login(client, token)
            assert answer.status_code == 303, answer.text
        return client

    def site(self, name: str) -> TestClient:
        """A client logged in as site ``name``."""
        return self.visitor(self.registry.tokens[name])

    def admin(self) -> TestClient:
        """A client logged in as the administrator."""
        return self.visitor(self.admin_token)


def populate(registry: Any, artifacts: Any, admin_token: str) -> Dashboard:
    """Publish, subscribe and report as described in :class:`Dashboard`."""
    registry.add_features()
    for name in ("a", "b", "c"):
        registry.add_site(name)
    models = {}
    for key, site, visible, art in (
        ("public", "a", None, artifacts("a", features=("age", "sex"), seed=1)),
        ("private", "a", ["b"], artifacts("a", features=("age", "wbc"), seed=2)),
        ("regression", "b", None, artifacts("b", features=("bmi",), classes=None, seed=3)),
    ):
        answer = registry.publish(art, site=site, visible_to=visible)
        assert answer.status_code == 201, answer.text
        models[key] = answer.json()["model_id"]
    sub = registry.subscribe("c", "age & sex | wbc")
    scores = {"subscriber": "c", "scores": {models["public"]: 0.7}}
    answer = registry.client.post("/v1/contributions", json=scores, headers=registry.auth("c"))
    assert answer.status_code == 201, answer.text
    return Dashboard(registry=registry, models=models, subscription=sub, admin_token=admin_token)


@pytest.fixture(scope="session")
def ui_login() -> Any:
    """:meth:`Dashboard.login`: log a client in through the form."""
    return Dashboard.login


@pytest.fixture(scope="session")
def dashboard(
    tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path, artifacts: Any, support: Any
) -> Iterator[Dashboard]:
    """One populated registry for the tests that only read (do not change it)."""
    folder = tmp_path_factory.mktemp("dashboard")
    shutil.copy(sqlite_template, folder / "registry.db")
    settings = support.make_settings(f"sqlite:///{folder / 'registry.db'}", folder / "store")
    db = Database(settings.database_url)
    with contextlib.ExitStack() as stack:
        stack.callback(db.dispose)
        client = stack.enter_context(TestClient(create_app(settings, database=db)))
        registry = support.Registry(client=client, settings=settings, db=db, artifacts=artifacts)
        yield populate(registry, artifacts, support.ADMIN_TOKEN)


@pytest.fixture
def fresh_dashboard(registry_factory: Any, artifacts: Any, support: Any) -> Dashboard:
    """A populated registry of the test's own, for tests that change it."""
    return populate(registry_factory(), artifacts, support.ADMIN_TOKEN)


# ---- the browser test ---------------------------------------------------------------------
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
INSTALL_HINT = (
    "the browser test drives Debian's chromium and chromedriver at /usr/bin: install them with "
    "`apt-get install chromium chromium-driver`"
)


def start_browser(chromium: Path = CHROMIUM, chromedriver: Path = CHROMEDRIVER) -> Any:
    """Headless Chromium through chromedriver; fails (never skips), saying what to install,
    when either is missing."""
    missing = [str(p) for p in (chromium, chromedriver) if not p.is_file()]
    if missing:
        pytest.fail(f"{INSTALL_HINT} (missing: {', '.join(missing)})")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(chromium)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1280,1000",
    ):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(str(chromedriver)), options=options)


@pytest.fixture
def seeded_server(server: dict[str, Any], artifacts: Any, support: Any) -> dict[str, Any]:
    """The ``server`` fixture's registry (sites a, b, poor) with a subscriber-only site clinic,
    three models of a (one only for b), a regression model of b, subscriptions of a, b and
    clinic, and contribution scores; adds ``models`` (key to id) to the fixture's dict."""
    from pubsubml.privacy.events import DPEvent
    from pubsubml.registry.client import RegistryClient

    url, tokens = server["url"], server["tokens"]
    with RegistryClient(url, support.ADMIN_TOKEN) as admin:
        clinic_token = admin.add_site(
            "clinic", roles="subscriber", epsilon_budget=1.0, delta_budget=1e-5
        )["token"]
    a, b = RegistryClient(url, tokens["a"]), RegistryClient(url, tokens["b"])
    ids = {}
    for key, features, sigma, visible in (
        ("first", ("age", "sex"), 5.0, None),
        ("second", ("age", "wbc"), 3.0, ["b"]),
        ("third", ("age", "sex", "bmi"), 4.0, None),
    ):
        record = support.privacy_record([DPEvent(mechanism="gaussian", noise_multiplier=sigma)])
        art = artifacts("a", features=features, seed=len(ids) + 20, privacy=record)
        ids[key] = a.publish(art.card, art.weights, visible_to=visible)
    reg = artifacts("b", features=("bmi", "age"), classes=None, seed=30)
    ids["regression"] = b.publish(reg.card, reg.weights)
    b.subscribe("b", "age & sex | wbc", task="classification", classes=[0, 1])
    a.subscribe("a", "bmi", task="regression")
    b.report_contributions("b", {ids["first"]: 0.6, ids["second"]: 0.3})
    a.report_contributions("a", {ids["regression"]: 0.4})
    with RegistryClient(url, clinic_token) as clinic:
        clinic.subscribe("clinic", "age", task="classification", classes=[0, 1])
        clinic.report_contributions("clinic", {ids["first"]: 0.5, ids["third"]: 0.2})
    a.close()
    b.close()
    return {**server, "models": ids}


@pytest.fixture(scope="session")
def browser_factory() -> Any:
    """:func:`start_browser`; the caller quits the driver."""
    return start_browser
