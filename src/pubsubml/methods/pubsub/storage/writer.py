"""Writing a fitted customizer as a folder of the stored format (:mod:`.format`), without pickle.

:func:`save_customizer` converts each part to a safe file — M^s to a signed ONNX artifact, the
received models as they came, the fusion model to safetensors or ONNX — lists every file's digest
in the manifest, and writes the folder to a temporary sibling renamed into place.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import secrets
import shutil
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.numpy
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from sklearn.compose import TransformedTargetRegressor
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted

from pubsubml.artifacts import PublishedModel, export_model
from pubsubml.artifacts.artifact import Artifact
from pubsubml.artifacts.onnx_export import sklearn_to_onnx
from pubsubml.artifacts.signing import generate_signing_key, key_id, public_key_to_base64
from pubsubml.methods.pubsub.customizer import OWN_ID, Customizer
from pubsubml.methods.pubsub.fusion import StackedFusion
from pubsubml.methods.pubsub.own import OwnModel
from pubsubml.methods.pubsub.storage.format import (
    FORMAT,
    MANIFEST_FILE,
    PARAMS,
    VERSION,
    OnnxFusion,
    SavedOwnModel,
    finite_or_text,
    jsonable,
)
from pubsubml.schema import FeatureSchema

__all__ = ["save_customizer"]


class _OwnExport:
    """What :func:`export_model` reads of a plain model on the schema-encoded matrix."""

    def __init__(self, model: Any, schema: FeatureSchema, n_classes: int | None) -> None:
        self.estimator_ = model
        self.schema_ = schema
        if n_classes is not None:
            self.classes_ = np.arange(n_classes)


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
            "params": {k: jsonable(v) for k, v in fusion.get_params().items()},
            "penalty": finite_or_text(fusion.penalty_),
            "cv_losses": [[finite_or_text(k), v] for k, v in fusion.cv_losses_.items()],
        }
        return "fusion.safetensors", safetensors.numpy.save(tensors), entry
    classes = getattr(customizer, "classes_", None)
    positions = None
    if classes is not None:
        positions = [int(c) for c in np.asarray(fusion.classes_)]
    n_out = 1 if classes is None else len(classes)
    data = sklearn_to_onnx(fusion, n_meta, output_positions=positions, n_outputs=n_out)
    return "fusion.onnx", data, {"kind": "onnx", "estimator": type(fusion).__name__}


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
    return {k: jsonable(params[k]) for k in PARAMS}


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
    if isinstance(customizer.own_model_, SavedOwnModel) or isinstance(
        customizer.fusion_model_, OnnxFusion
    ):
        raise TypeError("this customized model was loaded from a folder: copy that folder instead")
    parts: dict[str, bytes] = {}
    keys: dict[str, str] = {}
    own_entry = _own_part(customizer, parts, keys, signing_key, publisher)
    models = _received_parts(customizer, parts, keys, trusted_keys)
    fusion_file, fusion_bytes, fusion_entry = _fusion_part(
        customizer, len(customizer.meta_feature_names_)
    )
    parts[fusion_file] = fusion_bytes
    fusion_entry["file"] = fusion_file
    entries = {"fusion": fusion_entry, "own": own_entry, "models": models, "keys": keys}
    manifest = _manifest(customizer, params, entries, metadata, parts)
    parts[MANIFEST_FILE] = json.dumps(manifest, indent=2).encode("utf-8")
    return _write_folder(target, parts)


def _own_part(
    customizer: Customizer,
    parts: dict[str, bytes],
    keys: dict[str, str],
    signing_key: Ed25519PrivateKey | None,
    publisher: str,
) -> dict[str, Any] | None:
    """M^s as a signed ONNX artifact in ``own/`` (its key added to ``keys``); its manifest entry."""
    own = customizer.own_model_
    if own is None:
        return None
    if not isinstance(customizer.schema, FeatureSchema):
        raise ValueError("a customizer with an own model needs its public schema to be stored")
    classes = getattr(customizer, "classes_", None)
    inner, affine = _own_parts(own, customizer.task)
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
    return {
        "dir": "own",
        "choice": str(own.choice_),
        "cv_scores": {k: float(v) for k, v in getattr(own, "cv_scores_", {}).items()},
        "target_affine": None if affine is None else list(affine),
    }


def _received_parts(
    customizer: Customizer,
    parts: dict[str, bytes],
    keys: dict[str, str],
    trusted_keys: Mapping[str, Ed25519PublicKey] | None,
) -> list[dict[str, str]]:
    """The selected received models as they came, in ``models/<i>/`` (their signers' keys added
    to ``keys``); their manifest entries."""
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
    return models


def _manifest(
    customizer: Customizer,
    params: dict[str, Any],
    entries: Mapping[str, Any],
    metadata: Mapping[str, Any] | None,
    parts: Mapping[str, bytes],
) -> dict[str, Any]:
    """``customized.json``: the fitted state, the parts' ``entries`` and every part's digest."""
    classes = getattr(customizer, "classes_", None)
    scale = customizer.target_scale_
    return {
        "format": FORMAT,
        "version": VERSION,
        "created_at": datetime.now(UTC).isoformat(),
        "task": customizer.task,
        "classes": None if classes is None else jsonable(classes),
        "feature_names_in": [str(c) for c in customizer.feature_names_in_],
        "schema": None if customizer.schema is None else json.loads(customizer.schema.to_json()),
        "params": params,
        "stacked": bool(customizer.stacked_),
        "target_scale": None if scale is None else [float(v) for v in scale],
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
        "fusion": entries["fusion"],
        "own": entries["own"],
        "models": entries["models"],
        "keys": entries["keys"],
        "metadata": {str(k): jsonable(v) for k, v in (metadata or {}).items()},
        "files": {name: hashlib.sha256(data).hexdigest() for name, data in sorted(parts.items())},
    }


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
