"""Fed-Heart-Disease (UCI Heart Disease at four hospitals, :mod:`pubsubml.data.heart_disease`).

* :mod:`.flamby_reference`: FLamby's published benchmark results for this task and FLamby's
  training hyperparameters (du Terrail et al., NeurIPS 2022 Datasets and Benchmarks Track);
* :mod:`.splits`, :mod:`.methods`: the rows and the models of the ``heart-disease`` benchmark;
* :mod:`.flamby`: FLamby's protocol (one fixed split; our loop, Flower and FLamby's published
  rows side by side, in the table of :mod:`.flamby_summary`); :mod:`.hospitals`: the hospitals as they are (repeated splits, PubSub-ML
  against Own and DP-FedAvg, a new small clinic);
* :mod:`.experiment`: ``pubsubml bench heart-disease``, both protocols in one command, with its
  options (:mod:`.options`) and result files (:mod:`.reports`).
"""

__all__: list[str] = []
