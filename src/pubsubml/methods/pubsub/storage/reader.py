"""Reading a stored customized model back, verified, as a fitted customizer (:mod:`.format`).

:func:`load_customizer` checks every file's digest against the manifest, re-verifies every card's
signature and weights digest, runs the ONNX safety checks on the fusion graph, and rebuilds the
fitted :class:`~pubsubml.methods.pubsub.customizer.Customizer`: nothing is unpickled and nothing is
executed but ONNX graphs and numpy arithmetic.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import safetensors.numpy
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from pubsubml.artifacts import PublishedModel
from pubsubml.artifacts.artifact import CARD_FILE, WEIGHTS_FILES, Artifact, read_limited
from pubsubml.artifacts.card import ModelCard
from pubsubml.artifacts.onnx_codec import OnnxRunner, check_onnx
from pubsubml.artifacts.signing import public_key_from_base64
from pubsubml.errors import DigestMismatchError, UntrustedArtifactError
from pubsubml.methods.pubsub.customizer import OWN_ID, Customizer
from pubsubml.methods.pubsub.fusion import StackedFusion
from pubsubml.methods.pubsub.outputs import published_runner
from pubsubml.methods.pubsub.own import OwnModel
from pubsubml.methods.pubsub.storage.format import (
    FORMAT,
    MANIFEST_FILE,
    MAX_MANIFEST_BYTES,
    MAX_PART_BYTES,
    VERSION,
    OnnxFusion,
    SavedOwnModel,
)
from pubsubml.schema import FeatureSchema

__all__ = ["load_customizer"]


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
    return OnnxFusion(runner, None if classes is None else len(classes))


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
