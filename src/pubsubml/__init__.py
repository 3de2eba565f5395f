"""pubsubml: publish/subscribe machine learning with differential privacy.

Sites publish differentially private models to a registry; other sites subscribe to channels and
build personalized models from what they receive plus their own data (pubsub-ml.txt).
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
