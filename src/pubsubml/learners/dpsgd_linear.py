"""DP-SGD linear models: logistic (softmax) regression and least squares on public-bound inputs.

:class:`DPSGDLogisticRegression` and :class:`DPSGDLinearRegression` are the DP-SGD networks of
:mod:`pubsubml.learners.mlp` without hidden layers: one ``nn.Linear`` from the schema-encoded input
(every column in [0, 1] by the public bounds) to the logits or the prediction.  They train on the
same engine (Poisson sampling, per-sample clipping, calibrated Gaussian noise, the accountant's ε),
so :func:`~pubsubml.learners.dpsgd_base.fit_many` and the safetensors/ONNX export work unchanged.

Their hyperparameters default to ``"auto"``: full-batch Adam for 100 steps with a learning rate
that lets the weights reach what the public input scaling needs
(:func:`~pubsubml.learners.dpsgd_defaults.dp_sgd_defaults`).  On public proxy streams this regime
reached 0.84/0.78 accuracy at ε = 1 where the paper's network regime was at chance.

References
----------
pubsub-ml.txt §3.2 (each publisher picks its DP model type), §8 (DP-SGD [1]), §8.2.2 (model
heterogeneity: a DP logistic regression publisher); Ponomareva et al., "How to DP-fy ML", JAIR
2023, §5.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pubsubml.learners.dpsgd_tasks import _DPSGDClassifier, _DPSGDRegressor
from pubsubml.privacy.accountants import DEFAULT_DELTA
from pubsubml.schema import FeatureSchema

__all__ = ["DPSGDLinearRegression", "DPSGDLogisticRegression"]

_PARAMS_DOC = """
    schema : FeatureSchema, optional
        Public schema encoding ``X`` into [0, 1] columns; without it ``X`` must be a numeric matrix
        already scaled with public bounds (into [0, 1] for the ``"auto"`` learning rate to fit).
    epsilon : float or None, default=1.0
        ε to meet: σ is calibrated for the steps that will run.  Set it to ``None`` to give
        ``noise_multiplier`` instead (exactly one of the two).  Named ``epsilon`` and ``delta``
        as in every learner of pubsubml and in diffprivlib's scikit-learn-style estimators
        (:mod:`~pubsubml.learners.dpsgd_hyperparameters` notes).
    delta : float, default=DEFAULT_DELTA (1e-5)
        δ, which must be below 1/n (:data:`pubsubml.privacy.DEFAULT_DELTA`, the consortium's
        default, which the DP federated baselines share).
    noise_multiplier : float, optional
        σ to use; ε is then reported, not targeted.
    epochs : int or "auto", default="auto"
        ``"auto"``: 100 (with the full batch, 100 steps).
    batch_size : int or "auto", default="auto"
        Expected batch size (Poisson sampling rate q = batch_size / n).  ``"auto"``: n, the full
        batch.
    learning_rate : float or "auto", default="auto"
        ``"auto"``: min(reach / 100, jitter / √(d/4 + 1)) for d encoded columns
        (:func:`~pubsubml.learners.dpsgd_defaults.dp_sgd_defaults`).
    optimizer : {"adam", "sgd", "auto"}, default="auto"
        ``"auto"``: Adam.
    max_grad_norm : float or "auto", default="auto"
        Per-sample clipping norm C; ``"auto"``: 1.0.
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
        One ``nn.Linear`` from the encoded float32 input (n, n_encoded) to {out}.
    hyperparameters_ : DPSGDDefaults
        The batch size, epochs, steps, learning rate, optimizer and C that ran, ``"auto"``
        resolved; a function of the parameters, n and the encoded width only.
    noise_multiplier_, sample_rate_, steps_ : float, float, int
        What ran.
    privacy_events_ : list of DPEvent
        One ``subsampled_gaussian`` event of ``steps_`` steps.
    noise_ : {{"secure", "seeded"}}
        Where the Poisson draws and the noise came from (``"seeded"`` with a ``noise_seed``).
    epsilon_, delta_ : float
        ε at δ computed by the accountant from ``privacy_events_``.
    accountant_ : str
    schema_ : FeatureSchema or None
    n_features_in_ : int"""

_NOTES = """
    The guarantee is record-level (ε, δ)-DP under add/remove-one neighbours for the run reported
    in ``privacy_events_`` (Poisson sampling, per-sample clipping to C, N(0, σ²C²) noise); the
    number of rows n is treated as public, as in Opacus.  Inputs are scaled by the public schema
    bounds only, and the ``"auto"`` hyperparameters are a function of public inputs only, so
    neither costs privacy."""


class DPSGDLogisticRegression(_DPSGDClassifier):
    __doc__ = f"""Logistic (softmax) regression trained with DP-SGD on public-bound inputs.

    Binary and multiclass: one softmax over the declared classes.  The DP-SGD network of
    :class:`~pubsubml.learners.mlp.DPMLPClassifier` with no hidden layer.

    Parameters
    ----------{_PARAMS_DOC}
    classes : sequence
        Public label set (the columns of ``predict_proba``, in order), required: the labels
        present in private data can leak.

    Attributes
    ----------{_ATTRS_DOC.format(out="the logits (n, n_classes)")}
    classes_ : ndarray of shape (n_classes,)

    Raises
    ------
    See :meth:`fit`.

    Notes
    -----{_NOTES}

    References
    ----------
    pubsub-ml.txt §3.1 (DP), §3.2, §8 (DP-SGD [1]), §8.2.2 (a DP logistic regression publisher);
    Ponomareva et al., "How to DP-fy ML", JAIR 2023, §5 (full batch, fixed steps, Adam).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).random((300, 2))
    >>> y = (X[:, 0] > X[:, 1]).astype(int)
    >>> clf = DPSGDLogisticRegression(classes=[0, 1], epsilon=1.0, random_state=0).fit(X, y)
    >>> clf.hyperparameters_.batch_size, clf.steps_, round(clf.epsilon_, 2) <= 1.0
    (300, 100, True)
    >>> len(clf.module_), clf.predict_proba(X[:2]).shape
    (1, (2, 2))
    """

    _loss = "cross_entropy"
    _model = "linear"

    def __init__(
        self,
        *,
        schema: FeatureSchema | None = None,
        classes: Sequence[Any] | None = None,
        epsilon: float | None = 1.0,
        delta: float = DEFAULT_DELTA,
        noise_multiplier: float | None = None,
        epochs: int | str = "auto",
        batch_size: int | str = "auto",
        learning_rate: float | str = "auto",
        optimizer: str = "auto",
        max_grad_norm: float | str = "auto",
        accountant: str = "pld",
        random_state: Any = None,
        noise_seed: int | None = None,
    ) -> None:
        self.schema = schema
        self.classes = classes
        self.epsilon = epsilon
        self.delta = delta
        self.noise_multiplier = noise_multiplier
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.optimizer = optimizer
        self.max_grad_norm = max_grad_norm
        self.accountant = accountant
        self.random_state = random_state
        self.noise_seed = noise_seed


class DPSGDLinearRegression(_DPSGDRegressor):
    __doc__ = f"""Least-squares linear regression trained with DP-SGD on public-bound inputs.

    The DP-SGD network of :class:`~pubsubml.learners.mlp.DPMLPRegressor` with no hidden layer.

    Parameters
    ----------{_PARAMS_DOC}
    target_bounds : (float, float), optional
        Public bounds (lower, upper) of the target.  When given, the model trains on the target
        scaled to [0, 1] (values outside are clipped to the bounds), which the ``"auto"``
        learning rate assumes, and the inverse scaling is folded into the Linear layer, so
        ``module_`` predicts in target units.  Never derive the bounds from the private targets.

    Attributes
    ----------{_ATTRS_DOC.format(out="the prediction (n, 1) in target units")}

    Raises
    ------
    See :meth:`fit`; malformed ``target_bounds`` raise ValueError.

    Notes
    -----{_NOTES}  Clipping bounds each row's influence whatever the target's scale, so
    unbounded targets cost accuracy, never privacy.

    References
    ----------
    pubsub-ml.txt §8 (DP-SGD [1]), §8.3.2 (regression publishers); Ponomareva et al., "How to
    DP-fy ML", JAIR 2023, §5.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).random((300, 2))
    >>> reg = DPSGDLinearRegression(target_bounds=(0.0, 2.0), epsilon=1.0, random_state=0)
    >>> reg.fit(X, X.sum(axis=1)).predict(X[:3]).shape, reg.hyperparameters_.learning_rate
    ((3,), 0.02)
    """

    _loss = "mse"
    _model = "linear"

    def __init__(
        self,
        *,
        schema: FeatureSchema | None = None,
        epsilon: float | None = 1.0,
        delta: float = DEFAULT_DELTA,
        noise_multiplier: float | None = None,
        epochs: int | str = "auto",
        batch_size: int | str = "auto",
        learning_rate: float | str = "auto",
        optimizer: str = "auto",
        max_grad_norm: float | str = "auto",
        target_bounds: tuple[float, float] | None = None,
        accountant: str = "pld",
        random_state: Any = None,
        noise_seed: int | None = None,
    ) -> None:
        self.schema = schema
        self.epsilon = epsilon
        self.delta = delta
        self.noise_multiplier = noise_multiplier
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.optimizer = optimizer
        self.max_grad_norm = max_grad_norm
        self.target_bounds = target_bounds
        self.random_state = random_state
        self.noise_seed = noise_seed
        self.accountant = accountant
