"""``--dist loadgroup`` that keeps each test's ``xdist_group`` under pytest 9.2.

pytest-xdist 3.8 passes a test's group from the worker that collects it to the controller's
scheduler as an ``@group`` suffix written into the test's node id; pytest 9.2 keeps node ids in
another field, so the suffix is lost and every test is scheduled alone
(pytest-dev/pytest-xdist#1386).  Here each worker records its tests' groups in a file of a folder
the controller names, and the controller's scheduler reads them; the tests keep their ids.

Its hooks are imported by ``tests/conftest.py``; ``-p xdist_groups`` loads them elsewhere.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadGroupScheduling

GROUPS_DIR = "pubsubml_xdist_groups"
"""The ``workerinput`` key naming the folder where each xdist worker records its tests' groups."""

XDIST_GROUPS = pytest.StashKey[str]()
"""The controller's stash: that folder."""


class RecordedGroupScheduling(LoadGroupScheduling):
    """``--dist loadgroup`` reading each test's ``xdist_group`` from what the workers recorded
    (``pytest_collection_finish`` below); a test without one is a scope of its own."""

    def _split_scope(self, nodeid: str) -> str:
        if not hasattr(self, "_groups"):
            folder = Path(self.config.stash[XDIST_GROUPS])
            self._groups: dict[str, str] = {}
            for record in sorted(folder.glob("*.json")):
                self._groups.update(json.loads(record.read_text()))
        group = self._groups.get(nodeid)
        return f"group:{group}" if group is not None else super()._split_scope(nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The controller's scheduler for ``--dist loadgroup`` (see ``RecordedGroupScheduling``)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    return RecordedGroupScheduling(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """The controller tells each worker where to record its tests' groups."""
    config = node.config
    if XDIST_GROUPS not in config.stash:
        config.stash[XDIST_GROUPS] = tempfile.mkdtemp(prefix="xdist-groups")
    node.workerinput[GROUPS_DIR] = config.stash[XDIST_GROUPS]


def pytest_unconfigure(config: pytest.Config) -> None:
    """The controller removes the folder of records."""
    if XDIST_GROUPS in config.stash:
        shutil.rmtree(config.stash[XDIST_GROUPS], ignore_errors=True)


@pytest.hookimpl(tryfirst=True)  # before the worker tells the controller its collection
def pytest_collection_finish(session: pytest.Session) -> None:
    """On an xdist worker: record each grouped test's ``xdist_group`` for the controller."""
    workerinput: dict[str, Any] = getattr(session.config, "workerinput", {})
    folder = workerinput.get(GROUPS_DIR)
    if folder is None:
        return
    groups = {}
    for item in session.items:
        names = sorted(
            {
                str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                for m in item.iter_markers("xdist_group")
            }
        )
        if names:
            groups[item.nodeid] = "_".join(names)
    record = Path(folder) / f"{workerinput['workerid']}.json"
    temporary = record.with_suffix(".tmp")
    temporary.write_text(json.dumps(groups))
    temporary.replace(record)  # the controller never reads half a file
