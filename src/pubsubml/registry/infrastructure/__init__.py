"""The registry's infrastructure: what the services stand on, with no rule of the registry in it.

Grouped here by concept, under the services (which may import it; it imports no service, route
or page):

* the database: :mod:`~pubsubml.registry.infrastructure.database` (engine, sessions, the
  write queue and the feed clock), statements for many rows at once
  (:mod:`~pubsubml.registry.infrastructure.bulk_insert`) and reads on the event loop
  (:mod:`~pubsubml.registry.infrastructure.async_statements`);
* the published weights' bytes: the
  :class:`~pubsubml.registry.infrastructure.artifact_store.ArtifactStorage` contract with its two
  backends, files (:mod:`~pubsubml.registry.infrastructure.artifact_store`) and database rows
  (:mod:`~pubsubml.registry.infrastructure.database_artifact_store`), kept here rather than in a
  package of their own because they are storage without a rule of the registry, like the database,
  and the replicas' upload lock guarding them
  (:mod:`~pubsubml.registry.infrastructure.upload_lock`);
* concurrency: the leader/follower group commit
  (:mod:`~pubsubml.registry.infrastructure.group_commit`, which commits whatever its caller's
  function commits) and calls onto the server's event loop
  (:mod:`~pubsubml.registry.infrastructure.loop_calls`);
* the feed readers' wake-ups: in this process
  (:mod:`~pubsubml.registry.infrastructure.feed_notifier`) and across replicas, over PostgreSQL
  ``LISTEN``/``NOTIFY`` (:mod:`~pubsubml.registry.infrastructure.postgres_wakeups`) or NATS
  (:mod:`~pubsubml.registry.infrastructure.nats_wakeups`, with its subjects and JetStream
  streams in :mod:`~pubsubml.registry.infrastructure.nats_subjects` and
  :mod:`~pubsubml.registry.infrastructure.jetstream`).

The tables (:mod:`pubsubml.registry.tables`) and their migrations stay beside the services:
they are the registry's data model, not plumbing.
"""

from __future__ import annotations

__all__: list[str] = []
