"""Group commit: concurrent publishes queue behind a commit in progress and commit together, each
request getting its own outcome; a lone publish commits at once."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from sqlalchemy import select

from pubsubml.errors import PrivacyBudgetExceededError
from pubsubml.registry.infrastructure.group_commit import GroupCommitter
from pubsubml.registry.services.publish_checks import Publication
from pubsubml.registry.services.publish_commit import commit_group, group_committer
from pubsubml.registry.tables import ModelRow
from registry.services.conftest import Env, env  # noqa: F401  (the fixture)


def _held_committer(
    site_env: Env, waiting: int, *, max_group: int = 16
) -> GroupCommitter[Publication]:
    """A committer of ``site_env``'s publications whose first group's commit is held until
    ``waiting`` publications queue behind it."""
    first = threading.Event()
    committers: list[GroupCommitter[Publication]] = []

    def held_commit_group(store: Any, pubs: Any, staged: Any) -> Any:
        if not first.is_set():
            first.set()
            deadline = time.monotonic() + 20
            while len(committers[0]._queue) < waiting and time.monotonic() < deadline:
                time.sleep(0.01)
        return commit_group(site_env.db, store, site_env.lock, pubs, staged)

    committers.append(GroupCommitter(held_commit_group, max_group=max_group))
    return committers[0]


def _run(committer: GroupCommitter[Publication], site_env: Env, pubs: list[Any]) -> list[Any]:
    out: list[Any] = [None] * len(pubs)

    def one(i: int) -> None:
        try:
            out[i] = committer.commit(pubs[i], site_env.store)
        except Exception as exc:
            out[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(pubs))]
    threads[0].start()
    time.sleep(0.2)  # the first one leads and is held
    for t in threads[1:]:
        t.start()
    for t in threads:
        t.join(60)
    return out


def test_a_lone_publish_commits_at_once(env: Env) -> None:  # noqa: F811
    committer = group_committer(env.db, env.lock)
    pub = env.prepare(env.artifacts("a", seed=501), "a")
    assert isinstance(pub, Publication)

    assert committer.commit(pub, env.store) is True
    assert committer.commit(pub, env.store) is False  # already published
    assert committer.groups == [1, 1]


def test_publishes_that_arrive_during_a_commit_commit_together(
    env: Env,  # noqa: F811
) -> None:
    committer = _held_committer(env, waiting=5)
    pubs = [env.prepare(env.artifacts(s, seed=510 + k), s) for k, s in enumerate("abcabc")]

    results = _run(committer, env, pubs)

    assert results == [True] * 6
    assert committer.groups == [1, 5]
    with env.db.read() as s:
        assert len(s.execute(select(ModelRow.id)).all()) == 6


def test_each_request_gets_its_own_outcome(
    env: Env,  # noqa: F811
) -> None:
    env.add_site("poor", epsilon=1.0)  # one Gaussian release fits, not two
    committer = _held_committer(env, waiting=3)
    arts = [
        env.artifacts("a", seed=520),
        env.artifacts("poor", seed=521),
        env.artifacts("poor", seed=522),
        env.artifacts("b", seed=523),
    ]
    pubs = [env.prepare(a, a.card.publisher) for a in arts]

    results = _run(committer, env, pubs)

    assert results[0] is True and results[1] is True and results[3] is True
    assert isinstance(results[2], PrivacyBudgetExceededError)
    assert committer.groups == [1, 3]


def test_groups_are_capped_and_the_lead_passes_on(
    env: Env,  # noqa: F811
) -> None:
    committer = _held_committer(env, waiting=4, max_group=2)
    pubs = [env.prepare(env.artifacts(s, seed=530 + k), s) for k, s in enumerate("abcab")]

    results = _run(committer, env, pubs)

    assert results == [True] * 5
    assert committer.groups == [1, 2, 2]


def test_the_group_size_is_checked(env: Env) -> None:  # noqa: F811
    with pytest.raises(ValueError, match="max_group"):
        group_committer(env.db, env.lock, max_group=0)
