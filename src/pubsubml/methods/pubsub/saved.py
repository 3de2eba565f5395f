"""A customized model C^s = f_c ∘ m kept on the subscriber's disk without pickle (pubsub-ml.txt §4).

:func:`save_customizer` writes a fitted :class:`~pubsubml.methods.pubsub.customizer.Customizer` as
a folder of safe parts, and :func:`load_customizer` reads it back as a fitted ``Customizer`` whose
``predict`` / ``predict_proba`` give the same outputs (to float32 rounding of the ONNX parts)::

    customized.json          the manifest: task, classes, the public schema, the meta-feature
                             layout and scaling, the fusion's kind and parameters, the Customizer's
                             parameters, the keys that verify the artifacts, the SHA-256 of every
                             file below
    own/                     M^s as an artifact (card.json + weights.onnx): its fitted
                             scikit-learn model on the schema-encoded inputs, signed (never
                             published: the card says ε = ∞, and it never leaves the site)
    models/0, models/1, …    the selected subscribed models, as they were received (signed
                             cards and ONNX or safetensors weights)
    fusion.safetensors       the stacked fusion's weights and intercepts, or
    fusion.onnx              any other fusion model (a logistic/ridge layer, a forest)

Loading checks every file's digest against the manifest, re-verifies every card's signature and
weights digest, and runs the ONNX safety checks of :mod:`~pubsubml.artifacts.onnx_codec` on the
fusion graph: nothing is unpickled and nothing is executed but ONNX graphs and numpy arithmetic
(DESIGN.md, "Never unpickle what crosses a site boundary"; the folder is the subscriber's own, but
it holds models from other sites).  The folder is written to a temporary sibling and renamed into
place, so a failed save leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import secrets
import shutil
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import safetensors.numpy
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from sklearn.compose import TransformedTargetRegressor
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted

from pubsubml.artifacts import PublishedModel, export_model
from pubsubml.artifacts.artifact import CARD_FILE, WEIGHTS_FILES, Artifact, read_limited
from pubsubml.artifacts.card import ModelCard
from pubsubml.artifacts.onnx_codec import OnnxRunner, check_onnx
from pubsubml.artifacts.onnx_export import sklearn_to_onnx
from pubsubml.artifacts.signing import (
    generate_signing_key,
    key_id,
    public_key_from_base64,
    public_key_to_base64,
)
from pubsubml.errors import DigestMismatchError, UntrustedArtifactError
from pubsubml.methods.pubsub.customizer import OWN_ID, Customizer
from pubsubml.methods.pubsub.fusion import StackedFusion
from pubsubml.methods.pubsub.outputs import OwnModel, published_runner
from pubsubml.schema import FeatureSchema

__all__ = ["MANIFEST_FILE", "SavedOwnModel", "load_customizer", "save_customizer"]

MANIFEST_FILE = "customized.json"
FORMAT = "pubsubml-customized"
VERSION = 1
MAX_MANIFEST_BYTES = 16 * 2**20
MAX_PART_BYTES = 256 * 2**20
#: The Customizer parameters the manifest records (all JSON values).
_PARAMS = (
    "task",
    "own_model",
    "fusion_model",
    "cv",
    "top_m",
    "selection_metric",
    "train_split",
    "fusion_split",
    "classes",
    "target_bounds",
    "random_state",
)


# ---- the own model as a black box ----------------------------------------------------------
class SavedOwnModel:
    """M^s read back from its artifact: the same interface as a fitted ``OwnLearner``.

    Parameters
    ----------
    model : PublishedModel
        The own artifact (outputs in class-code order 0..K-1, or the model's target scale).
    classes : ndarray or None
        The subscriber's labels (classification).
    target_affine : (float, float), optional
        ``(offset, scale)``: a regression output ``t`` is ``offset + scale · t`` in target units.
    choice : str
        The own-model kind that was chosen (``"mlp"``, ``"forest"``, ``"logistic"``).
    cv_scores : dict of str to float, optional
        The candidates' out-of-fold losses of that choice.
    """

    def __init__(
        self,
        model: PublishedModel,
        classes: np.ndarray | None,
        target_affine: tuple[float, float] | None,
        choice: str,
        cv_scores: Mapping[str, float] | None = None,
    ) -> None:
        self.model = model
        self.choice_ = choice
        self.cv_scores_ = dict(cv_scores or {})
        self.target_affine = target_affine
        self.input_features = model.input_features
        self.feature_names_in_ = np.asarray(model.input_features, dtype=object)
        if classes is not None:
            self.classes_ = classes

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """Class probabilities, columns in ``classes_`` order."""
        return np.asarray(self.model.predict_outputs(X), dtype=np.float64)

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Labels (classification) or values (regression)."""
        out = np.asarray(self.model.predict_outputs(X), dtype=np.float64)
        if hasattr(self, "classes_"):
            return np.asarray(self.classes_[np.argmax(out, axis=1)])
        offset, scale = self.target_affine or (0.0, 1.0)
        return offset + scale * out[:, 0]


class _OwnExport:
    """What :func:`export_model` reads of a plain model on the schema-encoded matrix."""

    def __init__(self, model: Any, schema: FeatureSchema, n_classes: int | None) -> None:
        self.estimator_ = model
        self.schema_ = schema
        if n_classes is not None:
            self.classes_ = np.arange(n_classes)


class _OnnxFusion:
    """A fusion model f_c read back from ONNX: probabilities for every class, or one output."""

    def __init__(self, runner: OnnxRunner, n_classes: int | None) -> None:
        self._runner = runner
        self.n_features_in_ = runner.n_inputs
        if n_classes is not None:
            self.classes_ = np.arange(n_classes)

    def predict_proba(self, M: np.ndarray) -> np.ndarray:
        """Class probabilities of the meta-features."""
        return np.asarray(self._runner.run(np.asarray(M, dtype=np.float32)), dtype=np.float64)

    def predict(self, M: np.ndarray) -> np.ndarray:
        """Class indices (classification) or the prediction on the fusion's target scale."""
        out = self.predict_proba(M)
        return np.argmax(out, axis=1) if hasattr(self, "classes_") else out[:, 0]


# ---- saving -------------------------------------------------------------------------------
def _own_parts(own: Any, task: str) -> tuple[Any, tuple[float, float] | None]:
    """The own model's fitted inner model and the affine map of its outputs to target units."""
    estimator = getattr(own, "estimator_", None)
    if not isinstance(estimator, Pipeline) or [n for n, _ in estimator.steps] != [
        "encode",
        "model",
    ]:
        raise TypeError(
            f"the own model {type(own).__name__} is not one of OwnLearner's candidates; only "
            "those can be stored without pickle"
        )
    inner = estimator.named_steps["model"]
    if task == "classification":
        return inner, None
    if not isinstance(inner, TransformedTargetRegressor):
        return inner, (0.0, 1.0)
    transformer = inner.transformer_
    if isinstance(transformer, StandardScaler):
        affine = (float(transformer.mean_[0]), float(transformer.scale_[0]))
    else:  # the public target bounds: t = (y - lower) / (upper - lower)
        keywords = getattr(transformer.func, "keywords", {})
        lower, upper = float(keywords["lower"]), float(keywords["upper"])
        affine = (lower, upper - lower)
    return inner.regressor_, affine


def _fusion_part(customizer: Customizer, n_meta: int) -> tuple[str, bytes, dict[str, Any]]:
    """The fusion model as (file name, bytes, manifest entry)."""
    fusion = customizer.fusion_model_
    if isinstance(fusion, StackedFusion):
        tensors = {
            "weights": np.ascontiguousarray(fusion.weights_, dtype=np.float64),
            "intercept": np.ascontiguousarray(fusion.intercept_, dtype=np.float64),
        }
        entry = {
            "kind": "stacked",
            "params": {k: _jsonable(v) for k, v in fusion.get_params().items()},
            "penalty": _finite_or_text(fusion.penalty_),
            "cv_losses": [[_finite_or_text(k), v] for k, v in fusion.cv_losses_.items()],
        }
        return "fusion.safetensors", safetensors.numpy.save(tensors), entry
    classes = getattr(customizer, "classes_", None)
    positions = None
    if classes is not None:
        positions = [int(c) for c in np.asarray(fusion.classes_)]
    n_out = 1 if classes is None else len(classes)
    data = sklearn_to_onnx(fusion, n_meta, output_positions=positions, n_outputs=n_out)
    return "fusion.onnx", data, {"kind": "onnx", "estimator": type(fusion).__name__}


def _finite_or_text(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple | list | np.ndarray):
        return [_jsonable(v) for v in np.asarray(value, dtype=object).tolist()]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"{type(value).__name__} value {value!r} cannot be stored as JSON")


def _params(customizer: Customizer) -> dict[str, Any]:
    params = customizer.get_params(deep=False)
    fusion = params["fusion_model"]
    if isinstance(fusion, StackedFusion):
        params["fusion_model"] = "stacked"
    elif not isinstance(fusion, str):
        raise TypeError(
            f"a fusion model of type {type(fusion).__name__} cannot be stored: use 'stacked', "
            "'linear' or 'forest'"
        )
    if not (params["own_model"] is None or isinstance(params["own_model"], str)):
        raise TypeError("an own model given as an estimator cannot be stored without pickle")
    if not (params["random_state"] is None or isinstance(params["random_state"], int)):
        params["random_state"] = None  # a RandomState object: its state is not kept
    return {k: _jsonable(params[k]) for k in _PARAMS}


def save_customizer(
    customizer: Customizer,
    directory: str | os.PathLike[str],
    *,
    trusted_keys: Mapping[str, Ed25519PublicKey] | None = None,
    signing_key: Ed25519PrivateKey | None = None,
    publisher: str = "own",
    metadata: Mapping[str, Any] | None = None,
) -> Path:
    """Store a fitted customizer in ``directory`` as safetensors, ONNX and JSON.

    Parameters
    ----------
    customizer : Customizer
        Fitted, with a public ``schema`` when it has an own model, an own model of
        :class:`~pubsubml.methods.pubsub.own.OwnLearner` (any kind), a fusion model given as
        ``"stacked"``, ``"linear"``, ``"forest"`` or a ``StackedFusion``, and subscribed models
        that are :class:`~pubsubml.artifacts.PublishedModel` s loaded from their artifacts.
    directory : path
        Must not exist, or be an empty folder.
    trusted_keys : mapping of key id to Ed25519PublicKey, optional
        The keys the subscribed models were verified with; the manifest records those that
        signed a selected model, and :func:`load_customizer` verifies against them.
    signing_key : Ed25519PrivateKey, optional
        Signs the own model's card (default: a fresh key, whose public half the manifest keeps).
    publisher : str, default="own"
        The name on the own model's card.
    metadata : mapping, optional
        JSON values kept in the manifest for the caller (e.g. the label column's name); read
        back as ``metadata_``.

    Returns
    -------
    Path

    Raises
    ------
    FileExistsError
        ``directory`` holds files.
    TypeError
        A part that cannot be stored without pickle (see ``customizer``).
    ValueError
        No schema for the own model, or no trusted key for a selected model's signer.
    """
    check_is_fitted(customizer, "fusion_model_")
    target = Path(directory)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise FileExistsError(f"{target} exists and is not an empty folder; not overwritten")
    params = _params(customizer)
    task = customizer.task
    classes = getattr(customizer, "classes_", None)
    parts: dict[str, bytes] = {}
    keys: dict[str, str] = {}
    own_entry: dict[str, Any] | None = None
    own = customizer.own_model_
    if isinstance(own, SavedOwnModel) or isinstance(customizer.fusion_model_, _OnnxFusion):
        raise TypeError("this customized model was loaded from a folder: copy that folder instead")
    if own is not None:
        if not isinstance(customizer.schema, FeatureSchema):
            raise ValueError("a customizer with an own model needs its public schema to be stored")
        inner, affine = _own_parts(own, task)
        own_schema = customizer.schema.subset([str(c) for c in own.feature_names_in_])
        key = signing_key if signing_key is not None else generate_signing_key()
        artifact = export_model(
            _OwnExport(inner, own_schema, None if classes is None else len(classes)),
            publisher=publisher,
            signing_key=key,
            format="onnx",
        )
        parts["own/card.json"] = artifact.card.to_json().encode("utf-8")
        parts["own/weights.onnx"] = artifact.weights
        keys[key_id(key.public_key())] = public_key_to_base64(key.public_key())
        own_entry = {
            "dir": "own",
            "choice": str(own.choice_),
            "cv_scores": {k: float(v) for k, v in getattr(own, "cv_scores_", {}).items()},
            "target_affine": None if affine is None else list(affine),
        }
    models = []
    received = [m for m in customizer.models_ if not isinstance(m, OwnModel)]
    received_ids = [i for i in customizer.selected_ids_ if i != OWN_ID]
    for index, (model, mid) in enumerate(zip(received, received_ids, strict=True)):
        if not isinstance(model, PublishedModel):
            raise TypeError(
                f"subscribed model {mid!r} is a {type(model).__name__}: only PublishedModels "
                "(signed artifacts) can be stored; export it with export_model first"
            )
        artifact = Artifact(card=model.card, weights=model.weights)
        signer = artifact.card.signer_key_id
        if signer is None or trusted_keys is None or signer not in trusted_keys:
            raise ValueError(f"no trusted key for the signer of subscribed model {mid!r}")
        keys[signer] = public_key_to_base64(trusted_keys[signer])
        weights_file = "weights.onnx" if artifact.card.format == "onnx" else "weights.safetensors"
        parts[f"models/{index}/card.json"] = artifact.card.to_json().encode("utf-8")
        parts[f"models/{index}/{weights_file}"] = artifact.weights
        models.append({"id": mid, "dir": f"models/{index}"})
    n_meta = len(customizer.meta_feature_names_)
    fusion_file, fusion_bytes, fusion_entry = _fusion_part(customizer, n_meta)
    parts[fusion_file] = fusion_bytes
    fusion_entry["file"] = fusion_file
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "created_at": datetime.now(UTC).isoformat(),
        "task": task,
        "classes": None if classes is None else _jsonable(classes),
        "feature_names_in": [str(c) for c in customizer.feature_names_in_],
        "schema": None if customizer.schema is None else json.loads(customizer.schema.to_json()),
        "params": params,
        "stacked": bool(customizer.stacked_),
        "target_scale": None
        if customizer.target_scale_ is None
        else [float(v) for v in customizer.target_scale_],
        "candidate_ids": list(customizer.candidate_ids_),
        "selection_metric": customizer.selection_metric_,
        "selection_scores": [
            None if not math.isfinite(float(s)) else float(s) for s in customizer.selection_scores_
        ],
        "selected_ids": list(customizer.selected_ids_),
        "meta_feature_names": list(customizer.meta_feature_names_),
        "meta_widths": [b.stop - b.start for b in customizer.meta_blocks_],
        "meta_std": [float(v) for v in customizer.meta_std_],
        "fallback": bool(customizer.fallback_),
        "fusion_weights": dict(customizer.fusion_weights_),
        "fusion": fusion_entry,
        "own": own_entry,
        "models": models,
        "keys": keys,
        "metadata": {str(k): _jsonable(v) for k, v in (metadata or {}).items()},
        "files": {name: hashlib.sha256(data).hexdigest() for name, data in sorted(parts.items())},
    }
    parts[MANIFEST_FILE] = json.dumps(manifest, indent=2).encode("utf-8")
    return _write_folder(target, parts)


def _write_folder(target: Path, parts: Mapping[str, bytes]) -> Path:
    """Write ``parts`` into a temporary sibling folder, flush it, and rename it to ``target``."""
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = parent / f".{target.name}.{secrets.token_hex(6)}.tmp"
    tmp.mkdir()
    try:
        for name, data in parts.items():
            path = tmp / name
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        if target.exists():
            target.rmdir()  # empty (checked by the caller)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


# ---- loading ------------------------------------------------------------------------------
def _read(root: Path, name: str, limit: int) -> bytes:
    """A regular file under ``root`` (no symbolic link, no path outside it), at most ``limit``."""
    if name.startswith("/") or ".." in Path(name).parts:
        raise UntrustedArtifactError(f"{name!r} is not a path inside the folder")
    try:
        return read_limited(root / name, limit)
    except FileNotFoundError:
        raise UntrustedArtifactError(f"{root}: {name} is missing") from None


def _manifest(root: Path) -> dict[str, Any]:
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder of a stored customized model")
    try:
        manifest = json.loads(_read(root, MANIFEST_FILE, MAX_MANIFEST_BYTES))
    except (UnicodeDecodeError, ValueError) as exc:
        raise UntrustedArtifactError(f"{MANIFEST_FILE} is not valid JSON: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise UntrustedArtifactError(f"{root} does not hold a stored customized model")
    if manifest.get("version") != VERSION:
        raise UntrustedArtifactError(
            f"stored customized model version {manifest.get('version')!r}; this pubsubml reads "
            f"version {VERSION}"
        )
    return manifest


def _verified_files(root: Path, manifest: Mapping[str, Any]) -> dict[str, bytes]:
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise UntrustedArtifactError(f"{MANIFEST_FILE} lists no files")
    out = {}
    for name, digest in files.items():
        data = _read(root, str(name), MAX_PART_BYTES)
        if hashlib.sha256(data).hexdigest() != digest:
            raise DigestMismatchError(f"{name} changed since the model was stored (SHA-256)")
        out[str(name)] = data
    return out


def _open_artifact(
    files: Mapping[str, bytes],
    folder: str,
    keys: Mapping[str, Ed25519PublicKey],
    check_privacy: bool,
) -> PublishedModel:
    """The artifact in ``folder`` from the digest-checked bytes, its card verified by ``keys``."""
    card_name = f"{folder}/{CARD_FILE}"
    if card_name not in files:
        raise UntrustedArtifactError(
            f"{MANIFEST_FILE} names a model folder {folder!r} it lists no card of"
        )
    card = ModelCard.from_json(files[card_name])
    weights_name = f"{folder}/{WEIGHTS_FILES[card.format]}"
    if weights_name not in files:
        raise UntrustedArtifactError(f"{MANIFEST_FILE} lists no weights for {folder!r}")
    return Artifact(card=card, weights=files[weights_name]).open(
        keys, check_privacy=check_privacy, max_weights_bytes=MAX_PART_BYTES
    )


def _fusion(entry: Mapping[str, Any], data: bytes, task: str, classes: Any, n_meta: int) -> Any:
    if entry.get("kind") == "stacked":
        tensors = safetensors.numpy.load(data)
        params = dict(entry["params"])
        params["penalties"] = (
            None if params.get("penalties") is None else [float(p) for p in params["penalties"]]
        )
        fusion = StackedFusion(**params)
        fusion.weights_ = np.asarray(tensors["weights"], dtype=np.float64)
        fusion.intercept_ = np.asarray(tensors["intercept"], dtype=np.float64)
        k = int(fusion.block_width)
        clf = task == "classification"
        if fusion.weights_.shape[0] * (k if clf else 1) != n_meta or fusion.intercept_.shape[0] != (
            k if clf else 1
        ):
            raise UntrustedArtifactError("the stacked fusion's weights do not fit the meta layout")
        fusion.penalty_ = float(entry["penalty"])
        fusion.cv_losses_ = {float(lam): float(loss) for lam, loss in entry["cv_losses"]}
        fusion.coef_ = (
            np.kron(fusion.weights_, np.eye(k)) if clf else fusion.weights_.reshape(1, -1)
        )
        fusion.fallback_ = bool(fusion.own_first and math.isinf(fusion.penalty_))
        if clf:
            fusion.classes_ = np.arange(k)
        fusion.n_features_in_ = n_meta
        return fusion
    if entry.get("kind") != "onnx":
        raise UntrustedArtifactError(f"unknown fusion kind {entry.get('kind')!r}")
    n_out = 1 if classes is None else len(classes)
    check_onnx(data, n_inputs=n_meta, n_outputs=n_out, max_bytes=MAX_PART_BYTES)
    runner = OnnxRunner(data, n_inputs=n_meta, n_outputs=n_out)
    return _OnnxFusion(runner, None if classes is None else len(classes))


def _blocks(widths: Sequence[int]) -> list[slice]:
    edges = [0, *itertools.accumulate(int(w) for w in widths)]
    return [slice(a, b) for a, b in itertools.pairwise(edges)]


def load_customizer(
    directory: str | os.PathLike[str],
    *,
    trusted_keys: Mapping[str, Ed25519PublicKey] | None = None,
) -> Customizer:
    """Read a customized model written by :func:`save_customizer`, verified, as a fitted
    :class:`~pubsubml.methods.pubsub.customizer.Customizer`.

    Parameters
    ----------
    directory : path
    trusted_keys : mapping of key id to Ed25519PublicKey, optional
        Verify the subscribed models against these keys instead of those the manifest recorded
        when the model was stored (the own model is always checked against its recorded key).

    Returns
    -------
    Customizer
        Fitted: ``predict``, ``predict_proba``, ``meta_features``; ``models`` holds the selected
        subscribed models, ``own_model_`` a :class:`SavedOwnModel` and ``metadata_`` what
        :func:`save_customizer` was given.

    Raises
    ------
    FileNotFoundError
        ``directory`` is not a folder.
    UntrustedArtifactError
        Not a stored customized model, a missing, oversized or linked file, or an unsafe graph.
    DigestMismatchError
        A file changed since it was stored.
    SignatureError
        A card's signature does not verify.
    """
    root = Path(directory)
    manifest = _manifest(root)
    files = _verified_files(root, manifest)
    try:
        return _rebuild(manifest, files, trusted_keys)
    except (KeyError, TypeError, IndexError, AttributeError) as exc:
        raise UntrustedArtifactError(f"{MANIFEST_FILE} is malformed: {exc!r}") from None


def _rebuild(
    manifest: Mapping[str, Any],
    files: Mapping[str, bytes],
    trusted_keys: Mapping[str, Ed25519PublicKey] | None,
) -> Customizer:
    """The fitted Customizer the manifest and the verified files describe."""
    recorded = {k: public_key_from_base64(v) for k, v in manifest["keys"].items()}
    task = manifest["task"]
    classes = None if manifest["classes"] is None else np.asarray(manifest["classes"])
    schema = (
        None if manifest["schema"] is None else FeatureSchema.model_validate(manifest["schema"])
    )
    params = dict(manifest["params"])
    widths = [int(w) for w in manifest["meta_widths"]]
    n_meta = len(manifest["meta_feature_names"])
    received = [
        _open_artifact(
            files, str(entry["dir"]), recorded if trusted_keys is None else trusted_keys, True
        )
        for entry in manifest["models"]
    ]
    own = None
    if manifest["own"] is not None:
        entry = manifest["own"]
        affine = entry["target_affine"]
        own = SavedOwnModel(
            _open_artifact(files, str(entry["dir"]), recorded, False),
            classes,
            None if affine is None else (float(affine[0]), float(affine[1])),
            entry["choice"],
            entry["cv_scores"],
        )
    fusion_entry = manifest["fusion"]
    fusion = _fusion(fusion_entry, files[fusion_entry["file"]], task, classes, n_meta)
    if params.get("target_bounds") is not None:
        params["target_bounds"] = tuple(params["target_bounds"])
    customizer = Customizer(
        models=received,
        model_ids=[m["id"] for m in manifest["models"]],
        schema=schema,
        runner=published_runner,
        **params,
    )
    features = [str(f) for f in manifest["feature_names_in"]]
    selected_ids = list(manifest["selected_ids"])
    candidates = list(manifest["candidate_ids"])
    models_: list[Any] = list(received)
    if own is not None and OWN_ID in selected_ids:
        models_.insert(0, OwnModel(own, list(own.input_features)))
    if sum(widths) != n_meta or len(widths) != len(models_):
        raise UntrustedArtifactError("the meta-feature layout does not match the stored models")
    if classes is not None:
        customizer.classes_ = classes
    customizer.stacked_ = bool(manifest["stacked"])
    scale = manifest["target_scale"]
    customizer.target_scale_ = None if scale is None else (float(scale[0]), float(scale[1]))
    customizer.n_features_in_ = len(features)
    customizer.feature_names_in_ = np.asarray(features, dtype=object)
    customizer.own_model_ = cast(Any, own)  # M^s as a black box: OwnLearner's interface
    customizer.candidate_ids_ = candidates
    customizer.selection_metric_ = manifest["selection_metric"]
    customizer.selection_scores_ = np.asarray(
        [np.nan if s is None else s for s in manifest["selection_scores"]], dtype=np.float64
    )
    customizer.selected_ = np.asarray([candidates.index(i) for i in selected_ids], dtype=np.int64)
    customizer.selected_ids_ = selected_ids
    customizer.models_ = models_
    customizer.meta_blocks_ = _blocks(widths)
    customizer.meta_feature_names_ = list(manifest["meta_feature_names"])
    customizer.meta_std_ = np.asarray(manifest["meta_std"], dtype=np.float64)
    customizer.fusion_model_ = fusion
    customizer.fallback_ = bool(manifest["fallback"])
    customizer.fusion_weights_ = {str(k): float(v) for k, v in manifest["fusion_weights"].items()}
    customizer.metadata_ = dict(manifest.get("metadata") or {})
    return customizer
