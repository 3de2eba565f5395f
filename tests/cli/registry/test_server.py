"""``pubsubml registry serve|migrate|wait``: serving refuses a database that is not migrated,
``migrate`` upgrades it to this version's newest revision, and ``wait`` returns once a registry
answers or fails after its timeout."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.migrate import check_schema, head_revision

ADMIN_TOKEN = "cli-admin-token-" + "x" * 24


def test_cli_serve_refuses_unmigrated_and_migrate_upgrades(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from pubsubml.cli.registry import registry_app

    runner = CliRunner()
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    env = {"PUBSUBML_ADMIN_TOKEN": ADMIN_TOKEN}
    r = runner.invoke(registry_app, ["serve", "--db", url, "--store", str(tmp_path / "s")], env=env)
    assert (
        r.exit_code == 1 and "not migrated" in r.output and "pubsubml registry migrate" in r.output
    )
    r = runner.invoke(
        registry_app, ["serve", "--db", url], env={"PUBSUBML_ADMIN_TOKEN": "changeme"}
    )
    assert r.exit_code == 2 and "refusing to start" in r.output
    r = runner.invoke(registry_app, ["migrate", "--db", url])
    assert r.exit_code == 0 and head_revision() in r.output
    db = Database(url)
    assert check_schema(db) == head_revision()
    db.dispose()


def test_wait_exits_0_once_the_registry_answers(server: dict[str, Any]) -> None:
    from typer.testing import CliRunner

    from pubsubml.cli.registry import registry_app

    r = CliRunner().invoke(registry_app, ["wait", "--url", server["url"], "--timeout", "10"])

    assert r.exit_code == 0, r.output
    assert f"registry at {server['url']} is up" in r.stdout


def test_wait_gives_up_with_an_error_after_the_timeout(support: Any) -> None:
    from typer.testing import CliRunner

    from pubsubml.cli.registry import registry_app

    url = f"http://127.0.0.1:{support.free_port()}"  # nothing listens there

    r = CliRunner().invoke(registry_app, ["wait", "--url", url, "--timeout", "0.5"])

    assert r.exit_code == 1, r.output
    assert r.stdout == ""
    assert r.stderr.startswith("error:") and f"no registry answered at {url}" in r.stderr


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_serve_with_two_workers_shares_one_port_and_wakes_across_workers(
    backend: Any, tmp_path: Path, support: Any, artifacts: Any
) -> None:
    """Two worker processes answer on one port with one admin token and one store; a long poll
    answered by one worker is woken by a publish another worker committed."""
    import threading

    from pubsubml.registry.client import RegistryClient

    port = support.free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "pubsubml.cli.registry", "serve", "--db", backend.url),
            *("--store", str(tmp_path / "store"), "--port", str(port), "--workers", "2"),
            *("--log-level", "warning"),
        ],
        env={
            **os.environ,
            "PUBSUBML_ADMIN_TOKEN": support.ADMIN_TOKEN,
            "PUBSUBML_FEED_POLL_INTERVAL": "30",
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        support.wait_healthy(base, proc=proc)
        tokens = support.sites_a_and_b(base, artifacts)
        with RegistryClient(base, tokens["b"]) as b:
            sub = b.subscribe("b", "*", task="classification", classes=[0, 1])
            for _ in range(10):  # new connections, answered by either worker: one token
                r = httpx.get(f"{base}/v1/subscriptions/{sub}", headers=b_headers(tokens))
                assert r.status_code == 200
            answered: list[Any] = []

            def long_poll() -> None:
                answered.append((b.poll(sub, after=0, timeout=25), time.monotonic()))

            reader = threading.Thread(target=long_poll)
            started = time.monotonic()
            reader.start()
            time.sleep(1.0)
            published = []
            with RegistryClient(base, tokens["a"]) as a:
                for seed in range(4):  # new connections, spread over the workers
                    art = artifacts("a", seed=300 + seed)
                    published.append(a.publish_model(art.card, art.weights)["model_id"])
            reader.join(40)
        items, when = answered[0]
        assert items and items[0].model_id == published[0]
        assert when - started < 15.0  # woken by the commit, not by a re-read after 30 s
        with RegistryClient(base, tokens["b"]) as b:
            assert [i.model_id for i in b.poll(sub, after=0, limit=10)] == published
    finally:
        proc.terminate()
        proc.wait(20)


def b_headers(tokens: dict[str, str]) -> dict[str, str]:
    return {"Authorization": f"Bearer {tokens['b']}"}


def test_serve_refuses_jetstream_without_a_nats_server_and_passes_it_to_workers(
    tmp_path: Path,
) -> None:
    from typer.testing import CliRunner

    from pubsubml.cli.registry import registry_app
    from pubsubml.cli.registry.server import _worker_environment
    from pubsubml.registry.settings import RegistrySettings

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    env = {"PUBSUBML_ADMIN_TOKEN": ADMIN_TOKEN, "PUBSUBML_NATS_URL": ""}
    r = CliRunner().invoke(registry_app, ["serve", "--db", url, "--nats-jetstream"], env=env)
    assert r.exit_code == 2 and "nats_jetstream needs a NATS server" in r.output
    assert not (tmp_path / "cli.db").exists()  # refused before anything was created
    settings = RegistrySettings(
        database_url=url,
        store_dir=tmp_path / "s",
        admin_token=ADMIN_TOKEN,
        nats_url="nats://127.0.0.1:4222",
        nats_jetstream=True,
    )
    workers = RegistrySettings.from_env(_worker_environment(settings))
    assert workers.nats_url == settings.nats_url and workers.nats_jetstream
    assert not workers.allow_seeded_noise
    research = settings.model_copy(update={"allow_seeded_noise": True})
    assert RegistrySettings.from_env(_worker_environment(research)).allow_seeded_noise
