"""The evaluation of the asynchronous DP learner (async-dp-cost-of-privacy.txt §5–6).

:mod:`.tasks` (regression tasks, vectorized replicate runs), :mod:`.experiments` (the figures),
:mod:`.collaboration` (value of collaboration, Fig. 6, and the forecast's calibration) and
:mod:`.reporting`.
"""

__all__: list[str] = []
