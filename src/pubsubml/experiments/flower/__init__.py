"""Our federated loop side by side with Flower's (:mod:`.parity`, ``pubsubml bench flower-parity``)."""

__all__: list[str] = []
