"""Every package declares a sorted ``__all__`` whose names exist (scikit-learn's
``test_import_all_consistency``), and so does every module that declares one.

"Sorted" is the order ruff's RUF022 enforces (isort-style): SCREAMING_SNAKE_CASE constants first,
then CamelCase classes, then everything else, each group in natural order.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from types import ModuleType

import pytest

import pubsubml

# Entry points and generated code that must not run on import.
_NOT_IMPORTED = ("pubsubml.__main__",)
_NOT_IMPORTED_PARTS = ("migrations",)


def _module_names() -> list[str]:
    names = ["pubsubml"]
    for info in pkgutil.walk_packages(pubsubml.__path__, prefix="pubsubml."):
        if info.name in _NOT_IMPORTED or set(info.name.split(".")) & set(_NOT_IMPORTED_PARTS):
            continue
        names.append(info.name)
    return sorted(names)


def _isort_key(name: str) -> tuple[int, list[tuple[int, int | str]]]:
    if len(name) > 1 and name.isupper():
        group = 0
    elif name[:1].isupper():
        group = 1
    else:
        group = 2
    natural = [(0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", name) if p]
    return group, natural


def test_isort_key_orders_like_ruff() -> None:
    names = ["fit_many", "DPMLPClassifier", "PLD_RESOLUTION", "Task", "v10", "v2", "MAX"]

    assert sorted(names, key=_isort_key) == [
        "MAX",
        "PLD_RESOLUTION",
        "DPMLPClassifier",
        "Task",
        "fit_many",
        "v2",
        "v10",
    ]


def _is_package(module: ModuleType) -> bool:
    return hasattr(module, "__path__")


@pytest.mark.parametrize("name", _module_names())
def test_all_is_sorted_and_complete(name: str) -> None:
    module = importlib.import_module(name)

    exported = getattr(module, "__all__", None)

    if exported is None:
        assert not _is_package(module), f"package {name} has no __all__"
        return
    assert list(exported) == sorted(exported, key=_isort_key), f"{name}.__all__ is not sorted"
    assert len(set(exported)) == len(exported), f"{name}.__all__ has duplicates"
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ lists names it does not define: {missing}"
