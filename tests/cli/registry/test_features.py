"""``pubsubml features add|list`` against a real registry: the consortium's feature dictionary."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import Result


def test_adding_the_same_dictionary_again_changes_nothing(
    invoke: Callable[..., Result], support: Any, tmp_path: Path, server: dict[str, Any]
) -> None:
    feats = tmp_path / "features.json"
    feats.write_text(support.DICTIONARY.to_json())
    r = invoke(["features", "add", str(feats)])
    assert r.exit_code == 0 and "already present" in r.output
    r = invoke(["features", "list"], token=server["tokens"]["a"])
    assert r.exit_code == 0
    for name in support.DICTIONARY.names:
        assert name in r.stdout


def test_a_changed_feature_is_refused(
    invoke: Callable[..., Result], support: Any, tmp_path: Path
) -> None:
    data = json.loads(support.DICTIONARY.to_json())
    first = data["features"][0]
    if first.get("categories"):
        first["categories"] = [*first["categories"], "changed"]
    else:
        first["upper"] = float(first["upper"]) + 1.0
    feats = tmp_path / "changed.json"
    feats.write_text(json.dumps(data))
    r = invoke(["features", "add", str(feats)])
    assert r.exit_code == 1 and "already defined differently" in " ".join(r.output.split())


def test_a_missing_or_non_json_file_is_a_usage_error(
    invoke: Callable[..., Result], tmp_path: Path
) -> None:
    r = invoke(["features", "add", str(tmp_path / "absent.json")])
    assert r.exit_code == 2 and "does not exist" in r.output
    (tmp_path / "bad.json").write_text("{not json")
    r = invoke(["features", "add", str(tmp_path / "bad.json")])
    assert r.exit_code == 2 and "not JSON" in r.output
