"""``tests/`` mirrors ``src/``: every module of the package has a test module at the same path.

``src/pubsubml/<path>/<name>.py`` is tested in ``tests/<path>/test_<name>.py`` (``__main__.py`` in
``test_main.py``); package faces (``__init__.py``) and the database migrations are exempt.  A test
module may hold more than its module's unit tests (end-to-end tests of a feature live with the
module that carries it), but no module goes without one.
"""

from __future__ import annotations

from pathlib import Path

import pubsubml

SRC = Path(pubsubml.__file__).parent
TESTS = Path(__file__).parent


def expected_test_module(module: Path) -> Path:
    """Where the tests of ``module`` (a path under the package) live."""
    rel = module.relative_to(SRC)
    return TESTS / rel.parent / f"test_{rel.stem.strip('_')}.py"


def test_every_module_has_a_mirrored_test_module() -> None:
    modules = [
        p
        for p in sorted(SRC.rglob("*.py"))
        if p.name != "__init__.py" and "migrations" not in p.relative_to(SRC).parts
    ]
    assert len(modules) > 100
    missing = [str(m.relative_to(SRC)) for m in modules if not expected_test_module(m).is_file()]
    assert missing == [], f"modules without a test module in tests/: {missing}"


def test_every_test_folder_is_a_package_mirroring_a_source_folder() -> None:
    folders = [p for p in TESTS.rglob("*") if p.is_dir() and any(p.glob("test_*.py"))]
    for folder in folders:
        rel = folder.relative_to(TESTS)
        assert (SRC / rel).is_dir(), f"tests/{rel} has no source folder src/pubsubml/{rel}"
        if rel.parts:
            assert (folder / "__init__.py").is_file(), f"tests/{rel} lacks an __init__.py"
