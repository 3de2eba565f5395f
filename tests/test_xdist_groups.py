"""``--dist loadgroup`` with ``xdist_groups``: a group's tests run on one worker, ids unchanged."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

TESTS = Path(__file__).parent


def run_pytest(folder: Path, *options: str, **env: str) -> subprocess.CompletedProcess[str]:
    """pytest in ``folder`` with xdist and ``xdist_groups`` alone (no other plugin autoloads)."""
    command = [sys.executable, "-m", "pytest", "-p", "xdist.plugin", "-p", "xdist_groups"]
    done = subprocess.run(
        [*command, "-p", "no:cacheprovider", "-q", *options],
        cwd=folder,
        env={
            **os.environ,
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return done


GROUPED = """
import os
from pathlib import Path

import pytest


def record(name: str) -> None:
    Path(os.environ["WHERE"], name).write_text(os.environ["PYTEST_XDIST_WORKER"])
"""


def test_the_tests_of_a_group_run_on_one_worker_and_keep_their_ids(tmp_path: Path) -> None:
    where, temp = tmp_path / "where", tmp_path / "tmp"
    where.mkdir()
    temp.mkdir()
    # Group "g": four tests marked in their module, three marked by a hook at collection (as
    # tests/conftest.py marks the ray tests); eight others, each a scope of its own.
    (tmp_path / "test_marked.py").write_text(
        GROUPED
        + textwrap.dedent("""
            @pytest.mark.xdist_group("g")
            @pytest.mark.parametrize("i", range(4))
            def test_marked(i: int) -> None:
                record(f"marked-{i}")


            @pytest.mark.parametrize("i", range(8))
            def test_free(i: int) -> None:
                record(f"free-{i}")
            """)
    )
    (tmp_path / "test_hooked.py").write_text(
        GROUPED
        + textwrap.dedent("""
            @pytest.mark.parametrize("i", range(3))
            def test_hooked(i: int) -> None:
                record(f"hooked-{i}")
            """)
    )
    (tmp_path / "conftest.py").write_text(
        textwrap.dedent("""
            import pytest


            @pytest.hookimpl(tryfirst=True)
            def pytest_collection_modifyitems(items):
                for item in items:
                    if item.name.startswith("test_hooked"):
                        item.add_marker(pytest.mark.xdist_group("g"))
            """)
    )
    done = run_pytest(
        tmp_path, "-n", "2", "--dist", "loadgroup", "-rA", TMPDIR=str(temp), WHERE=str(where)
    )
    assert "15 passed" in done.stdout
    workers = {p.name: p.read_text() for p in where.iterdir()}
    assert len(workers) == 15
    group = {w for name, w in workers.items() if not name.startswith("free")}
    assert len(group) == 1, workers
    assert "@" not in done.stdout  # ids as collected: no group suffix
    assert "PASSED test_hooked.py::test_hooked[0]" in done.stdout
    assert not list(temp.glob("xdist-groups*"))  # the controller's folder of records is removed


def test_outside_xdist_the_hooks_do_nothing(tmp_path: Path) -> None:
    (tmp_path / "test_one.py").write_text(
        "import pytest\n\n\n@pytest.mark.xdist_group('g')\ndef test_one() -> None:\n    pass\n"
    )
    temp = tmp_path / "tmp"
    temp.mkdir()
    done = run_pytest(tmp_path, TMPDIR=str(temp))
    assert "1 passed" in done.stdout
    assert not list(temp.glob("xdist-groups*"))  # no folder without workers
