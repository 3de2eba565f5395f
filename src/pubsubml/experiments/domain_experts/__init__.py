"""The evaluation of FL with private domain experts (fl-domain-experts.txt §4).

:mod:`.experiments` (§4.1, §4.2), :mod:`.mnist1d` (§4.3, Fig. 7) and :mod:`.incentives`
(§4.4.4, §7) define the experiments, :mod:`.compared` the methods they compare,
:mod:`.incentive_tables` and :mod:`.figures` their tables and figures; :mod:`.benches` gathers them
(``EXPERIMENTS``).
"""

__all__: list[str] = []
