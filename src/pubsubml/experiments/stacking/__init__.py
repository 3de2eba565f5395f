"""The evaluation of personalization by stacking (pfl-stacking.txt §4, Appendix A).

:mod:`.models` (clients and their models), :mod:`.protocol` (the evaluation protocol),
:mod:`.experiments` (the runs), :mod:`.reporting` and :mod:`.figures` (grids, tables, figures).
"""

__all__: list[str] = []
