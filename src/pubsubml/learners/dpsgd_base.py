"""The DP-SGD estimators' shared machinery: validation, hyperparameter resolution, training.

Every DP-SGD learner of pubsubml (the networks :class:`~pubsubml.learners.mlp.DPMLPClassifier`
and :class:`~pubsubml.learners.mlp.DPMLPRegressor`, the linear models
:class:`~pubsubml.learners.dpsgd_linear.DPSGDLogisticRegression` and
:class:`~pubsubml.learners.dpsgd_linear.DPSGDLinearRegression`) is a fully connected network on
the stacked DP-SGD engine of :mod:`pubsubml.privacy.dpsgd`; a linear model is the network without
hidden layers.  So Poisson sampling, noise calibration, the DP events, :func:`fit_many` and the
safetensors/ONNX export work the same for all of them.

Hyperparameters left at ``"auto"`` are resolved at ``fit`` from public inputs only (the number
of rows, the privacy target and the encoded width) by
:func:`~pubsubml.learners.dpsgd_defaults.dp_sgd_defaults`
(:mod:`~pubsubml.learners.dpsgd_hyperparameters`), and recorded in ``hyperparameters_``.

**Centred inputs.**  The encoded columns lie in [0, 1] by the public bounds.  Training runs on
them shifted by the midpoint of that range, :data:`INPUT_CENTER` = ½, so every column lies in
[−½, ½]; afterwards the shift is folded into the first layer's bias (b ← b − ½·W·1), so
``module_`` takes the [0, 1] encoding as before and predicts exactly what the trained network
did.  The shift is a constant of the public encoding, never a statistic of the private rows.  It
matters under DP-SGD: with uncentred inputs each per-sample gradient ∂ℓ/∂W = δ·xᵀ carries a
common component along the all-½ direction that only the bias needs; clipping to C spends most of
every row's norm on it, so the class-discriminating part is small against the noise σC.  On
MNIST-1D (40 columns of public bounds ±6, i.e. encoded values near ½) a publisher of 2,000 rows
at ε = 1 scored 0.14 (logistic) / 0.16 (network) uncentred and 0.25 / 0.28 centred.  Centring
inputs is also the classical advice for gradient training (LeCun et al., "Efficient BackProp",
1998, §4.3).

References
----------
pubsub-ml.txt §7.2 (Table 4) and §8 (DP-SGD [1], Abadi et al. 2016); Y. LeCun, L. Bottou,
G. Orr and K.-R. Müller, "Efficient BackProp", in Neural Networks: Tricks of the Trade, 1998,
§4.3 (inputs centred at zero).
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABCMeta, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Literal, Self, cast

import numpy as np
import torch
from sklearn.base import BaseEstimator, clone
from sklearn.utils.validation import check_is_fitted

from pubsubml.learners.base import SchemaInputMixin
from pubsubml.learners.dpsgd_defaults import DPSGDDefaults
from pubsubml.learners.dpsgd_hyperparameters import (
    AUTO,
    DEPRECATED,
    Backend,
    RunSettings,
    check_dp,
    planned_events,
    privacy_target,
    run_config,
)
from pubsubml.learners.dpsgd_seeds import noise_sources, site_generators
from pubsubml.privacy.accountants.release import release_epsilon
from pubsubml.privacy.dpsgd import DPSGDConfig, MLPStack, TrainResult, train_dp_stacked
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.noise import check_noise_seed
from pubsubml.schema import FeatureSchema

__all__ = [
    "AUTO",
    "INPUT_CENTER",
    "centred",
    "fit_many",
    "fold_input_center",
    "unfold_input_center",
]

#: The midpoint of the public [0, 1] encoding: training inputs are shifted by it (module notes).
INPUT_CENTER = 0.5


@dataclasses.dataclass
class _Plan:
    """Everything one site's training needs, validated before any attribute changes."""

    X: Any
    Z: np.ndarray
    target: torch.Tensor
    classes: np.ndarray | None
    layer_sizes: tuple[int, ...]
    config: DPSGDConfig
    hyperparameters: DPSGDDefaults
    delta: float


class _DPSGDBase(SchemaInputMixin, BaseEstimator, metaclass=ABCMeta):
    """Shared parameters, validation and training of the DP-SGD estimators.

    Subclasses set the class variables below, store their parameters in a keyword-only
    ``__init__`` and implement :meth:`_targets`.  The parameters are declared here once.  A
    linear model is the network without hidden layers, always private: the class attributes
    ``hidden_layer_sizes``, ``activation`` and ``dp`` below are its architecture, which the
    networks take as parameters instead.  ``target_epsilon`` and ``target_delta`` are the
    networks' former names of ``epsilon`` and ``delta``
    (:func:`~pubsubml.learners.dpsgd_hyperparameters.privacy_target`).
    """

    _loss: ClassVar[str]
    _model: ClassVar[Literal["linear", "mlp"]]
    _task: ClassVar[Literal["classification", "regression"]]
    schema: FeatureSchema | None
    epochs: Any
    batch_size: Any
    learning_rate: Any
    optimizer: Any
    max_grad_norm: Any
    epsilon: float | None
    delta: float
    noise_multiplier: float | None
    accountant: str
    random_state: Any
    noise_seed: int | None
    hidden_layer_sizes: Sequence[int] = ()
    activation: str = "tanh"  # a network without hidden layers applies no activation
    dp: bool = True
    target_epsilon: float | str | None = DEPRECATED
    target_delta: float | str = DEPRECATED
    module_: torch.nn.Sequential

    # ---- the run's settings (no attribute changes) ------------------------------------------
    def _privacy_target(self) -> tuple[float | None, float]:
        """(ε, δ) from ``epsilon``/``delta`` or, with a warning, their former names."""
        return privacy_target(self.epsilon, self.delta, self.target_epsilon, self.target_delta)

    def _settings(self) -> RunSettings:
        epsilon, delta = self._privacy_target()
        return RunSettings(
            owner=type(self).__name__,
            model=self._model,
            task=self._task,
            hidden_layer_sizes=self.hidden_layer_sizes,
            activation=self.activation,
            dp=self.dp,
            epochs=self.epochs,
            batch_size=self.batch_size,
            learning_rate=self.learning_rate,
            optimizer=self.optimizer,
            max_grad_norm=self.max_grad_norm,
            epsilon=epsilon,
            delta=delta,
            noise_multiplier=self.noise_multiplier,
            accountant=self.accountant,
        )

    def _hidden(self) -> tuple[int, ...]:
        return tuple(self.hidden_layer_sizes)

    def _activation_name(self) -> str:
        return self.activation

    def _private(self) -> bool:
        return check_dp(self.dp)

    def _config(self, n: int, width: int) -> tuple[DPSGDConfig, DPSGDDefaults]:
        """The validated run configuration (σ included) for ``n`` rows of ``width`` columns."""
        return run_config(self._settings(), n, width)

    def planned_privacy_events(self, n_samples: int, n_features: int) -> list[DPEvent]:
        """The DP events that ``fit`` on ``n_samples`` rows will record, computed without data.

        They depend only on public inputs: the parameters, n and the encoded width.  Used to
        account a procedure before it runs (e.g.
        :class:`~pubsubml.learners.hyperparameter_search.PrivateHyperparameterSearch`).

        Parameters
        ----------
        n_samples : int
        n_features : int
            Columns of ``X``; ignored when a schema is set (its encoded width is used).

        Returns
        -------
        list of DPEvent
            One ``subsampled_gaussian`` event, or none when the model is not private.

        Raises
        ------
        InvalidPrivacyParameterError, ValueError
            As :meth:`fit` for the same parameters.
        """
        return planned_events(self._settings(), self.schema, n_samples, n_features)

    def _poor_score(self) -> bool:
        # DP noise, or very few epochs, legitimately cost accuracy on scikit-learn's small checks.
        return bool(self.dp) or not (isinstance(self.epochs, int) and self.epochs >= 10)

    # ---- validation (no attribute changes) ----------------------------------------------------
    @abstractmethod
    def _targets(self, y: Any, n: int) -> tuple[torch.Tensor, np.ndarray | None, int]:
        """Training targets, the classes (classifier) and the number of network outputs."""

    def _plan(self, X: Any, y: Any) -> _Plan:
        self._private()  # validates ``dp``
        settings = self._settings()
        Z = self._encode_new(X)
        target, classes, n_out = self._targets(y, Z.shape[0])
        config, chosen = run_config(settings, Z.shape[0], Z.shape[1])
        sizes = (Z.shape[1], *(int(h) for h in self._hidden()), n_out)
        return _Plan(X, Z, target, classes, sizes, config, chosen, float(settings.delta))

    # ---- training --------------------------------------------------------------------------
    def _fold_output(self, module: torch.nn.Sequential) -> torch.nn.Sequential:
        """Fold an output transform into the last Linear layer (identity here)."""
        return module

    def _commit(self, plan: _Plan, result: TrainResult) -> None:
        """Set the fitted attributes from what the engine reports it ran."""
        events = result.events
        delta = plan.delta if events else 0.0
        backend = cast(Backend, self.accountant)
        epsilon = release_epsilon(events, delta, backend) if events else math.inf
        assert isinstance(result.module, torch.nn.Sequential)
        self._commit_input(plan.X, plan.Z)
        self.module_ = self._fold_output(fold_input_center(result.module))
        if plan.classes is not None:
            self.classes_ = plan.classes
        self.hyperparameters_ = plan.hyperparameters
        self.noise_multiplier_ = result.noise_multiplier
        self.sample_rate_ = result.sample_rate
        self.steps_ = result.steps
        self.privacy_events_: list[DPEvent] = events
        self.noise_ = result.noise if events else None
        self.accountant_ = self.accountant
        self.epsilon_ = epsilon
        self.delta_ = delta

    def fit(self, X: Any, y: Any) -> Self:
        """Train the model; nothing changes if any check fails.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self

        Raises
        ------
        InvalidPrivacyParameterError
            A private run with both or neither of ``epsilon`` and ``noise_multiplier``, ε ≤ 0,
            δ ∉ (0, 1/n), σ ≤ 0, C ≤ 0, an unknown accountant, privacy parameters with
            dp=False, or both a parameter and its former name (``target_epsilon``,
            ``target_delta``).
        LabelError
            Labels outside ``classes``, or a private classifier without declared ``classes``.
        DataValidationError
            NaN or infinite values, or input that does not match the schema.
        SchemaMismatchError
            A DataFrame column that is not in the schema (absent features take the schema's
            public defaults), or an array of the wrong width.
        ValueError
            Malformed hyperparameters (layer sizes, activation, epochs, batch size, optimizer).
        """
        _fit_sites([self], [X], [y])
        return self

    def _forward(self, X: Any) -> torch.Tensor:
        check_is_fitted(self, "module_")
        Z = self._encode_predict(X)
        with torch.no_grad():
            out: torch.Tensor = self.module_(
                torch.from_numpy(np.ascontiguousarray(Z, dtype=np.float32))
            )
        return out


def fold_input_center(module: torch.nn.Sequential) -> torch.nn.Sequential:
    """Fold the training shift of the inputs into the first Linear layer, in place.

    A network trained on ``Z − INPUT_CENTER`` computes, after ``b ← b − INPUT_CENTER · W·1``,
    the same function of the [0, 1] encoding ``Z`` (module notes).

    Parameters
    ----------
    module : torch.nn.Sequential
        Starts with an ``nn.Linear`` with a bias.

    Returns
    -------
    torch.nn.Sequential
        ``module`` itself.

    Examples
    --------
    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 2))
    >>> Z = torch.rand(4, 3)
    >>> before = net(Z - INPUT_CENTER)
    >>> torch.allclose(fold_input_center(net)(Z), before)
    True
    """
    return _shift_first_bias(module, -INPUT_CENTER)


def unfold_input_center(module: torch.nn.Sequential) -> torch.nn.Sequential:
    """Undo :func:`fold_input_center` in place: the network then takes ``Z − INPUT_CENTER``.

    Used to train a published (folded) network further on centred inputs, e.g. fine-tuning.
    """
    return _shift_first_bias(module, INPUT_CENTER)


def _shift_first_bias(module: torch.nn.Sequential, shift: float) -> torch.nn.Sequential:
    first = module[0]
    if not isinstance(first, torch.nn.Linear) or first.bias is None:
        raise ValueError("the network must start with an nn.Linear layer with a bias")
    with torch.no_grad():
        first.bias.add_(shift * first.weight.sum(dim=1))
    return module


def centred(Z: np.ndarray) -> torch.Tensor:
    """The float32 training tensor ``Z − INPUT_CENTER`` of a [0, 1] encoding (module notes)."""
    return torch.from_numpy(np.ascontiguousarray(Z, dtype=np.float32) - np.float32(INPUT_CENTER))


def _fit_sites(
    estimators: Sequence[_DPSGDBase], Xs: Sequence[Any], ys: Sequence[Any], first: int = 0
) -> None:
    """Train each estimator on its data, grouped into stacks by architecture; all or nothing.

    Estimator ``i`` takes the generator (and, with a ``noise_seed``, the noise generator) of
    site ``first + i``; without one, each site draws its noise from a fresh secure source."""
    est0 = estimators[0]
    noise_seed = getattr(est0, "noise_seed", None)
    check_noise_seed(noise_seed)
    plans = [est._plan(X, y) for est, X, y in zip(estimators, Xs, ys, strict=True)]
    generators = site_generators(est0.random_state, len(plans), first)
    sources = noise_sources(est0.random_state, noise_seed, generators, first)
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, plan in enumerate(plans):
        key = (plan.layer_sizes, plan.config.optimizer, plan.config.private)
        groups.setdefault(key, []).append(i)
    loss = estimators[0]._loss
    for (sizes, _, _), members in groups.items():
        gens = [generators[i] for i in members]
        stack = MLPStack.init(sizes, estimators[0]._activation_name(), gens)
        results = train_dp_stacked(
            stack,
            [centred(plans[i].Z) for i in members],
            [plans[i].target for i in members],
            configs=[plans[i].config for i in members],
            generators=gens,
            loss=loss,
            noise=[sources[i] for i in members],
        )
        for i, res in zip(members, results, strict=True):
            estimators[i]._commit(plans[i], res)


def fit_many(
    estimator: _DPSGDBase, Xs: Sequence[Any], ys: Sequence[Any], *, first_site: int = 0
) -> list[_DPSGDBase]:
    """Fit one clone of ``estimator`` per site, all sites trained at once on the stacked engine.

    Site ``s`` is trained with the ``(first_site + s)``-th generator spawned from
    ``estimator.random_state`` (``numpy.random.SeedSequence(random_state).spawn``) and, in a
    simulation with a ``noise_seed``, the same child of ``noise_seed`` for its noise (without one,
    each site's noise comes from its own secure source); site 0 of a call with ``first_site=0`` is
    therefore exactly ``clone(estimator).fit(Xs[0], ys[0])``, and every site's model depends only
    on its own data and seeds, not on the other sites.  So a
    population can be trained in batches (one per worker: ``fit_many(est, Xs[a:b], ys[a:b],
    first_site=a)``) and gives the models one call over all of it gives.  Each site has its own sample rate, steps, calibrated σ, ε
    and, for hyperparameters left at ``"auto"``, its own resolved values (they depend on n).

    Parameters
    ----------
    estimator : DPMLPClassifier, DPMLPRegressor, DPSGDLogisticRegression or DPSGDLinearRegression
        The configuration; it is cloned, never modified.
    Xs : sequence of S inputs, each a DataFrame or array-like of shape (n_s, n_features)
        With a schema, each site's DataFrame may hold any subset of its features: the others
        take the schema's public defaults (pubsub-ml.txt §4 Step 3); a column outside the
        schema raises :class:`~pubsubml.errors.SchemaMismatchError`.
    ys : sequence of S targets of shape (n_s,)
    first_site : int, default=0
        The index of ``Xs[0]`` in the population (its generator's spawn index).

    Returns
    -------
    list of S fitted estimators

    Raises
    ------
    ValueError
        ``Xs`` and ``ys`` of different lengths or empty, or any error ``fit`` raises (then no
        estimator is returned).
    TypeError
        ``estimator`` is not a DP-SGD learner of pubsubml.

    References
    ----------
    pubsub-ml.txt §8.2.3–8.2.4 (many publishers).

    Examples
    --------
    >>> import numpy as np
    >>> from pubsubml.learners.mlp import DPMLPClassifier
    >>> rng = np.random.default_rng(0)
    >>> Xs = [rng.random((60, 3)) for _ in range(4)]
    >>> ys = [(X[:, 0] > 0.5).astype(int) for X in Xs]
    >>> est = DPMLPClassifier(classes=[0, 1], hidden_layer_sizes=(8,), epochs=2, batch_size=20,
    ...                       noise_multiplier=1.0, accountant="rdp", random_state=0,
    ...                       noise_seed=0)
    >>> models = fit_many(est, Xs, ys)
    >>> [m.steps_ for m in models], round(models[0].epsilon_, 2) == round(models[3].epsilon_, 2)
    ([6, 6, 6, 6], True)
    """
    if len(Xs) != len(ys) or len(Xs) == 0:
        raise ValueError(
            f"need as many inputs as targets, at least one; got {len(Xs)} and {len(ys)}"
        )
    if not isinstance(estimator, _DPSGDBase):
        raise TypeError(
            "fit_many trains the DP-SGD learners (DPMLPClassifier, DPMLPRegressor, "
            f"DPSGDLogisticRegression, DPSGDLinearRegression), got {type(estimator).__name__}"
        )
    if isinstance(first_site, bool) or int(first_site) < 0:
        raise ValueError(f"first_site must be an int >= 0, got {first_site!r}")
    clones: list[_DPSGDBase] = [clone(estimator) for _ in Xs]
    _fit_sites(clones, Xs, ys, int(first_site))
    return clones
