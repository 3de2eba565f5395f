"""The saved-model format of PubSub-ML: a customized model C^s on the subscriber's disk, no pickle.

* :mod:`~pubsubml.methods.pubsub.storage.format`: the folder's files, manifest and limits;
* :mod:`~pubsubml.methods.pubsub.storage.writer`: :func:`save_customizer`;
* :mod:`~pubsubml.methods.pubsub.storage.reader`: :func:`load_customizer`, verified.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pubsubml.lazy import attach

if TYPE_CHECKING:
    from pubsubml.methods.pubsub.storage.format import MANIFEST_FILE, SavedOwnModel
    from pubsubml.methods.pubsub.storage.reader import load_customizer
    from pubsubml.methods.pubsub.storage.writer import save_customizer

__all__ = ["MANIFEST_FILE", "SavedOwnModel", "load_customizer", "save_customizer"]

__getattr__, __dir__ = attach(__name__, __file__)
