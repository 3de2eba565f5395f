"""Public feature metadata and subscription channels.

The consortium agrees on feature names, kinds, bounds, categories and default values at the
metadata level before any data moves (pubsub-ml.txt §3.2).  Everything here is *public*: bounds and
defaults are domain knowledge, never statistics of a site's private data, so using them to scale
inputs or to fill missing features leaks nothing (DESIGN.md, "Privacy is accounted").

:class:`FeatureSchema` validates and encodes DataFrames; :class:`Channel` is the subscription
channel F1 ∨ … ∨ Fk of pubsub-ml.txt §3.2.

* :mod:`~pubsubml.schema.features`: :class:`Feature` and :class:`FeatureSchema`, whose frame
  validation checks each column with :mod:`~pubsubml.schema.column_checks`;
* :mod:`~pubsubml.schema.channels`: :class:`Channel`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pubsubml.lazy import attach

if TYPE_CHECKING:
    from pubsubml.schema.channels import Channel
    from pubsubml.schema.features import Category as Category
    from pubsubml.schema.features import Feature, FeatureSchema

__all__ = ["Channel", "Feature", "FeatureSchema"]

__getattr__, __dir__ = attach(__name__, __file__)
