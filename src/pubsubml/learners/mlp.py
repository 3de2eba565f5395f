"""DP-SGD multilayer perceptrons: the publishers' fully connected networks of PubSub-ML.

:class:`DPMLPClassifier` and :class:`DPMLPRegressor` train the networks of pubsub-ml.txt §7.2
(Table 4: e.g. Hyperplane 10-100-50-2 with tanh) with DP-SGD (§8: "the DP guaranteed using
DPSGD [1]") through :mod:`pubsubml.privacy.dpsgd`, and report the (ε, δ) that the accountant
computes from what actually ran.  ``dp=False`` trains the same network without clipping or noise:
the subscriber's own model M^s, which is never released (§3.2, §4).

With ``dp=True`` the batch size and learning rate left at ``"auto"`` come from
:func:`~pubsubml.learners.dpsgd_defaults.dp_sgd_defaults` (public inputs only); the paper's
training setting (Adam, 30 epochs, minibatches of 100, learning rate 1e-3) is
``DPMLPClassifier(**TABLE4_HYPERPARAMETERS, ...)``.

:func:`fit_many` trains many sites' networks of one configuration at once on the stacked engine,
each site exactly as its own ``fit`` would (same draws, same result), which is how simulations of
hundreds of publishers train them (§8.2.3–8.2.4).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pubsubml.learners.dpsgd_base import fit_many
from pubsubml.learners.dpsgd_defaults import TABLE4_HYPERPARAMETERS
from pubsubml.learners.dpsgd_hyperparameters import DEPRECATED
from pubsubml.learners.dpsgd_tasks import _DPSGDClassifier, _DPSGDRegressor
from pubsubml.privacy.accountants import DEFAULT_DELTA
from pubsubml.schema import FeatureSchema

__all__ = ["TABLE4_HYPERPARAMETERS", "DPMLPClassifier", "DPMLPRegressor", "fit_many"]

_PARAMS_DOC = """
    schema : FeatureSchema, optional
        Public schema encoding ``X`` into [0, 1] columns; without it ``X`` must be a numeric matrix
        already scaled with public bounds.
    hidden_layer_sizes : tuple of int, default=(100, 50)
    activation : {"tanh", "relu", "sigmoid"}, default="tanh"
    epochs : int, default=30
    batch_size : int or "auto", default="auto"
        Expected batch size: Poisson sampling rate q = batch_size / n, ``epochs · round(1/q)`` steps.
        ``"auto"``: ⌈n/3⌉ with ``dp=True`` and ``learning_rate="auto"``
        (:func:`~pubsubml.learners.dpsgd_defaults.dp_sgd_defaults`); otherwise 100, the former
        default, so code that sets ``learning_rate`` alone trains exactly as before.
    learning_rate : float or "auto", default="auto"
        ``"auto"``: from :func:`~pubsubml.learners.dpsgd_defaults.dp_sgd_defaults` with ``dp=True``
        (3e-2 unless the input is very wide), 1e-3 with ``dp=False``.  An explicit value is used
        as given.
    optimizer : {"adam", "sgd"}, default="adam"
    dp : bool, default=True
        ``False``: no clipping, no noise, shuffled minibatches (a model that is never released).
    epsilon : float, optional
        ε to meet: σ is calibrated for the steps that will run.  Exactly one of ``epsilon`` and
        ``noise_multiplier`` is required when ``dp=True``.  Named ``epsilon`` and ``delta`` as
        in every learner of pubsubml and in diffprivlib's scikit-learn-style estimators
        (:mod:`~pubsubml.learners.dpsgd_hyperparameters` notes).
    delta : float, default=DEFAULT_DELTA (1e-5)
        δ, which must be below 1/n (:data:`pubsubml.privacy.DEFAULT_DELTA`, the consortium's
        default, which the DP federated baselines share).
    target_epsilon, target_delta : float, optional
        Deprecated former names of ``epsilon`` and ``delta``: still used when given, with a
        ``FutureWarning`` at ``fit``; they will be removed in pubsubml 0.3.
    noise_multiplier : float, optional
        σ to use; ε is then reported, not targeted.
    max_grad_norm : float, default=1.0
        Per-sample clipping norm C.
    accountant : {"pld", "rdp"}, default="pld"
    random_state : int, numpy Generator/RandomState or None
        Seeds the initial weights (and the shuffles of a non-private run); never the privacy
        noise.
    noise_seed : int, optional
        Seeds the Poisson draws and the noise, for simulations only: whoever knows it can
        regenerate the noise, so a model trained with it is marked ``noise_ = "seeded"`` on its
        card, :meth:`~pubsubml.sites.Site.publish` warns and a registry refuses it unless
        started for research.  ``None`` (the default): a secure source keyed from
        ``os.urandom`` per fit (:mod:`pubsubml.privacy.noise`).  Equal to ``random_state``, one
        generator draws the initial weights, then the sampling and noise (one seed for the
        whole simulated run)."""

_ATTRS_DOC = """
    module_ : torch.nn.Sequential
        Alternating ``nn.Linear`` and activation modules, from the encoded float32 input
        (n, n_encoded) to {out}.
    hyperparameters_ : DPSGDDefaults
        The batch size, epochs, steps, learning rate, optimizer and C of the run, ``"auto"``
        resolved.
    noise_multiplier_, sample_rate_, steps_ : float, float, int
        What ran (σ = 0 when ``dp=False``; then ``sample_rate_`` is the nominal batch_size / n).
    privacy_events_ : list of DPEvent
        One ``subsampled_gaussian`` event of ``steps_`` steps; empty when ``dp=False``.
    noise_ : {{"secure", "seeded"}} or None
        Where the Poisson draws and the noise came from (``"seeded"`` with a ``noise_seed``);
        ``None`` when ``dp=False``.
    epsilon_, delta_ : float
        ε at δ = ``delta`` computed by the accountant from ``privacy_events_``; ``inf`` and
        0.0 when ``dp=False`` (the convention of the non-private learners).
    accountant_ : str
    schema_ : FeatureSchema or None
    n_features_in_ : int"""


class DPMLPClassifier(_DPSGDClassifier):
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
    number of steps; as in Opacus, n is treated as public.  ``"auto"`` hyperparameters are a
    function of public inputs only (n, ε, δ, the encoded width), so choosing them costs nothing.

    The paper's setting (Adam at learning rate 1e-3, minibatches of 100, 30 epochs; §7.2) leaves
    a DP network near chance level at ε = 1: for n = 1500, σ ≈ 5.4 on expected batches of 100
    drowns the gradient, and 450 Adam steps of 1e-3 move a weight by at most about 0.45.  It
    remains available by name:
    ``DPMLPClassifier(**TABLE4_HYPERPARAMETERS, classes=..., epsilon=1.0)``.

    References
    ----------
    pubsub-ml.txt §3.1 (DP), §7.2 (Table 4), §8 (DP-SGD [1], Abadi et al. 2016); Ponomareva et al.,
    "How to DP-fy ML", JAIR 2023, §5 (the DP defaults).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).random((200, 2))
    >>> y = (X[:, 0] > X[:, 1]).astype(int)
    >>> clf = DPMLPClassifier(classes=[0, 1], hidden_layer_sizes=(16,), epochs=3, batch_size=20,
    ...                       epsilon=2.0, accountant="rdp", random_state=0).fit(X, y)
    >>> clf.steps_, clf.epsilon_ <= 2.0, clf.predict_proba(X[:2]).shape
    (30, True, (2, 2))
    >>> table4 = DPMLPClassifier(classes=[0, 1], epsilon=2.0, **TABLE4_HYPERPARAMETERS)
    >>> table4.get_params()["batch_size"], table4.get_params()["learning_rate"]
    (100, 0.001)
    """

    _loss = "cross_entropy"
    _model = "mlp"

    def __init__(
        self,
        *,
        schema: FeatureSchema | None = None,
        classes: Sequence[Any] | None = None,
        hidden_layer_sizes: Sequence[int] = (100, 50),
        activation: str = "tanh",
        epochs: int = 30,
        batch_size: int | str = "auto",
        learning_rate: float | str = "auto",
        optimizer: str = "adam",
        dp: bool = True,
        epsilon: float | None = None,
        delta: float = DEFAULT_DELTA,
        noise_multiplier: float | None = None,
        max_grad_norm: float = 1.0,
        accountant: str = "pld",
        random_state: Any = None,
        noise_seed: int | None = None,
        target_epsilon: float | str | None = DEPRECATED,
        target_delta: float | str = DEPRECATED,
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
        self.epsilon = epsilon
        self.delta = delta
        self.noise_multiplier = noise_multiplier
        self.max_grad_norm = max_grad_norm
        self.accountant = accountant
        self.random_state = random_state
        self.noise_seed = noise_seed
        self.target_epsilon = target_epsilon
        self.target_delta = target_delta


class DPMLPRegressor(_DPSGDRegressor):
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
    _model = "mlp"

    def __init__(
        self,
        *,
        schema: FeatureSchema | None = None,
        hidden_layer_sizes: Sequence[int] = (100, 50),
        activation: str = "tanh",
        epochs: int = 30,
        batch_size: int | str = "auto",
        learning_rate: float | str = "auto",
        optimizer: str = "adam",
        dp: bool = True,
        epsilon: float | None = None,
        delta: float = DEFAULT_DELTA,
        noise_multiplier: float | None = None,
        max_grad_norm: float = 1.0,
        accountant: str = "pld",
        target_bounds: tuple[float, float] | None = None,
        random_state: Any = None,
        noise_seed: int | None = None,
        target_epsilon: float | str | None = DEPRECATED,
        target_delta: float | str = DEPRECATED,
    ) -> None:
        self.schema = schema
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.optimizer = optimizer
        self.dp = dp
        self.epsilon = epsilon
        self.delta = delta
        self.noise_multiplier = noise_multiplier
        self.max_grad_norm = max_grad_norm
        self.accountant = accountant
        self.target_bounds = target_bounds
        self.random_state = random_state
        self.noise_seed = noise_seed
        self.target_epsilon = target_epsilon
        self.target_delta = target_delta
