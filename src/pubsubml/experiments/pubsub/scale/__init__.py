"""PubSub-ML with many Hyperplane sites (pubsub-ml.txt §8.2–8.3, appendices B and C).

* :mod:`.hyperplane`: the sites (Table 3); :mod:`.sizes`: the sizes of a run (:class:`ScaleSizes
  <pubsubml.experiments.pubsub.scale.sizes.ScaleSizes>`);
* :mod:`.many_publishers`: one fold of model selection (§8.2.3) and of the number of publishers
  (app. B), with the DP-FL baselines of :mod:`.fl_baselines`;
* :mod:`.executor_tasks` and :mod:`.publishers_scale`: n publishers and n subscribers on an
  executor (app. B at the paper's range);
* :mod:`.noisy`: pure-noise publishers (§8.2.5); :mod:`.streams`: data streams (§8.3.3);
* :mod:`.reports` and :mod:`.experiments`: the tables, figures and the registered experiments.
"""

__all__: list[str] = []
