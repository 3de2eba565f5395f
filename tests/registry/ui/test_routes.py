"""Tests of pubsubml.registry.ui.routes: log-in and log-out, CSRF refusals, what each page shows
to each site and to the administrator, error pages; and, marked slow, the dashboard driven in a
real headless Chromium against a uvicorn server."""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.events import DPEvent
from pubsubml.registry.ui.routes import SECURITY_HEADERS

SVG_NS = "http://www.w3.org/2000/svg"
PAGES = ("/ui/sites", "/ui/models", "/ui/subscriptions", "/ui/graph", "/ui/sites/a/ledger")


def _models(html: str) -> set[str]:
    return set(re.findall(r'<tr data-model="([0-9a-f]{32})"', html))


def _cookie(answer: Any) -> str:
    (cookie,) = [v for k, v in answer.headers.multi_items() if k == "set-cookie"]
    return str(cookie)


# ---- log-in, log-out, CSRF ----------------------------------------------------------------
def test_pages_redirect_to_the_login_form_without_a_session(dashboard: Any) -> None:
    anonymous = dashboard.visitor()

    assert anonymous.get("/ui").headers["location"].endswith("/ui/")
    for path in ("/ui/", *PAGES, f"/ui/models/{dashboard.models['public']}"):
        answer = anonymous.get(path)
        assert answer.status_code == 303, path
        assert answer.headers["location"] == "/ui/login"
    form = anonymous.get("/ui/login")
    assert form.status_code == 200
    assert 'name="token"' in form.text and 'name="csrf_token"' in form.text


def test_login_sets_a_strict_httponly_cookie_and_logout_ends_the_session(dashboard: Any) -> None:
    client = dashboard.visitor()
    token = dashboard.registry.tokens["a"]

    answer = dashboard.login(client, token)

    assert answer.status_code == 303 and answer.headers["location"] == "/ui/sites"
    cookie = _cookie(answer)
    assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
    assert "secure" not in cookie.lower() and "path=/" in cookie.lower()
    assert token not in cookie
    page = client.get("/ui/sites")
    assert page.status_code == 200 and "site a" in page.text
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert csrf is not None
    out = client.post("/ui/logout", data={"csrf_token": csrf.group(1)})
    assert out.status_code == 303 and out.headers["location"] == "/ui/login"
    assert client.get("/ui/sites").status_code == 303
    assert "you are logged out" in client.get("/ui/login").text


def test_the_cookie_is_secure_when_the_settings_say_so(
    registry_factory: Any, ui_login: Any, support: Any
) -> None:
    registry = registry_factory(ui_cookie_secure=True)
    client = TestClient(registry.client.app, follow_redirects=False)

    answer = client.get("/ui/login")

    assert "; secure" in _cookie(answer).lower()
    # over plain HTTP the client keeps the cookie to itself: the form is refused
    assert ui_login(client, support.ADMIN_TOKEN).status_code == 403


def test_sessions_are_signed_with_the_settings_secret(
    dashboard: Any, registry_factory: Any
) -> None:
    client = dashboard.admin()
    other = registry_factory(ui_session_secret="2" * 40)  # same admin token, another secret
    elsewhere = TestClient(other.client.app, follow_redirects=False, cookies=client.cookies)

    assert client.get("/ui/sites").status_code == 200
    assert elsewhere.get("/ui/sites").status_code == 303


def test_a_bad_token_gets_401_and_no_session(dashboard: Any) -> None:
    client = dashboard.visitor()

    answer = dashboard.login(client, "psm_" + "x" * 43)

    assert answer.status_code == 401
    assert "invalid token" in answer.text
    assert client.get("/ui/sites").status_code == 303


def test_forms_without_the_sessions_csrf_token_are_refused(dashboard: Any) -> None:
    token = dashboard.registry.tokens["a"]
    client, other = dashboard.visitor(), dashboard.visitor()
    client.get("/ui/login")
    foreign = re.search(r'value="([^"]+)"', other.get("/ui/login").text)
    assert foreign is not None

    for data in ({"token": token}, {"token": token, "csrf_token": foreign.group(1)}):
        answer = client.post("/ui/login", data=data)
        assert answer.status_code == 403 and "CSRF" in answer.text
    assert client.get("/ui/sites").status_code == 303
    logged_in = dashboard.site("a")
    assert logged_in.post("/ui/logout", data={}).status_code == 403
    assert logged_in.get("/ui/sites").status_code == 200


def test_an_altered_cookie_is_no_session(dashboard: Any) -> None:
    client = dashboard.site("a")
    (cookie,) = list(client.cookies.jar)
    client.cookies.set(cookie.name, "x" + str(cookie.value)[1:], path="/")

    assert client.get("/ui/sites").status_code == 303


def test_a_revoked_token_ends_the_session_with_the_reason(registry: Any, ui_login: Any) -> None:
    client = TestClient(registry.client.app, follow_redirects=False)
    ui_login(client, registry.tokens["a"])
    assert client.get("/ui/sites").status_code == 200

    revoked = registry.client.delete("/v1/sites/a/token", headers=registry.admin)
    assert revoked.status_code == 200, revoked.text

    answer = client.get("/ui/models")
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/login"
    assert "was revoked" in client.get("/ui/login").text


# ---- authorization per page ---------------------------------------------------------------
def test_sites_page_shows_budget_bars_of_readable_ledgers_only(dashboard: Any) -> None:
    as_a = dashboard.site("a").get("/ui/sites")
    as_admin = dashboard.admin().get("/ui/sites")

    assert as_a.status_code == as_admin.status_code == 200
    assert as_a.text.count('<svg class="bar"') == 1
    assert as_a.text.count("private to the site") == 2
    assert as_admin.text.count('<svg class="bar"') == 3
    for name in ("a", "b", "c"):
        assert f'data-site="{name}"' in as_a.text


def test_a_site_reads_its_own_ledger_only(dashboard: Any) -> None:
    a, admin = dashboard.site("a"), dashboard.admin()

    own = a.get("/ui/sites/a/ledger")
    assert own.status_code == 200
    assert own.text.count('<circle class="release"') == 2  # a's two releases
    other = a.get("/ui/sites/b/ledger")
    assert other.status_code == 403 and "may not read the privacy ledger" in other.text
    assert admin.get("/ui/sites/b/ledger").status_code == 200
    for client in (a, admin):
        assert client.get("/ui/sites/nobody/ledger").status_code == 404
        assert client.get("/ui/sites/%20bad/ledger").status_code == 404
    assert a.get("/ui/ledger").headers["location"] == "/ui/sites/a/ledger"


def _ledger_svg(html: str) -> ET.Element:
    """The ledger page's plot, parsed as XML."""
    found = re.search(r'<svg class="ledger-plot".*?</svg>', html, re.DOTALL)
    assert found is not None, html[:500]
    return ET.fromstring(found.group(0).replace("<svg ", f'<svg xmlns="{SVG_NS}" ', 1))


def test_ledger_page_plots_spent_epsilon_by_release_as_steps_from_zero(
    dashboard: Any, support: Any
) -> None:
    registry = dashboard.registry
    api = registry.client.get("/v1/sites/a/ledger", headers=registry.auth("a")).json()

    html = dashboard.site("a").get("/ui/sites/a/ledger").text

    svg = _ledger_svg(html)
    axis = svg.find(f"{{{SVG_NS}}}line")
    line = svg.find(f"{{{SVG_NS}}}polyline")
    assert axis is not None and line is not None
    xy = [tuple(map(float, p.split(","))) for p in line.attrib["points"].split()]
    assert xy[0] == (float(axis.attrib["x1"]), float(axis.attrib["y1"]))  # starts at 0
    assert len(xy) == 1 + 2 * len(api["releases"])  # level, then up, at each release
    assert all(xy[i][1] == xy[i - 1][1] for i in range(1, len(xy), 2))
    assert all(xy[i][0] == xy[i - 1][0] for i in range(2, len(xy), 2))
    circles = [c for c in svg.iter(f"{{{SVG_NS}}}circle") if c.attrib["class"] == "release"]
    assert [c.attrib["data-release"] for c in circles] == ["1", "2"]
    first, last = (float(c.attrib["data-epsilon"]) for c in circles)
    assert first == pytest.approx(compute_epsilon(list(support.EVENTS), support.DELTA))
    assert last == api["spent_epsilon"]  # the last step is the ledger's spent ε
    bottom = xy[0][1]
    assert (bottom - xy[-1][1]) / (bottom - xy[2][1]) == pytest.approx(last / first, rel=1e-3)


def test_pages_round_sigma_and_epsilon_and_keep_the_exact_values_on_hover(
    fresh_dashboard: Any, artifacts: Any, support: Any
) -> None:
    registry, sigma = fresh_dashboard.registry, 2.718281828
    record = support.privacy_record([DPEvent(mechanism="gaussian", noise_multiplier=sigma)])
    answer = registry.publish(artifacts("a", features=("age",), seed=9, privacy=record), site="a")
    assert answer.status_code == 201, answer.text
    model_id, eps = answer.json()["model_id"], answer.json()["epsilon"]
    spent = registry.client.get("/v1/sites/a/ledger", headers=registry.auth("a")).json()[
        "spent_epsilon"
    ]
    client = fresh_dashboard.site("a")

    ledger = client.get("/ui/sites/a/ledger").text
    model = client.get(f"/ui/models/{model_id}").text
    listed = client.get("/ui/models").text
    sites = client.get("/ui/sites").text

    rounded_sigma = f'<span class="rounded sigma" title="{sigma!r}">2.72</span>'
    assert f"σ={rounded_sigma}" in ledger and f'<td class="num">{rounded_sigma}</td>' in model
    rounded_spent = f'<span class="rounded epsilon" title="{spent!r}">{spent:.4f}</span>'
    assert f'<div class="value" id="spent">{rounded_spent}</div>' in ledger
    assert f'<td class="num spent">{rounded_spent}</td>' in sites
    rounded_eps = f'<span class="rounded epsilon" title="{eps!r}">{eps:.4f}</span>'
    assert f'<td class="num">{rounded_eps}</td>' in ledger  # the release's ε alone
    assert f'<div class="value" id="epsilon">{rounded_eps}</div>' in model
    assert f'<td class="num">{rounded_eps}</td>' in listed
    for html in (ledger, model, listed, sites):  # unrounded values only in titles and the SVG
        for value in (sigma, spent, eps):
            text = html.replace(f'title="{value!r}"', "").replace(f'data-epsilon="{value!r}"', "")
            text = re.sub(r"<title>[^<]*</title>", "", text)
            text = re.sub(r'<pre id="card-json">.*?</pre>', "", text, flags=re.DOTALL)
            assert repr(value) not in text


def test_ledger_and_model_pages_explain_neighbours_and_epsilon_alone(dashboard: Any) -> None:
    a = dashboard.site("a")

    ledger, model = (
        " ".join(a.get(path).text.split())  # whitespace as the browser shows it
        for path in ("/ui/sites/a/ledger", f"/ui/models/{dashboard.models['public']}")
    )

    for html in (ledger, model):
        assert '<details class="help" id="help-neighbours">' in html
        assert "add/remove</strong> neighbours differ by adding or removing one row" in html
        assert "a mixed composition is accounted for replace-one neighbours" in html
    assert 'this ledger\'s ε holds for <strong id="neighbouring">add/remove</strong>' in ledger
    assert 'this model\'s ε holds for <strong id="neighbouring">add/remove</strong>' in model
    assert '<details class="help" id="help-epsilon-alone">' in ledger
    assert "<strong>ε alone</strong> is a release's ε by itself, at its own δ" in ledger
    assert "at the site's δ = 1e-05" in ledger
    assert "An ε is no guarantee without its δ" in ledger


def test_models_page_lists_what_each_token_may_see(dashboard: Any) -> None:
    m = dashboard.models

    assert _models(dashboard.site("c").get("/ui/models").text) == {m["public"], m["regression"]}
    as_a = dashboard.site("a").get("/ui/models").text
    assert _models(as_a) == set(m.values())
    assert as_a.count('class="tag private"') == 1  # the publisher sees its restriction
    assert _models(dashboard.site("b").get("/ui/models").text) == set(m.values())
    assert _models(dashboard.admin().get("/ui/models").text) == set(m.values())


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("feature=wbc", {"private"}),
        ("feature=age&feature=sex", {"public"}),
        ("feature=age%2C+wbc", {"private"}),
        ("task=regression", {"regression"}),
        ("publisher=a", {"public", "private"}),
        ("publisher=nobody", set()),
        ("max_epsilon=0.001", set()),
        ("max_epsilon=100&task=classification", {"public", "private"}),
        ("feature=&task=&publisher=&max_epsilon=", {"public", "private", "regression"}),
    ],
)
def test_models_page_filters(dashboard: Any, query: str, expected: set[str]) -> None:
    answer = dashboard.site("b").get(f"/ui/models?{query}")

    assert answer.status_code == 200
    assert _models(answer.text) == {dashboard.models[k] for k in expected}


@pytest.mark.parametrize(
    "query",
    ["task=clustering", "max_epsilon=abc", "max_epsilon=-1", "feature=1x", "publisher=%3Cb%3E"],
)
def test_bad_filter_values_give_a_422_page(dashboard: Any, query: str) -> None:
    answer = dashboard.site("b").get(f"/ui/models?{query}")

    assert answer.status_code == 422
    assert answer.headers["content-type"].startswith("text/html")
    assert "Invalid request" in answer.text and "<b>" not in answer.text


def test_model_page_shows_the_card_its_events_and_the_recomputed_epsilon(
    dashboard: Any, support: Any
) -> None:
    private = dashboard.models["private"]

    answer = dashboard.site("b").get(f"/ui/models/{private}")

    assert answer.status_code == 200
    html = answer.text
    expected = compute_epsilon(list(support.EVENTS), support.DELTA)
    shown = f'<span class="rounded epsilon" title="{expected!r}">{expected:.4f}</span>'
    assert f'<div class="value" id="recomputed">{shown}</div>' in html
    assert html.count('<tr class="event">') == len(support.EVENTS)
    assert "<td>gaussian</td>" in html
    for feature in ("age", "wbc"):
        assert f"<tr><td>{feature}</td>" in html
    card = dashboard.registry.client.get(
        f"/v1/models/{private}/card", headers=dashboard.registry.auth("b")
    ).json()
    assert card["signature"] in html and card["weights_sha256"] in html


def test_a_model_the_site_may_not_see_is_not_found_like_an_unknown_one(dashboard: Any) -> None:
    c = dashboard.site("c")

    hidden = c.get(f"/ui/models/{dashboard.models['private']}")
    unknown = c.get(f"/ui/models/{'0' * 32}")
    malformed = c.get("/ui/models/not-a-model-id")

    assert hidden.status_code == unknown.status_code == malformed.status_code == 404
    assert "Not found" in hidden.text and "not found" in unknown.text
    assert hidden.text.replace(dashboard.models["private"], "0" * 32) == unknown.text


def test_subscriptions_page_shows_channels_to_their_site_and_the_administrator(
    dashboard: Any,
) -> None:
    sub, public = dashboard.subscription, dashboard.models["public"]

    as_c = dashboard.site("c").get("/ui/subscriptions").text
    as_a = dashboard.site("a").get("/ui/subscriptions").text
    as_admin = dashboard.admin().get("/ui/subscriptions").text

    assert f'data-subscription="{sub}"' in as_c and f'data-subscription="{sub}"' in as_admin
    assert f'data-subscription="{sub}"' not in as_a and 'id="no-subscriptions"' in as_a
    assert '<span class="tag">wbc</span>' in as_c and "<strong>∨</strong>" in as_c
    assert f'href="/ui/models/{public}"' in as_c


def test_graph_page_renders_the_contribution_graph(dashboard: Any) -> None:
    answer = dashboard.site("a").get("/ui/graph")

    assert answer.status_code == 200
    radius = dict(
        re.findall(
            r'<g class="node" data-site="(\w+)"[^>]*><circle [^>]* r="([\d.]+)"', answer.text
        )
    )
    assert radius == {"a": "30", "c": "8"}
    assert '<path class="edge"' in answer.text and "c → a: 0.7" in answer.text


# ---- errors and headers -------------------------------------------------------------------
def test_every_page_is_html_without_scripts_and_with_security_headers(dashboard: Any) -> None:
    admin = dashboard.admin()

    for path in (*PAGES, f"/ui/models/{dashboard.models['public']}", "/ui/login", "/ui/nope"):
        answer = admin.get(path)
        assert answer.status_code in (200, 404), path
        assert answer.headers["content-type"].startswith("text/html")
        assert "<script" not in answer.text.lower()
        for name, value in SECURITY_HEADERS.items():
            assert answer.headers[name] == value, (path, name)


def test_unknown_pages_and_methods_get_html_error_pages(dashboard: Any) -> None:
    client = dashboard.site("a")

    missing = client.get("/ui/nope")
    wrong_method = client.post("/ui/sites")
    too_long = client.post("/ui/login", data={"token": "x" * 600, "csrf_token": "y"})

    assert missing.status_code == 404 and "no such page" in missing.text
    assert wrong_method.status_code == 405
    assert too_long.status_code == 422 and "token" in too_long.text
    for answer in (missing, wrong_method, too_long):
        assert answer.headers["content-type"].startswith("text/html")


def test_the_dashboard_is_not_part_of_the_api_document(dashboard: Any) -> None:
    spec = dashboard.registry.client.get("/openapi.json").json()

    assert not [p for p in spec["paths"] if p.startswith("/ui")]


# ---- in a real browser --------------------------------------------------------------------
def _shoot(driver: Any, page: str) -> None:
    """Save a screenshot of the page when PUBSUBML_SCREENSHOTS names a folder."""
    folder = os.environ.get("PUBSUBML_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        assert driver.save_screenshot(str(Path(folder) / f"dashboard-{page}.png"))


def _go(driver: Any, element: Any, url_end: str) -> None:
    """Click ``element`` and wait until the browser shows a page whose URL ends so."""
    from selenium.webdriver.support.wait import WebDriverWait

    element.click()
    WebDriverWait(driver, 10).until(lambda d: d.current_url.endswith(url_end))
    WebDriverWait(driver, 10).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )


def _log_in(driver: Any, base: str, token: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(f"{base}/ui/login")
    driver.find_element(By.ID, "token").send_keys(token)
    _go(driver, driver.find_element(By.ID, "login"), "/ui/sites")


@pytest.mark.slow
def test_the_dashboard_in_headless_chromium(
    seeded_server: dict[str, Any], browser_factory: Any, support: Any
) -> None:
    from selenium.webdriver.common.by import By

    server, ids = seeded_server, seeded_server["models"]
    base = server["url"]
    driver = browser_factory()
    try:
        driver.get(f"{base}/ui/sites")
        assert driver.current_url == f"{base}/ui/login"
        _shoot(driver, "login")
        _log_in(driver, base, server["tokens"]["a"])
        own = driver.find_element(By.CSS_SELECTOR, 'tr[data-site="a"]')
        assert own.find_elements(By.CSS_SELECTOR, "svg.bar rect.spent")
        assert not driver.find_elements(By.CSS_SELECTOR, 'tr[data-site="b"] svg.bar')

        _go(driver, driver.find_element(By.LINK_TEXT, "Models"), "/ui/models")
        rows = driver.find_elements(By.CSS_SELECTOR, "#models tr[data-model]")
        assert {r.get_attribute("data-model") for r in rows} == set(ids.values())
        _shoot(driver, "models")
        driver.find_element(By.NAME, "feature").send_keys("wbc")
        _go(driver, driver.find_element(By.ID, "filter"), "max_epsilon=")
        rows = driver.find_elements(By.CSS_SELECTOR, "#models tr[data-model]")
        assert [r.get_attribute("data-model") for r in rows] == [ids["second"]]

        _go(driver, rows[0].find_element(By.CSS_SELECTOR, "a.model-link"), ids["second"])
        recomputed = float(driver.find_element(By.ID, "recomputed").text)
        registry_eps = float(driver.find_element(By.ID, "epsilon").text)
        assert recomputed == pytest.approx(registry_eps, rel=1e-3)
        assert len(driver.find_elements(By.CSS_SELECTOR, "#events tr.event")) == 1
        _shoot(driver, "model")

        _go(driver, driver.find_element(By.LINK_TEXT, "Ledger"), "/ui/sites/a/ledger")
        points = driver.find_element(By.CSS_SELECTOR, "polyline.cumulative")
        assert len(str(points.get_attribute("points")).split()) == 1 + 2 * 3  # three releases
        steps = driver.find_elements(By.CSS_SELECTOR, "svg.ledger-plot circle.release")
        assert [c.get_attribute("data-release") for c in steps] == ["1", "2", "3"]
        spent, budget = (float(driver.find_element(By.ID, i).text) for i in ("spent", "budget"))
        assert 0 < spent < budget == 50
        assert float(str(steps[-1].get_attribute("data-epsilon"))) == pytest.approx(spent, abs=5e-5)
        help_text = driver.find_element(By.CSS_SELECTOR, "#help-neighbours p")
        assert not help_text.is_displayed()
        driver.find_element(By.CSS_SELECTOR, "#help-neighbours summary").click()
        assert help_text.is_displayed() and "adding or removing one row" in help_text.text
        _shoot(driver, "ledger")

        _go(driver, driver.find_element(By.LINK_TEXT, "Subscriptions"), "/ui/subscriptions")
        assert len(driver.find_elements(By.CSS_SELECTOR, ".subscription")) == 1

        _go(driver, driver.find_element(By.LINK_TEXT, "Contribution graph"), "/ui/graph")
        nodes = driver.find_elements(By.CSS_SELECTOR, "svg.graph g.node")
        assert {n.get_attribute("data-site") for n in nodes} == {"a", "b", "clinic"}
        assert nodes[0].find_element(By.TAG_NAME, "circle").size["width"] > 20
        _shoot(driver, "graph")

        driver.get(f"{base}/ui/sites/b/ledger")
        assert "403" in driver.title and "may not read" in driver.page_source
        driver.get(f"{base}/ui/sites")
        _go(driver, driver.find_element(By.ID, "logout"), "/ui/login")
        assert "logged out" in driver.find_element(By.ID, "notice").text

        _log_in(driver, base, support.ADMIN_TOKEN)
        assert len(driver.find_elements(By.CSS_SELECTOR, "#sites svg.bar")) == 4
        _shoot(driver, "sites")
        _go(driver, driver.find_element(By.LINK_TEXT, "Subscriptions"), "/ui/subscriptions")
        assert len(driver.find_elements(By.CSS_SELECTOR, ".subscription")) == 3
        _shoot(driver, "subscriptions")
    finally:
        driver.quit()


def test_a_missing_browser_fails_with_instructions(browser_factory: Any) -> None:
    with pytest.raises(pytest.fail.Exception, match="apt-get install chromium chromium-driver"):
        browser_factory(chromium=Path("/nonexistent/chromium"))
