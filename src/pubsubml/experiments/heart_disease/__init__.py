"""Fed-Heart-Disease (UCI Heart Disease at four hospitals, :mod:`pubsubml.data.heart_disease`).

:mod:`.flamby_reference` holds FLamby's published benchmark results for this task and FLamby's
training hyperparameters (du Terrail et al., NeurIPS 2022 Datasets and Benchmarks Track).
"""

__all__: list[str] = []
