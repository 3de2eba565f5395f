"""The PubSub-ML evaluation (pubsub-ml.txt §7–8).

* tabular stand-ins (Fig. 3, Table 5, Fig. 7, 10, 11): :mod:`.consortium` (sites and settings),
  :mod:`.scenarios`, :mod:`.models`, :mod:`.compared` (every method on one fold) and
  :mod:`.tabular` (the runs);
* Hyperplane at scale (§8.2–8.3): :mod:`.hyperplane`, :mod:`.selection`, :mod:`.scale_fl`,
  :mod:`.noisy`, :mod:`.streams`, :mod:`.scale_reporting` and :mod:`.scale` (the runs);
* the small subscriber (§1, §8.1.1): :mod:`.small`, :mod:`.small_experiment`,
  :mod:`.small_ceiling`.
"""

__all__: list[str] = []
