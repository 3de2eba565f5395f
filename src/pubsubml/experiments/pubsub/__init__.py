"""The PubSub-ML evaluation (pubsub-ml.txt §7–8), one subpackage per family of experiments.

What every family uses: :mod:`.consortium` (sites, scenarios and method settings),
:mod:`.site_models` (the publishers' models and the subscriber's own model) and :mod:`.compared`
(every method on one fold of one scenario).

* :mod:`.tabular`: the tabular stand-ins (Fig. 3, Table 5, Fig. 7, 10, 11);
* :mod:`.scale`: Hyperplane at scale (§8.2–8.3: Fig. 4, 6, 8, 9, Table 6);
* :mod:`.small`: the small subscriber (§1, §8.1.1).
"""

__all__: list[str] = []
