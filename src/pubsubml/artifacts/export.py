"""Export a fitted estimator as a signed artifact, and keep artifacts on disk.

:func:`export_model` is the publisher's step of pubsub-ml.txt Algorithm 3 line 2 ("train
(ε^p, δ^p)-DP models M^p ... and publish the models"): it converts the model to safe weights
(ONNX for any model; safetensors for pubsubml's own fully connected networks), records the DP
events that ran with ε recomputed by the accountant, and signs the card.  An :class:`Artifact` is
the card plus the weights bytes; :meth:`Artifact.save` / :func:`load_artifact` keep it as
``card.json`` + ``weights.onnx`` or ``weights.safetensors`` without pickle
(:mod:`~pubsubml.artifacts.artifact`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from pubsubml.artifacts.artifact import (
    CARD_FILE,
    WEIGHTS_FILES,
    Artifact,
    load_artifact,
    make_artifact,
)
from pubsubml.artifacts.card import Label, MLPArchitecture
from pubsubml.artifacts.onnx_export import mlp_to_onnx, sklearn_to_onnx, torch_to_onnx
from pubsubml.artifacts.privacy_record import Accountant, PrivacyRecord
from pubsubml.artifacts.safetensors_codec import mlp_to_safetensors
from pubsubml.artifacts.signing import key_id
from pubsubml.errors import PrivacyError
from pubsubml.schema import FeatureSchema

__all__ = [
    "CARD_FILE",
    "PREFER_SAFETENSORS_FOR_MLP",
    "WEIGHTS_FILES",
    "Artifact",
    "export_model",
    "load_artifact",
    "make_artifact",
    "privacy_record_of",
]

# "auto" picks safetensors for fully connected networks because it loads and predicts faster
# (benchmarks/many_models.py; figures in benchmarks/RESULTS.md, "pubsubml.artifacts").
PREFER_SAFETENSORS_FOR_MLP = True

Format = Literal["auto", "onnx", "safetensors"]
Layers = list[tuple[np.ndarray, np.ndarray]]


# ---- building cards ----------------------------------------------------------------------
def privacy_record_of(estimator: Any, data_scope: Sequence[str] | None = None) -> PrivacyRecord:
    """The privacy record of a fitted estimator, with ε recomputed from its DP events.

    Events come from ``privacy_events_`` and δ from ``delta_``.  ε is computed by the PLD
    accountant (RDP when the estimator's ``accountant_`` says it reported RDP), or by basic
    composition of pure ε-DP events when δ = 0 (diffprivlib models; see
    :func:`~pubsubml.privacy.accountants.release.release_epsilon`), and must equal the estimator's
    ``epsilon_``.  An estimator without events is non-private (ε = ∞).  The record's ``noise`` is
    the estimator's ``noise_``; an estimator that does not report one is recorded as
    ``"seeded"`` (not known to be secure).

    Raises
    ------
    PrivacyError
        The estimator's own ``epsilon_`` disagrees with the accountant, or it claims a finite ε
        without having recorded any DP event.
    """
    events = list(getattr(estimator, "privacy_events_", None) or [])
    claimed = getattr(estimator, "epsilon_", None)
    if not events:
        if claimed is not None and math.isfinite(claimed):
            raise PrivacyError(
                f"{type(estimator).__name__} reports ε = {claimed} but recorded no DP events"
            )
        return PrivacyRecord.from_events([], epsilon=math.inf, delta=0.0, data_scope=data_scope)
    delta = float(estimator.delta_)
    declared = getattr(estimator, "accountant_", None)
    accountant: Accountant = "pure" if delta == 0.0 else ("rdp" if declared == "rdp" else "pld")
    from pubsubml.privacy.accountants.release import release_epsilon  # loads dp-accounting

    epsilon = release_epsilon(events, delta, accountant)
    if claimed is not None and not math.isclose(epsilon, claimed, rel_tol=1e-6, abs_tol=1e-9):
        raise PrivacyError(
            f"{type(estimator).__name__}.epsilon_ = {claimed} but the {accountant} accountant "
            f"gives {epsilon} for its {len(events)} DP events at δ = {delta}"
        )
    noise = getattr(estimator, "noise_", None)
    return PrivacyRecord.from_events(
        events,
        epsilon=epsilon,
        delta=delta,
        accountant=accountant,
        data_scope=data_scope,
        # An estimator that does not say where its noise came from is not taken as secure.
        noise="secure" if noise == "secure" else "seeded",
    )


# ---- estimators to weights ---------------------------------------------------------------
def _mlp_layers(module: Any) -> tuple[Layers, str] | None:
    """(layers, activation) of a ``Sequential`` of Linear and one activation type, else ``None``.

    Exact types only: a subclass could override ``forward``.
    """
    import torch

    activations = {torch.nn.Tanh: "tanh", torch.nn.ReLU: "relu", torch.nn.Sigmoid: "sigmoid"}
    if type(module) is not torch.nn.Sequential or len(module) % 2 == 0:
        return None
    parts = list(module)
    kinds = {activations.get(type(a)) for a in parts[1::2]}
    if len(kinds) > 1 or None in kinds:
        return None
    layers: Layers = []
    for linear in parts[0::2]:
        if type(linear) is not torch.nn.Linear or linear.bias is None:
            return None
        weight = linear.weight.detach().cpu().numpy().astype(np.float32)
        bias = linear.bias.detach().cpu().numpy().astype(np.float32)
        layers.append((weight, bias))
    activation = next(iter(kinds), None) or "tanh"  # a single layer has no hidden activation
    return layers, activation


def _sklearn_model(estimator: Any) -> Any:
    """The scikit-learn model to convert (diffprivlib copied to its base class): a learner's
    fitted ``estimator_``, or the estimator itself when it is a plain fitted model.

    A scikit-learn ensemble also has an ``estimator_``, the unfitted template of its members
    (``estimators_``): the ensemble itself is converted then.
    """
    from pubsubml.learners.diffprivlib_models import to_sklearn_base

    inner = getattr(estimator, "estimator_", None)
    plain = inner is None or hasattr(estimator, "estimators_")
    return to_sklearn_base(estimator if plain else inner)


def _output_positions(model: Any, classes: Sequence[Label]) -> list[int] | None:
    """Where each column of the fitted model's probabilities goes among the declared classes.

    ``None`` when they coincide.  A model fitted on a subset of the declared labels (classes
    absent from a site's data) gets its columns scattered, as the learners' ``predict_proba``.
    """
    inner = getattr(model, "classes_", None)
    if inner is None:
        return None
    inner_list = np.asarray(inner).tolist()
    declared = list(classes)
    if inner_list == declared:
        return None
    if all(c in declared for c in inner_list):
        return [declared.index(c) for c in inner_list]
    if all(isinstance(c, int) and 0 <= c < len(declared) for c in inner_list):
        return [int(c) for c in inner_list]  # fitted on label codes 0..K-1
    raise ValueError(
        f"the fitted model's classes {inner_list[:10]} match neither the declared classes "
        f"{declared[:10]} nor their codes 0..{len(declared) - 1}"
    )


def _resolve_schema(estimator: Any, schema: FeatureSchema | None) -> FeatureSchema:
    fitted = getattr(estimator, "schema_", None)
    if fitted is not None and schema is not None and fitted != schema:
        raise ValueError("schema differs from the estimator's fitted schema_")
    resolved = fitted if fitted is not None else schema
    if not isinstance(resolved, FeatureSchema):
        raise ValueError(
            f"{type(estimator).__name__} has no FeatureSchema: pass schema= (the public schema "
            "its inputs were encoded with)"
        )
    return resolved


def _classes_of(estimator: Any) -> list[Label] | None:
    raw = getattr(estimator, "classes_", None)
    if raw is None:
        return None
    values = np.asarray(raw).tolist()
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, str | int | float)]
    if bad:
        raise ValueError(f"class labels must be str, int or float, got {bad[:5]}")
    return list(values)


def _weights_format(
    format: Format, mlp: tuple[Layers, str] | None
) -> Literal["onnx", "safetensors"]:
    """The format the weights are written in (safetensors only for a fully connected network)."""
    if format == "safetensors" and mlp is None:
        raise ValueError("safetensors stores fully connected networks only; use format='onnx'")
    if format == "safetensors" or (
        format == "auto" and mlp is not None and PREFER_SAFETENSORS_FOR_MLP
    ):
        return "safetensors"
    return "onnx"


def _weights(
    fitted: Any,
    module: Any,
    mlp: tuple[Layers, str] | None,
    *,
    n_in: int,
    classes: list[Label] | None,
    fmt: Literal["onnx", "safetensors"],
) -> tuple[bytes, MLPArchitecture | None]:
    """The weights of a fully connected network, another torch network or a scikit-learn model,
    and a fully connected network's architecture."""
    if mlp is not None:
        return _mlp_weights(*mlp, n_in=n_in, classes=classes, fmt=fmt)
    if module is not None:
        return torch_to_onnx(module, n_in, softmax=classes is not None), None
    return _sklearn_weights(_sklearn_model(fitted), n_in, classes), None


def _mlp_weights(
    layers: Layers,
    activation: str,
    *,
    n_in: int,
    classes: list[Label] | None,
    fmt: Literal["onnx", "safetensors"],
) -> tuple[bytes, MLPArchitecture]:
    """A fully connected network's weights in ``fmt``, and its architecture for the card."""
    if layers[0][0].shape[1] != n_in:
        raise ValueError(
            f"the network takes {layers[0][0].shape[1]} inputs, the schema encodes {n_in}"
        )
    sizes = [int(layers[0][0].shape[1])] + [int(w.shape[0]) for w, _ in layers]
    architecture = MLPArchitecture(
        layer_sizes=sizes,
        activation=activation,  # type: ignore[arg-type]
        output_activation="identity" if classes is None else "softmax",
    )
    encoders: dict[str, Callable[[], bytes]] = {
        "safetensors": lambda: mlp_to_safetensors(layers),
        "onnx": lambda: mlp_to_onnx(
            layers, activation=activation, output_activation=architecture.output_activation
        ),
    }
    return encoders[fmt](), architecture


def _sklearn_weights(model: Any, n_in: int, classes: list[Label] | None) -> bytes:
    """A scikit-learn model's ONNX graph, its probabilities in the declared classes' order."""
    if getattr(model, "n_features_in_", n_in) != n_in:
        raise ValueError(
            f"the model takes {model.n_features_in_} inputs, the schema encodes {n_in}"
        )
    positions = None if classes is None else _output_positions(model, classes)
    return sklearn_to_onnx(
        model, n_in, output_positions=positions, n_outputs=len(classes or [None])
    )


def export_model(
    estimator: Any,
    *,
    publisher: str,
    signing_key: Ed25519PrivateKey,
    format: Format = "auto",
    data_scope: Sequence[str] | None = None,
    schema: FeatureSchema | None = None,
) -> Artifact:
    """Convert a fitted estimator into a signed, self-checked artifact.

    Parameters
    ----------
    estimator : fitted estimator
        A pubsubml learner (``module_`` network or ``estimator_`` scikit-learn/diffprivlib model,
        with ``schema_``, ``classes_``, ``privacy_events_``, ``epsilon_``, ``delta_``), a plain
        fitted scikit-learn model trained on the schema-encoded matrix (non-private), or a
        selection with a ``best_estimator_`` (its weights are exported; the privacy record is
        the selection's own, covering every run).
    publisher : str
        The publishing site's name.
    signing_key : Ed25519PrivateKey
    format : {"auto", "onnx", "safetensors"}, default="auto"
        ``auto``: safetensors for fully connected networks (:data:`PREFER_SAFETENSORS_FOR_MLP`),
        ONNX otherwise.  safetensors stores only fully connected networks.
    data_scope : sequence of str, optional
        Which data the privacy budget was spent on (recorded in the card).
    schema : FeatureSchema, optional
        Needed when the estimator has no fitted ``schema_``.

    Returns
    -------
    Artifact

    Raises
    ------
    ValueError
        No schema, format not applicable, or widths/classes that do not match the model.
    TypeError
        No converter for the model.
    PrivacyError
        The estimator's ε disagrees with its DP events.

    References
    ----------
    pubsub-ml.txt §3.2 and Algorithm 3, line 2 (publishers release (ε^p, δ^p)-DP models of any
    type); §4 (models are used as black boxes over their declared features).
    """
    if format not in ("auto", "onnx", "safetensors"):
        raise ValueError(f"format must be 'auto', 'onnx' or 'safetensors', got {format!r}")
    # A selection (e.g. PrivateHyperparameterSearch) releases its best model: its weights are
    # exported, and the selection's own DP events (which cover every run) go on the card.
    inner = getattr(estimator, "best_estimator_", None)
    fitted = estimator if inner is None else inner
    resolved = _resolve_schema(fitted, schema)
    classes = _classes_of(fitted)
    privacy = privacy_record_of(estimator, data_scope)
    n_in = resolved.n_encoded
    module = getattr(fitted, "module_", None)
    mlp = _mlp_layers(module) if module is not None else None
    fmt = _weights_format(format, mlp)
    weights, architecture = _weights(fitted, module, mlp, n_in=n_in, classes=classes, fmt=fmt)
    artifact = make_artifact(
        weights,
        format=fmt,
        publisher=publisher,
        schema=resolved,
        classes=classes,
        privacy=privacy,
        signing_key=signing_key,
        architecture=architecture if fmt == "safetensors" else None,
        defaulted_features=[
            n for n in getattr(fitted, "defaulted_features_", None) or () if n in resolved.names
        ],
    )
    public = signing_key.public_key()
    artifact.open({key_id(public): public}, check_privacy=False)  # fail here, not at subscribers
    return artifact
