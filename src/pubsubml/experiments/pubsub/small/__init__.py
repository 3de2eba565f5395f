"""The small subscriber: does a site with few rows gain by subscribing to DP models? (pubsub-ml.txt
§1, §8.1.1)

:mod:`.scenarios` draws the sites and the external test set; :mod:`.experiment` runs
``pubsub-small`` and :mod:`.ceiling` ``pubsub-small-ceiling``.
"""

__all__: list[str] = []
