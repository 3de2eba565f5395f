"""Lazy package faces: every exported name resolves to its module's object, and importing one
module of a package no longer imports the rest of it (or the server, torch, the accountant)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

import pubsubml
from pubsubml.lazy import attach, type_checking_imports

SRC = Path(pubsubml.__file__).parent
LAZY_FACES = sorted(
    ".".join(("pubsubml", *p.parent.relative_to(SRC).parts))
    for p in SRC.rglob("__init__.py")
    if "attach(__name__, __file__)" in p.read_text(encoding="utf-8")
)


def test_the_lower_layers_and_the_methods_have_lazy_faces() -> None:
    for face in ("pubsubml.privacy", "pubsubml.artifacts", "pubsubml.registry", "pubsubml.schema"):
        assert face in LAZY_FACES
    assert "pubsubml.methods.pubsub" in LAZY_FACES and "pubsubml.learners" in LAZY_FACES


@pytest.mark.parametrize("face", LAZY_FACES)
def test_every_exported_name_is_its_modules_object(face: str) -> None:
    package = importlib.import_module(face)
    exports = type_checking_imports(package.__file__ or "")
    assert set(package.__all__) <= set(exports), "an exported name has no import to resolve it"
    for name in package.__all__:
        source, original = exports[name]
        assert source.startswith(face + ".")
        assert getattr(package, name) is getattr(importlib.import_module(source), original)
        assert name in dir(package)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        _ = package.no_such_name  # type: ignore[attr-defined]


def test_a_module_of_the_package_is_an_attribute_as_before() -> None:
    import pubsubml.privacy as privacy

    assert privacy.ledger is importlib.import_module("pubsubml.privacy.ledger")


def test_a_name_resolves_once_then_lives_in_the_package(tmp_path: Path) -> None:
    face = tmp_path / "face.py"
    face.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from json import dumps as to_json\n"
        "    from json import loads\n"
        "else:\n"
        "    from math import pi\n"
        "def helper(): pass\n"
    )
    assert type_checking_imports(face) == {"to_json": ("json", "dumps"), "loads": ("json", "loads")}
    module = types.ModuleType("lazy_face_for_test")
    sys.modules[module.__name__] = module
    try:
        getattr_, dir_ = attach(module.__name__, face)
        assert "to_json" in dir_() and "loads" in dir_()
        assert getattr_("to_json") is json.dumps
        assert vars(module)["to_json"] is json.dumps  # kept: later reads skip __getattr__
        with pytest.raises(AttributeError, match="has no attribute 'pi'"):
            getattr_("pi")
    finally:
        del sys.modules[module.__name__]


def _imported_after(statement: str) -> set[str]:
    code = (
        f"import sys, json\n{statement}\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return set(json.loads(done.stdout))


HEAVY = {"torch", "fastapi", "sqlalchemy", "dp_accounting", "sklearn", "onnxruntime", "ray"}


def test_a_registry_client_loads_without_the_server_torch_or_the_accountant() -> None:
    assert not _imported_after("from pubsubml.registry.client import RegistryClient") & HEAVY


def test_signing_and_privacy_events_load_alone() -> None:
    assert not _imported_after("import pubsubml.artifacts.signing") & HEAVY
    assert not _imported_after("from pubsubml.privacy.events import DPEvent") & HEAVY
    assert "dp_accounting" in _imported_after("from pubsubml.privacy import compute_epsilon")
