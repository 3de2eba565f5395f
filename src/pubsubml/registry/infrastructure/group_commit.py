"""Group commit of concurrent publishes: one transaction (and one database fsync) for many.

Each publish request prepares its publication alone (every check, in parallel); then, instead of
committing alone, it hands the publication to the process's :class:`GroupCommitter`.  The first
request that finds no commit in progress becomes the *leader*: it takes every publication queued
at that moment (at most ``max_group``) and commits them with the committer's ``commit_group``
function (the publish service's
:func:`~pubsubml.registry.services.publish_commit.commit_group`, bound to the database and the
upload lock by :func:`~pubsubml.registry.services.publish_commit.group_committer`) — one
transaction, the feed lock taken once, the re-checks read once for the group and one insert per
table for all its publications; one that fails its re-checks is left out alone.  Requests
arriving meanwhile queue up and are committed by the next leader, the first of them, as soon as
the current group has committed.  Nothing waits on a timer: a lone publish commits at once, and
under load the groups grow by themselves (the classic leader/follower group commit of database
logs).  Every request gets its own publication's outcome: published, already published, or its
error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from pubsubml.registry.infrastructure.artifact_store import ArtifactStorage, StagedArtifact

__all__ = ["CommitGroup", "GroupCommitter"]

P = TypeVar("P")

CommitGroup = Callable[
    [ArtifactStorage, Sequence[P], Sequence[StagedArtifact | None]], list[bool | BaseException]
]
"""Commits a group of publications into one store in one transaction: per publication, True
(published), False (already published) or its error."""


@dataclass(eq=False)
class _Pending(Generic[P]):
    pub: P
    store: ArtifactStorage
    staged: StagedArtifact | None
    wake: threading.Event = field(default_factory=threading.Event)
    result: bool | BaseException | None = None
    done: bool = False
    lead: bool = False


class GroupCommitter(Generic[P]):
    """Commits the publications of concurrent requests together (see the module docstring).

    Parameters
    ----------
    commit_group : callable
        ``commit_group(store, publications, staged)`` commits one group (:data:`CommitGroup`).
    max_group : int, default=16
        Most publications per transaction (1 commits each alone).

    Attributes
    ----------
    groups : list of int
        Sizes of the last groups committed (at most 1,000; for monitoring and tests).
    """

    def __init__(self, commit_group: CommitGroup[P], *, max_group: int = 16) -> None:
        if max_group < 1:
            raise ValueError(f"max_group must be >= 1, got {max_group}")
        self._commit_group = commit_group
        self.max_group = max_group
        self._mutex = threading.Lock()
        self._queue: list[_Pending[P]] = []
        self._leading = False
        self.groups: list[int] = []

    def commit(self, pub: P, store: ArtifactStorage, staged: StagedArtifact | None = None) -> bool:
        """Commit ``pub`` (its weights into ``store``) in the next group; True if published,
        False if already published.  A group holds publications to one store.

        ``staged``: the weights already written by
        :func:`~pubsubml.registry.services.publish_commit.stage_weights`, the caller holding the
        upload lock shared until this returns; without it the leader writes them.  A file that does
        not end up committed is removed.

        Raises
        ------
        Exception
            The publication's own error (conflict, budget, store or database failure).
        """
        item = _Pending(pub, store, staged)
        with self._mutex:
            self._queue.append(item)
            if not self._leading:
                self._leading = item.lead = True
        while True:
            if item.lead:
                item.lead = False
                self._lead()
            if item.done:
                break
            item.wake.wait()
            item.wake.clear()
        if isinstance(item.result, BaseException):
            raise item.result
        return bool(item.result)

    def _lead(self) -> None:
        """Commit one group (it holds the leader's own publication), then pass the lead on."""
        with self._mutex:
            store = self._queue[0].store
            group = [p for p in self._queue if p.store is store][: self.max_group]
            self._queue = [p for p in self._queue if p not in group]
        try:
            results = self._commit_group(store, [p.pub for p in group], [p.staged for p in group])
        except BaseException as exc:  # not an Exception (interrupt): every member gets it
            results = [exc] * len(group)
            raise
        finally:
            for item, result in zip(group, results, strict=True):
                item.result, item.done = result, True
                item.wake.set()
            with self._mutex:
                self.groups = [*self.groups[-999:], len(group)]
                if self._queue:
                    successor = self._queue[0]
                    successor.lead = True
                    successor.wake.set()
                else:
                    self._leading = False
