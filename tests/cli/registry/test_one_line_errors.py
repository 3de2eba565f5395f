"""Every registry command fails with one line on standard error and a consistent exit status:
1 for a refused operation (a registry that does not answer, a database the server cannot use),
2 for bad usage (a bad feature file, a bad URL, a channel that does not parse), nothing written.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from typer.testing import CliRunner

from pubsubml.cli.commands import app
from pubsubml.cli.registry import registry_app

ADMIN_TOKEN = "one-line-admin-token-" + "z" * 24
HINT = 'start it with "pubsubml registry serve" or wait for it with "pubsubml registry wait'


def one_error_line(r: Result, code: int, *words: str) -> str:
    """Assert exit ``code``, nothing on stdout and exactly one ``error:`` line with ``words``."""
    assert r.exit_code == code, (r.exit_code, r.output)
    assert r.stdout == "", r.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


@pytest.fixture
def dead_url(support: Any) -> str:
    """A registry URL where nothing listens."""
    return f"http://127.0.0.1:{support.free_port()}"


@pytest.fixture
def offline(dead_url: str) -> Callable[..., Result]:
    """``offline(args)``: run ``pubsubml ARGS`` against ``dead_url`` with site and admin tokens."""
    runner = CliRunner()
    env = {
        "PUBSUBML_REGISTRY_URL": dead_url,
        "PUBSUBML_TOKEN": "psm_site-token",
        "PUBSUBML_ADMIN_TOKEN": ADMIN_TOKEN,
    }
    return lambda args: runner.invoke(app, [str(a) for a in args], env=env)


# ---- a registry that does not answer ------------------------------------------------------
CLIENT_COMMANDS = [
    ["pull", "0123abcd", "--into", "{tmp}/inbox"],
    ["subscribe", "age & sex"],
    ["budget"],
    ["models", "list"],
    ["site", "add", "clinic", "--epsilon", "1"],
    ["site", "list"],
    ["site", "rotate-token", "clinic"],
    ["site", "revoke-token", "clinic"],
    ["site", "scopes", "clinic", "chunk-1"],
    ["features", "add", "{tmp}/bounds.json"],
    ["features", "list"],
]


@pytest.mark.parametrize("args", CLIENT_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_every_client_command_says_in_one_line_that_the_registry_is_unreachable(
    offline: Callable[..., Result], dead_url: str, tmp_path: Path, args: list[str]
) -> None:
    (tmp_path / "bounds.json").write_text(
        json.dumps({"age": {"lower": 0, "upper": 1, "default": 0}})
    )
    before = sorted(tmp_path.iterdir())

    r = offline([a.format(tmp=tmp_path) for a in args])

    line = one_error_line(r, 1, f"cannot reach the registry at {dead_url} (connection refused)")
    assert HINT in line and f"--url {dead_url}" in line
    assert sorted(tmp_path.iterdir()) == before  # pull made no inbox


def test_publish_says_the_registry_is_unreachable_after_reading_the_artifact(
    offline: Callable[..., Result], dead_url: str, artifacts: Any, tmp_path: Path
) -> None:
    artifacts("a", seed=5).save(tmp_path / "card")

    r = offline(["publish", tmp_path / "card"])

    one_error_line(r, 1, f"cannot reach the registry at {dead_url}", HINT)
    r = offline(["publish", tmp_path / "absent"])
    one_error_line(r, 2, "holds no model artifact", "card.json")


def test_an_unreachable_registry_is_one_unwrapped_line_through_a_pipe(dead_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(PUBSUBML_REGISTRY_URL=dead_url, PUBSUBML_TOKEN="psm_site-token")

    done = subprocess.run(
        [sys.executable, "-m", "pubsubml", "budget"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )

    assert done.returncode == 1 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert len(lines[0]) > 80 and lines[0].endswith(f'"pubsubml registry wait --url {dead_url}"')


def test_a_url_that_is_not_http_is_bad_usage(offline: Callable[..., Result]) -> None:
    for url in ("127.0.0.1:8000", "ftp://127.0.0.1", "http://"):
        one_error_line(offline(["budget", "--url", url]), 2, "--url")


def test_a_registry_that_accepts_but_never_answers_times_out_in_one_line(
    support: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import typer

    from pubsubml.cli.registry.options import _errors
    from pubsubml.registry.client import RegistryClient

    with socket.socket() as silent:  # the kernel accepts connections; nobody ever answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        client = RegistryClient(url, "psm_x", timeout=0.3, retries=0)
        with pytest.raises(typer.Exit) as exited, _errors():
            client.subscribe("clinic", "age", task="classification")
        client.close()

    assert exited.value.exit_code == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"error: the registry at {url} did not answer (timed out after 0.3 s); the POST request "
        "may have been carried out"
    )


def test_wait_names_why_no_registry_answered(dead_url: str) -> None:
    r = CliRunner().invoke(registry_app, ["wait", "--url", dead_url, "--timeout", "0.3"])

    one_error_line(r, 1, f"no registry answered at {dead_url} in 0.3 s (connection refused)")


# ---- features add: the one format of feature definitions ----------------------------------
def test_features_add_takes_the_public_bounds_file_of_schema_infer(
    invoke: Callable[..., Result], server: dict[str, Any], tmp_path: Path
) -> None:
    bounds = tmp_path / "bounds.json"
    bounds.write_text(
        json.dumps(
            {
                "age": {"lower": 0, "upper": 100, "default": 50},
                "creatinine": {"lower": 0, "upper": 20, "default": 1, "description": "mg/dL"},
            }
        )
    )

    r = invoke(["features", "add", str(bounds)])

    assert r.exit_code == 0 and "1 feature(s) added, 1 already present" in r.stdout, r.output
    listed = invoke(["features", "list"], token=server["tokens"]["a"]).stdout
    assert "creatinine" in listed


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{not json", ["is not JSON"]),
        ('{"age": {"lower": 0}}', ["feature 'age'", "default is missing"]),
        ('{"features": [{"name": "ratio", "upper": 1, "default": 0}]}', ["feature 'ratio'"]),
        ("[]", ["holds no feature"]),
    ],
)
def test_a_bad_feature_file_is_one_line_exit_2_and_adds_nothing(
    invoke: Callable[..., Result],
    server: dict[str, Any],
    tmp_path: Path,
    text: str,
    words: list[str],
) -> None:
    before = invoke(["features", "list"], token=server["tokens"]["a"]).stdout
    bad = tmp_path / "bad.json"
    bad.write_text(text)

    one_error_line(invoke(["features", "add", str(bad)]), 2, str(bad), *words)
    one_error_line(invoke(["features", "add", str(tmp_path)]), 2, "is a folder")

    assert invoke(["features", "list"], token=server["tokens"]["a"]).stdout == before


# ---- server commands: a database they cannot use -----------------------------------------
@pytest.fixture
def missing_schema(pg_user: str) -> Iterator[tuple[str, str]]:
    """A schema name that does not exist and a database URL whose search_path names it."""
    name = f"nosuch_{uuid.uuid4().hex[:10]}"
    url = f"postgresql+psycopg://{pg_user}@127.0.0.1:5432/test?options=-csearch_path%3D{name}"
    yield name, url
    assert not _schema_exists(pg_user, name)  # nothing was written


def _schema_exists(user: str, name: str) -> bool:
    import psycopg

    with psycopg.connect(host="127.0.0.1", user=user, dbname="test") as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (name,)).fetchone()
    return found is not None


@pytest.mark.postgres
@pytest.mark.parametrize("command", [["migrate"], ["serve"], ["serve", "--migrate"]], ids=" ".join)
def test_a_search_path_schema_that_does_not_exist_is_one_line_with_its_create_statement(
    missing_schema: tuple[str, str], tmp_path: Path, command: list[str]
) -> None:
    name, url = missing_schema
    args = [*command, "--db", url, "--data-dir", str(tmp_path / "data")]

    r = CliRunner().invoke(registry_app, args, env={"PUBSUBML_ADMIN_TOKEN": ADMIN_TOKEN})

    one_error_line(r, 1, f"PostgreSQL schema '{name}'", f"`CREATE SCHEMA {name};`")
    assert not (tmp_path / "data").exists()


def test_a_database_server_that_does_not_answer_is_one_line(support: Any, tmp_path: Path) -> None:
    url = f"postgresql+psycopg://postgres@127.0.0.1:{support.free_port()}/test"
    env = {"PUBSUBML_ADMIN_TOKEN": ADMIN_TOKEN}
    for command in ("migrate", "serve"):
        r = CliRunner().invoke(registry_app, [command, "--db", url], env=env)
        one_error_line(r, 1, f"cannot use the database {url}", "onnection refused")
