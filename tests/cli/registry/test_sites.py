"""``pubsubml site ...`` against a real registry: add, list, data-chunk scopes, token rotation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import Result


def _add_d(invoke: Callable[..., Result], artifacts: Any, tmp_path: Path) -> str:
    key_file = tmp_path / "d.pub"
    key_file.write_text(artifacts.public_key("d"))
    r = invoke(["site", "add", "d", "--epsilon", "10", "--public-key", str(key_file)])
    assert r.exit_code == 0, r.output
    token: str = r.stdout.strip().splitlines()[-1]
    assert token.startswith("psm_")
    return token


def test_site_add_prints_a_token_and_refuses_a_taken_name(
    invoke: Callable[..., Result], artifacts: Any, tmp_path: Path, server: dict[str, Any]
) -> None:
    _add_d(invoke, artifacts, tmp_path)
    r = invoke(["site", "add", "d", "--epsilon", "10", "--roles", "subscriber"])
    assert r.exit_code == 1 and "already exists" in r.output
    r = invoke(["site", "list"], token=server["tokens"]["b"])
    assert r.exit_code == 0 and "poor" in r.output and "d" in r.stdout.split()


def test_site_scopes_register_and_list_only_for_the_site_itself(
    invoke: Callable[..., Result], artifacts: Any, tmp_path: Path, server: dict[str, Any]
) -> None:
    token = _add_d(invoke, artifacts, tmp_path)
    r = invoke(["site", "scopes", "d", "w1", "w2"], token=token)
    assert r.exit_code == 0 and "2 new of 2" in r.output and "w2" in r.stdout, r.output
    r = invoke(["site", "scopes", "d"], token=token)
    assert r.exit_code == 0 and r.stdout.split() == ["w1", "w2"]
    r = invoke(["site", "scopes", "d", "w3"], token=server["tokens"]["b"])
    assert r.exit_code == 1 and "may not register data chunks" in r.output
    assert invoke(["site", "scopes", "d"], token=token).stdout.split() == ["w1", "w2"]


def test_rotated_token_replaces_the_old_one_and_revoking_ends_it(
    invoke: Callable[..., Result], artifacts: Any, tmp_path: Path
) -> None:
    token = _add_d(invoke, artifacts, tmp_path)
    r = invoke(["site", "rotate-token", "d", "--expires-in-days", "30"], token=token)
    assert r.exit_code == 0, r.output
    rotated = r.stdout.strip().splitlines()[-1]
    r = invoke(["site", "scopes", "d"], token=token)
    assert r.exit_code == 1 and "invalid token" in r.output
    r = invoke(["site", "revoke-token", "d"], token=rotated)
    assert r.exit_code == 0 and "revoked" in r.output
    r = invoke(["site", "scopes", "d"], token=rotated)
    assert r.exit_code == 1 and "revoked" in r.output
