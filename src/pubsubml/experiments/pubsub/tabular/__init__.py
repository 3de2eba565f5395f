"""PubSub-ML on tabular stand-ins of the paper's data (pubsub-ml.txt §8.1–8.3: Fig. 3, Table 5,
Fig. 7, 10, 11).

:mod:`.scenarios` builds the multi-site scenarios S1–S4 and the regression from offline data;
:mod:`.experiments` runs, summarizes and writes ``pubsub-scenarios``, ``pubsub-privacy``,
``pubsub-models``, ``pubsub-regression`` and ``pubsub-nonprivate``.
"""

__all__: list[str] = []
