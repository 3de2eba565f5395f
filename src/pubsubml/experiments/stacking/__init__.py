"""The evaluation of personalization by stacking (pfl-stacking.txt §4, Appendix A).

:mod:`.models` (clients and their models), :mod:`.protocol` (the evaluation protocol),
:mod:`.experiments` (the tasks), :mod:`.grids` (options, sizes, grids), :mod:`.reporting` (the
experiments and their files), :mod:`.figures` and :mod:`.graphs` (tables, figures, contribution
graphs).
"""

__all__: list[str] = []
