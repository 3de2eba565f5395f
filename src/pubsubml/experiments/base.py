"""The experiment contract: ``Experiment(name, grid, run_fold, report)``, one per benchmark.

Every evaluation of the five papers is one :class:`Experiment`:

* ``grid(options)`` lists the parameter settings to run;
* ``run_fold(seed, fold, **setting)`` measures one fold of one seed under one setting and returns
  records (dicts), the rows of the raw table;
* ``report(table, out_dir, options)`` reduces the table (mean ± standard error with
  :func:`~pubsubml.experiments.reports.summarize`) and writes ``<out_dir>/<name>.{csv,md,png}`` with
  :func:`~pubsubml.experiments.reports.write_results`.

:meth:`Experiment.run` ties them together with :func:`~pubsubml.experiments.runner.run_grid`
(seeds × folds × settings, in a process pool with ``jobs > 1`` or on Ray).  The catalog
(:mod:`pubsubml.experiments.catalog`) registers each experiment once, and ``pubsubml bench NAME``
builds one command per entry with the same options everywhere: ``--seeds --folds --jobs
--executor --address --smoke --out-dir`` and the experiment's own :class:`Param` options.

An experiment whose measurement is not cross-validated (a simulation, a run scored on an external
test set) declares what its second index means in ``folds_help`` (repeats, or one run: ``folds=1``).

Examples
--------
>>> def one_fold(seed: int, fold: int, *, shift: float) -> list[dict]:
...     return [{"method": "m", "score": fold + shift}]
>>> def report(table, out_dir, options):
...     return []
>>> exp = Experiment(
...     "toy", "A toy.", grid=lambda o: [{"shift": o.params["shift"]}], run_fold=one_fold,
...     report=report, folds=3, params=(Param("shift", 0.5, "Added to every score."),),
... )
>>> exp.options(seeds=2).params["shift"], exp.options(shift=1.0).params["shift"]
(0.5, 1.0)
>>> exp.table(exp.options(seeds=2, progress=False))["score"].tolist()
[0.5, 1.5, 2.5, 0.5, 1.5, 2.5]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from pubsubml.experiments.executors import make_executor
from pubsubml.experiments.reports import check_out_dir
from pubsubml.experiments.runner import Record, run_grid

__all__ = ["Experiment", "Param", "RunOptions"]


@dataclass(frozen=True)
class Param:
    """An option of one experiment beyond the common ones (``--NAME`` on the command line).

    Parameters
    ----------
    name : str
        Python identifier; the option is ``--name`` with ``_`` written ``-``.
    default : object
        Its type (``int``, ``float``, ``str``, ``bool`` or ``Path``) is the option's type; ``None``
        needs ``kind``.
    help : str
        One line for ``--help``.
    choices : tuple, optional
        The allowed values.
    minimum : float, optional
        The smallest allowed value of a number.
    kind : type, optional
        The type when ``default`` is ``None``.
    """

    name: str
    default: Any
    help: str
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None
    kind: type | None = None

    @property
    def type(self) -> type:
        """The option's type."""
        return self.kind or type(self.default)

    def check(self, value: Any) -> Any:
        """``value`` converted to the option's type; ``ValueError`` when not allowed."""
        if value is None:
            if self.default is None:
                return None
            raise ValueError(f"--{self.flag} needs a value")
        if self.type is bool and not isinstance(value, bool):
            raise ValueError(f"--{self.flag} must be True or False, got {value!r}")
        try:
            converted: Any = value if isinstance(value, self.type) else self.type(value)
        except (TypeError, ValueError):
            raise ValueError(
                f"--{self.flag} must be a {self.type.__name__}, got {value!r}"
            ) from None
        if self.choices is not None and converted not in self.choices:
            allowed = ", ".join(repr(c) for c in self.choices)
            raise ValueError(f"--{self.flag} must be one of {allowed}, got {value!r}")
        if self.minimum is not None and converted < self.minimum:
            raise ValueError(f"--{self.flag} must be >= {self.minimum:g}, got {value!r}")
        return converted

    @property
    def flag(self) -> str:
        """The option's name on the command line, without the dashes."""
        return self.name.replace("_", "-")


@dataclass(frozen=True)
class RunOptions:
    """How to run an experiment: the common options and the experiment's own (``params``).

    Attributes
    ----------
    seeds : int
        Seeds ``0 … seeds-1``.
    folds : int
        Fold (or repeat) indices ``0 … folds-1`` per seed.
    jobs : int
        Worker processes for independent (setting, seed, fold) tasks; results do not depend on it.
    smoke : bool
        A seconds-long configuration whose numbers mean nothing beyond "the pipeline runs".
    progress : bool
        Show a progress bar.
    params : mapping
        The experiment's :class:`Param` values by name.
    executor : {"process", "ray"}
        Where the tasks run (:mod:`pubsubml.experiments.executors`); results do not depend on it.
    address : str, optional
        The Ray cluster to join; ``None`` starts Ray on this machine (ray only).
    """

    seeds: int = 1
    folds: int = 5
    jobs: int = 1
    smoke: bool = False
    progress: bool = True
    params: Mapping[str, Any] = field(default_factory=dict)
    executor: str = "process"
    address: str | None = None


@dataclass(frozen=True)
class Experiment:
    """One benchmark: what to run (``grid``, ``run_fold``) and what to write (``report``).

    Parameters
    ----------
    name : str
        The command (``pubsubml bench NAME``) and the stem of the files it writes.
    summary : str
        One line for ``pubsubml bench --help``, citing the paper's figure or table.
    grid : callable
        ``grid(options) -> [setting, ...]``, the keyword arguments of ``run_fold``.
    run_fold : callable
        ``run_fold(seed, fold, **setting) -> [record, ...]``; a top-level function (a process pool
        pickles it).  Records may not redefine ``seed``, ``fold`` or a setting's keys.
    report : callable
        ``report(table, out_dir, options) -> [path, ...]``: summarizes and writes the files.
    seeds, folds : int
        Defaults of ``--seeds`` and ``--folds``.
    smoke_seeds, smoke_folds : int, optional
        Defaults of ``--seeds`` and ``--folds`` with ``--smoke`` when they differ (a smoke run of
        an experiment whose default is the paper's 10 seeds runs one).
    folds_help : str
        What ``--folds`` means for this experiment.
    min_folds, max_folds : int
        The allowed range of ``--folds`` (at least 2 for a K-fold split; ``max_folds=1`` for an
        experiment that has no folds).
    fold_aliases : tuple of str
        Other names of ``--folds`` (e.g. ``"repeats"`` where the paper calls them repeats).
    params : tuple of Param
        The experiment's own options.
    check : callable, optional
        ``check(options)`` raises ``ValueError`` on a combination of options that does not apply.
    run_table : callable, optional
        ``run_table(options) -> DataFrame or None``: for options whose tasks depend on each other
        (a simulation that trains the publishers once, then runs every subscriber), the raw table,
        run on the options' executor by the callable itself; ``None`` means the grid as usual.
    """

    name: str
    summary: str
    grid: Callable[[RunOptions], Sequence[dict[str, Any]]]
    run_fold: Callable[..., list[Record]]
    report: Callable[[pd.DataFrame, Path, RunOptions], list[Path]]
    seeds: int = 1
    folds: int = 5
    smoke_seeds: int | None = None
    smoke_folds: int | None = None
    folds_help: str = "Cross-validation folds (the paper: 5)."
    min_folds: int = 2
    max_folds: int | None = None
    fold_aliases: tuple[str, ...] = ()
    params: tuple[Param, ...] = ()
    check: Callable[[RunOptions], None] | None = None
    run_table: Callable[[RunOptions], pd.DataFrame | None] | None = None

    def options(
        self,
        *,
        seeds: int | None = None,
        folds: int | None = None,
        jobs: int = 1,
        executor: str = "process",
        address: str | None = None,
        smoke: bool = False,
        progress: bool = True,
        **params: Any,
    ) -> RunOptions:
        """Checked :class:`RunOptions` with this experiment's defaults for what is not given.

        Raises
        ------
        ValueError
            A count below its minimum, an unknown executor, an address without ray, an unknown or
            invalid parameter, or a combination that ``check`` refuses.
        ImportError
            ``executor="ray"`` without Ray installed.
        """
        if seeds is None:
            seeds = self.smoke_seeds if smoke and self.smoke_seeds is not None else self.seeds
        seeds = int(seeds)
        if folds is None:
            folds = self.smoke_folds if smoke and self.smoke_folds is not None else self.folds
        folds = int(folds)
        if seeds < 1 or jobs < 1:
            raise ValueError(f"need --seeds >= 1 and --jobs >= 1, got {seeds} and {jobs}")
        flag = "/".join(f"--{n}" for n in ("folds", *self.fold_aliases))
        if self.max_folds == 1 and folds != 1:
            raise ValueError(f"{self.name} has no folds ({self.folds_help}); got --folds {folds}")
        if folds < self.min_folds or (self.max_folds is not None and folds > self.max_folds):
            top = "" if self.max_folds is None else f" and <= {self.max_folds}"
            raise ValueError(f"need {flag} >= {self.min_folds}{top}, got {folds}")
        known = {p.name: p for p in self.params}
        unknown = sorted(set(params) - set(known))
        if unknown:
            raise ValueError(f"{self.name} takes no option(s) {unknown}; it takes {sorted(known)}")
        values = {n: p.check(params.get(n, p.default)) for n, p in known.items()}
        try:
            make_executor(executor, int(jobs), address)  # checks the choice; starts nothing
        except ValueError as exc:
            raise ValueError(f"--executor/--address: {exc}") from None
        opts = RunOptions(
            seeds, folds, int(jobs), bool(smoke), bool(progress), values, executor, address
        )
        if self.check is not None:
            self.check(opts)
        return opts

    def table(self, options: RunOptions) -> pd.DataFrame:
        """Run every setting of ``grid(options)`` × seeds × folds (or ``run_table``); the raw
        records."""
        if self.run_table is not None:
            table = self.run_table(options)
            if table is not None:
                return table
        return run_grid(
            self.run_fold,
            seeds=options.seeds,
            folds=options.folds,
            grid=list(self.grid(options)),
            jobs=options.jobs,
            description=self.name,
            progress=options.progress,
            executor=options.executor,
            address=options.address,
        )

    def run(self, out_dir: Path | str, options: RunOptions | None = None) -> list[Path]:
        """Run the experiment and write its files to ``out_dir``; the paths written.

        ``out_dir`` is checked before anything runs, so a bad folder fails at once.
        """
        out = check_out_dir(out_dir)
        opts = options if options is not None else self.options()
        return self.report(self.table(opts), out, opts)
