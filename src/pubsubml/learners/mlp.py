"""DP-SGD multilayer perceptrons: the publishers' fully connected networks of PubSub-ML.

:class:`DPMLPClassifier` and :class:`DPMLPRegressor` train the networks of pubsub-ml.txt §7.2
(Table 4: e.g. Hyperplane 10-100-50-2 with tanh, Adam, 30 epochs, minibatches of 100) with DP-SGD
(§8: "the DP guaranteed using DPSGD [1]") through :mod:`pubsubml.privacy.dpsgd`, and report the
(ε, δ) that the accountant computes from what actually ran.  ``dp=False`` trains the same network
without clipping or noise: the subscriber's own model M^s, which is never released (§3.2, §4).

:func:`fit_many` trains many sites' networks of one configuration at once on the stacked engine,
each site exactly as its own ``fit`` would (same draws, same result), which is how simulations of
hundreds of publishers train them (§8.2.3–8.2.4).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from abc import ABCMeta, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Literal, Self, cast

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted

from pubsubml.errors import InvalidPrivacyParameterError, LabelError
from pubsubml.learners.base import SchemaInputMixin, check_labels, check_regression_targets
from pubsubml.privacy.accountant import check_delta, check_epsilon, compute_epsilon
from pubsubml.privacy.calibration import calibrate_noise
from pubsubml.privacy.dpsgd import (
    ACTIVATIONS,
    DPSGDConfig,
    MLPStack,
    TrainResult,
    train_dp_stacked,
)
from pubsubml.privacy.events import DPEvent
from pubsubml.schema import FeatureSchema

__all__ = ["DPMLPClassifier", "DPMLPRegressor", "fit_many"]

Backend = Literal["pld", "rdp"]
_ACCOUNTANTS = ("pld", "rdp")


@functools.lru_cache(maxsize=1024)
def _calibrated_sigma(epsilon: float, delta: float, q: float, steps: int, accountant: str) -> float:
    return calibrate_noise(epsilon, delta, q, steps, accountant=cast(Backend, accountant))


def _site_generators(random_state: Any, n_sites: int) -> list[torch.Generator]:
    """One torch generator per site, spawned from ``random_state`` (site 0 is what ``fit`` uses)."""
    if isinstance(random_state, np.random.RandomState):
        entropy: Any = int(random_state.randint(0, 2**31 - 1))
    elif isinstance(random_state, np.random.Generator):
        entropy = int(random_state.integers(0, 2**63 - 1))
    elif random_state is None or (isinstance(random_state, int | np.integer) and random_state >= 0):
        entropy = None if random_state is None else int(random_state)
    else:
        raise ValueError(
            f"random_state must be None, an int >= 0 or a numpy generator, got {random_state!r}"
        )
    children = np.random.SeedSequence(entropy).spawn(n_sites)
    return [torch.Generator().manual_seed(int(c.generate_state(1, np.uint64)[0])) for c in children]


@dataclasses.dataclass
class _Plan:
    """Everything one site's training needs, validated before any attribute changes."""

    X: Any
    Z: np.ndarray
    target: torch.Tensor
    classes: np.ndarray | None
    layer_sizes: tuple[int, ...]
    config: DPSGDConfig


class _DPMLPBase(SchemaInputMixin, BaseEstimator, metaclass=ABCMeta):
    """Shared parameters, validation and training of the DP MLP estimators."""

    _loss: ClassVar[str]
    schema: FeatureSchema | None
    hidden_layer_sizes: Sequence[int]
    activation: str
    epochs: int
    batch_size: int
    learning_rate: float
    optimizer: str
    dp: bool
    target_epsilon: float | None
    target_delta: float
    noise_multiplier: float | None
    max_grad_norm: float
    accountant: str
    random_state: Any
    module_: torch.nn.Sequential

    def _poor_score(self) -> bool:
        # DP noise, or very few epochs, legitimately cost accuracy on scikit-learn's small checks.
        return bool(self.dp) or not (isinstance(self.epochs, int) and self.epochs >= 10)

    # ---- validation (no attribute changes) ----------------------------------------------------
    @abstractmethod
    def _targets(self, y: Any, n: int) -> tuple[torch.Tensor, np.ndarray | None, int]:
        """Training targets, the classes (classifier) and the number of network outputs."""

    def _noise_for(self, n: int, config: DPSGDConfig) -> float:
        if not isinstance(self.dp, bool | np.bool_):
            raise ValueError(f"dp must be True or False, got {self.dp!r}")
        if self.accountant not in _ACCOUNTANTS:
            raise InvalidPrivacyParameterError(
                f"accountant must be one of {_ACCOUNTANTS}, got {self.accountant!r}"
            )
        given = [k for k in ("target_epsilon", "noise_multiplier") if getattr(self, k) is not None]
        if not self.dp:
            if given:
                raise InvalidPrivacyParameterError(
                    f"dp=False trains without noise; {given[0]} does not apply"
                )
            return 0.0
        if len(given) != 1:
            raise InvalidPrivacyParameterError(
                "dp=True needs exactly one of target_epsilon (noise calibrated to it) or "
                f"noise_multiplier (ε reported), got {'both' if given else 'neither'}"
            )
        check_delta(self.target_delta, n)
        if self.noise_multiplier is not None:
            sigma = self.noise_multiplier
            if (
                isinstance(sigma, bool)
                or not isinstance(sigma, int | float)
                or not 0 < sigma < math.inf
            ):
                raise InvalidPrivacyParameterError(
                    f"noise_multiplier must be finite and > 0, got {sigma!r}"
                )
            return float(sigma)
        assert self.target_epsilon is not None
        check_epsilon(self.target_epsilon)
        q, steps = config.sample_rate_for(n), config.steps_for(n)
        return _calibrated_sigma(
            float(self.target_epsilon), float(self.target_delta), q, steps, self.accountant
        )

    def _plan(self, X: Any, y: Any) -> _Plan:
        hidden = tuple(self.hidden_layer_sizes)
        if not all(
            isinstance(h, int | np.integer) and not isinstance(h, bool) and h > 0 for h in hidden
        ):
            raise ValueError(
                f"hidden_layer_sizes must be positive integers, got {self.hidden_layer_sizes!r}"
            )
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(ACTIVATIONS)}, got {self.activation!r}"
            )
        config = DPSGDConfig(
            max_grad_norm=float(self.max_grad_norm),
            batch_size=self.batch_size,
            epochs=self.epochs,
            lr=float(self.learning_rate),
            optimizer=self.optimizer,  # type: ignore[arg-type]
            private=bool(self.dp),
        )
        Z = self._encode_new(X)
        target, classes, n_out = self._targets(y, Z.shape[0])
        config = dataclasses.replace(config, noise_multiplier=self._noise_for(Z.shape[0], config))
        return _Plan(X, Z, target, classes, (Z.shape[1], *(int(h) for h in hidden), n_out), config)

    # ---- training --------------------------------------------------------------------------
    def _fold_output(self, module: torch.nn.Sequential) -> torch.nn.Sequential:
        """Fold an output transform into the last Linear layer (identity here)."""
        return module

    def _commit(self, plan: _Plan, result: TrainResult) -> None:
        """Set the fitted attributes from what the engine reports it ran."""
        events = result.events
        delta = float(self.target_delta) if events else 0.0
        backend = cast(Backend, self.accountant)
        epsilon = compute_epsilon(events, delta, backend=backend) if events else math.inf
        assert isinstance(result.module, torch.nn.Sequential)
        self._commit_input(plan.X, plan.Z)
        self.module_ = self._fold_output(result.module)
        if plan.classes is not None:
            self.classes_ = plan.classes
        self.noise_multiplier_ = result.noise_multiplier
        self.sample_rate_ = result.sample_rate
        self.steps_ = result.steps
        self.privacy_events_: list[DPEvent] = events
        self.accountant_ = self.accountant
        self.epsilon_ = epsilon
        self.delta_ = delta

    def fit(self, X: Any, y: Any) -> Self:
        """Train the network; nothing changes if any check fails.

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
            dp=True with both or neither of ``target_epsilon`` and ``noise_multiplier``, ε ≤ 0,
            δ ∉ (0, 1/n), σ ≤ 0, C ≤ 0, an unknown accountant, or privacy parameters with dp=False.
        LabelError
            Labels outside ``classes``, or dp=True without declared ``classes``.
        DataValidationError
            NaN or infinite values, or input that does not match the schema.
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


def _fit_sites(estimators: Sequence[_DPMLPBase], Xs: Sequence[Any], ys: Sequence[Any]) -> None:
    """Train each estimator on its data, grouped into stacks by architecture; all or nothing."""
    plans = [est._plan(X, y) for est, X, y in zip(estimators, Xs, ys, strict=True)]
    generators = _site_generators(estimators[0].random_state, len(plans))
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, plan in enumerate(plans):
        groups.setdefault(plan.layer_sizes, []).append(i)
    loss = estimators[0]._loss
    for sizes, members in groups.items():
        gens = [generators[i] for i in members]
        stack = MLPStack.init(sizes, estimators[0].activation, gens)
        results = train_dp_stacked(
            stack,
            [torch.from_numpy(np.ascontiguousarray(plans[i].Z, dtype=np.float32)) for i in members],
            [plans[i].target for i in members],
            configs=[plans[i].config for i in members],
            generators=gens,
            loss=loss,
        )
        for i, res in zip(members, results, strict=True):
            estimators[i]._commit(plans[i], res)


def fit_many(estimator: _DPMLPBase, Xs: Sequence[Any], ys: Sequence[Any]) -> list[_DPMLPBase]:
    """Fit one clone of ``estimator`` per site, all sites trained at once on the stacked engine.

    Site ``s`` is trained with the ``s``-th generator spawned from ``estimator.random_state``
    (``numpy.random.SeedSequence(random_state).spawn``); site 0 is therefore exactly
    ``clone(estimator).fit(Xs[0], ys[0])``, and every site's model depends only on its own data
    and seed, not on the other sites.  Each site has its own sample rate, steps, calibrated σ and ε.

    Parameters
    ----------
    estimator : DPMLPClassifier or DPMLPRegressor
        The configuration; it is cloned, never modified.
    Xs : sequence of S inputs, each a DataFrame or array-like of shape (n_s, n_features)
    ys : sequence of S targets of shape (n_s,)

    Returns
    -------
    list of S fitted estimators

    Raises
    ------
    ValueError
        ``Xs`` and ``ys`` of different lengths or empty, or any error ``fit`` raises (then no
        estimator is returned).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> Xs = [rng.random((60, 3)) for _ in range(4)]
    >>> ys = [(X[:, 0] > 0.5).astype(int) for X in Xs]
    >>> est = DPMLPClassifier(classes=[0, 1], hidden_layer_sizes=(8,), epochs=2, batch_size=20,
    ...                       noise_multiplier=1.0, accountant="rdp", random_state=0)
    >>> models = fit_many(est, Xs, ys)
    >>> [m.steps_ for m in models], round(models[0].epsilon_, 2) == round(models[3].epsilon_, 2)
    ([6, 6, 6, 6], True)
    """
    if len(Xs) != len(ys) or len(Xs) == 0:
        raise ValueError(
            f"need as many inputs as targets, at least one; got {len(Xs)} and {len(ys)}"
        )
    if not isinstance(estimator, _DPMLPBase):
        raise TypeError(
            f"fit_many trains DPMLPClassifier or DPMLPRegressor, got {type(estimator).__name__}"
        )
    clones: list[_DPMLPBase] = [clone(estimator) for _ in Xs]
    _fit_sites(clones, Xs, ys)
    return clones


_PARAMS_DOC = """
    schema : FeatureSchema, optional
        Public schema encoding ``X`` into [0, 1] columns; without it ``X`` must be a numeric matrix
        already scaled with public bounds.
    hidden_layer_sizes : tuple of int, default=(100, 50)
    activation : {"tanh", "relu", "sigmoid"}, default="tanh"
    epochs : int, default=30
    batch_size : int, default=100
        Expected batch size: Poisson sampling rate q = batch_size / n, ``epochs · round(1/q)`` steps.
    learning_rate : float, default=1e-3
    optimizer : {"adam", "sgd"}, default="adam"
    dp : bool, default=True
        ``False``: no clipping, no noise, shuffled minibatches (a model that is never released).
    target_epsilon : float, optional
        ε to meet: σ is calibrated for the steps that will run.  Exactly one of ``target_epsilon``
        and ``noise_multiplier`` is required when ``dp=True``.
    target_delta : float, default=1e-5
        δ, which must be below 1/n.
    noise_multiplier : float, optional
        σ to use; ε is then reported, not targeted.
    max_grad_norm : float, default=1.0
        Per-sample clipping norm C.
    accountant : {"pld", "rdp"}, default="pld"
    random_state : int, numpy Generator/RandomState or None
        Seeds the initial weights, the Poisson draws and the noise."""

_ATTRS_DOC = """
    module_ : torch.nn.Sequential
        Alternating ``nn.Linear`` and activation modules, from the encoded float32 input
        (n, n_encoded) to {out}.
    noise_multiplier_, sample_rate_, steps_ : float, float, int
        What ran (σ = 0 when ``dp=False``; then ``sample_rate_`` is the nominal batch_size / n).
    privacy_events_ : list of DPEvent
        One ``subsampled_gaussian`` event of ``steps_`` steps; empty when ``dp=False``.
    epsilon_, delta_ : float
        ε at δ = ``target_delta`` computed by the accountant from ``privacy_events_``; ``inf`` and
        0.0 when ``dp=False`` (the convention of the non-private learners).
    accountant_ : str
    schema_ : FeatureSchema or None
    n_features_in_ : int"""


class DPMLPClassifier(ClassifierMixin, _DPMLPBase):
    __doc__ = f"""A DP-SGD trained MLP classifier (pubsub-ml.txt §7.2 Table 4, §8).

    Parameters
    ----------{_PARAMS_DOC}
    classes : sequence, optional
        Public label set (the columns of ``predict_proba``, in order); required when ``dp=True``,
        since the labels present in private data can leak.  Defaults to the labels of ``y`` when
        ``dp=False``.

    Attributes
    ----------{_ATTRS_DOC.format(out="logits (n, n_classes)")}
    classes_ : ndarray of shape (n_classes,)

    Raises
    ------
    See :meth:`fit`.

    Notes
    -----
    The guarantee is record-level (ε, δ)-DP under add/remove-one neighbours for the run reported
    in ``privacy_events_``: Poisson sampling, per-sample clipping to C, N(0, σ²C²) noise.  Input
    scaling uses only the public schema.  The number of rows n sets q = batch_size / n and the
    number of steps; as in Opacus, n is treated as public.

    References
    ----------
    pubsub-ml.txt §3.1 (DP), §7.2 (Table 4), §8 (DP-SGD [1], Abadi et al. 2016).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).random((200, 2))
    >>> y = (X[:, 0] > X[:, 1]).astype(int)
    >>> clf = DPMLPClassifier(classes=[0, 1], hidden_layer_sizes=(16,), epochs=3, batch_size=20,
    ...                       target_epsilon=2.0, accountant="rdp", random_state=0).fit(X, y)
    >>> clf.steps_, clf.epsilon_ <= 2.0, clf.predict_proba(X[:2]).shape
    (30, True, (2, 2))
    """

    _loss = "cross_entropy"

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.classifier_tags.poor_score = self._poor_score()
        return tags

    def __init__(
        self,
        *,
        schema: FeatureSchema | None = None,
        classes: Sequence[Any] | None = None,
        hidden_layer_sizes: Sequence[int] = (100, 50),
        activation: str = "tanh",
        epochs: int = 30,
        batch_size: int = 100,
        learning_rate: float = 1e-3,
        optimizer: str = "adam",
        dp: bool = True,
        target_epsilon: float | None = None,
        target_delta: float = 1e-5,
        noise_multiplier: float | None = None,
        max_grad_norm: float = 1.0,
        accountant: str = "pld",
        random_state: Any = None,
    ) -> None:
        self.schema = schema
        self.classes = classes
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.optimizer = optimizer
        self.dp = dp
        self.target_epsilon = target_epsilon
        self.target_delta = target_delta
        self.noise_multiplier = noise_multiplier
        self.max_grad_norm = max_grad_norm
        self.accountant = accountant
        self.random_state = random_state

    def _targets(self, y: Any, n: int) -> tuple[torch.Tensor, np.ndarray | None, int]:
        if self.dp and self.classes is None:
            raise LabelError(
                "DPMLPClassifier(dp=True) needs the public label set, e.g. classes=[0, 1]: reading "
                "it from the training labels would leak which labels occur"
            )
        if self.classes is None and type_of_target(y) in ("continuous", "continuous-multioutput"):
            raise LabelError("Unknown label type: continuous; a classifier needs discrete labels")
        classes, codes = check_labels(y, self.classes, n)
        return torch.from_numpy(codes), classes, len(classes)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities, shape (n_samples, n_classes), columns in ``classes_`` order."""
        return torch.softmax(self._forward(X), dim=1).double().numpy()

    def predict(self, X: Any) -> np.ndarray:
        """Predicted labels, shape (n_samples,)."""
        codes = self._forward(X).argmax(dim=1).numpy()
        return np.asarray(self.classes_[codes])


class DPMLPRegressor(RegressorMixin, _DPMLPBase):
    __doc__ = f"""A DP-SGD trained MLP regressor (pubsub-ml.txt §7.2 Table 4, §8.3.2).

    Trained with the squared error; the network has one linear output.

    Parameters
    ----------{_PARAMS_DOC}
    target_bounds : (float, float), optional
        Public bounds (lower, upper) of the target.  When given, the network trains on the target
        scaled to [0, 1] (values outside are clipped to the bounds) and the inverse scaling is
        folded into the last Linear layer, so ``module_`` still predicts in target units.  Without
        it the network trains on raw targets, which suits targets of order one.  Never derive the
        bounds from the private targets.

    Attributes
    ----------{_ATTRS_DOC.format(out="predictions (n, 1) in target units")}

    Raises
    ------
    See :meth:`fit`; malformed ``target_bounds`` raise ValueError.

    Notes
    -----
    The guarantee is that of :class:`DPMLPClassifier`.  Clipping bounds each row's influence
    whatever the target's scale, so unbounded targets cost accuracy, never privacy.

    References
    ----------
    pubsub-ml.txt §7.2 (Table 4, Housing Market network), §8.3.2 (regression), §8 (DP-SGD [1]).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).random((200, 2))
    >>> reg = DPMLPRegressor(hidden_layer_sizes=(16,), epochs=2, batch_size=20, dp=False,
    ...                      target_bounds=(0.0, 2.0), random_state=0).fit(X, X.sum(axis=1))
    >>> reg.predict(X[:3]).shape, reg.epsilon_
    ((3,), inf)
    """

    _loss = "mse"

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = self._poor_score()
        return tags

    def __init__(
        self,
        *,
        schema: FeatureSchema | None = None,
        hidden_layer_sizes: Sequence[int] = (100, 50),
        activation: str = "tanh",
        epochs: int = 30,
        batch_size: int = 100,
        learning_rate: float = 1e-3,
        optimizer: str = "adam",
        dp: bool = True,
        target_epsilon: float | None = None,
        target_delta: float = 1e-5,
        noise_multiplier: float | None = None,
        max_grad_norm: float = 1.0,
        accountant: str = "pld",
        target_bounds: tuple[float, float] | None = None,
        random_state: Any = None,
    ) -> None:
        self.schema = schema
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.optimizer = optimizer
        self.dp = dp
        self.target_epsilon = target_epsilon
        self.target_delta = target_delta
        self.noise_multiplier = noise_multiplier
        self.max_grad_norm = max_grad_norm
        self.accountant = accountant
        self.target_bounds = target_bounds
        self.random_state = random_state

    def _bounds(self) -> tuple[float, float] | None:
        if self.target_bounds is None:
            return None
        try:
            lo, hi = (float(v) for v in self.target_bounds)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"target_bounds must be (lower, upper), got {self.target_bounds!r}"
            ) from exc
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(
                f"target_bounds must be finite with lower < upper, got {self.target_bounds!r}"
            )
        return lo, hi

    def _targets(self, y: Any, n: int) -> tuple[torch.Tensor, np.ndarray | None, int]:
        bounds = self._bounds()
        t = check_regression_targets(y, n)
        if bounds is not None:
            lo, hi = bounds
            t = ((np.clip(t, lo, hi) - lo) / (hi - lo)).astype(np.float32)
        return torch.from_numpy(t), None, 1

    def _fold_output(self, module: torch.nn.Sequential) -> torch.nn.Sequential:
        bounds = self._bounds()
        if bounds is not None:
            last = module[-1]
            assert isinstance(last, torch.nn.Linear)
            with torch.no_grad():
                last.weight.mul_(bounds[1] - bounds[0])
                last.bias.mul_(bounds[1] - bounds[0]).add_(bounds[0])
        return module

    def predict(self, X: Any) -> np.ndarray:
        """Predicted values, shape (n_samples,)."""
        return self._forward(X)[:, 0].double().numpy()
