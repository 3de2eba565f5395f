"""Files of public feature definitions: the one format every command that takes one reads.

The consortium's public feature definitions (names, kinds, bounds, categories, defaults; pubsub-ml.txt
§3.2) travel as a JSON file that ``pubsubml features add``, ``schema infer --public-bounds``,
``schema check``, ``train --schema`` and ``customize --schema`` all accept in any of these shapes
(README, "Feature definition files"):

* a schema, as ``pubsubml schema infer`` and :meth:`~pubsubml.schema.FeatureSchema.to_json` write
  it: ``{"features": [{"name": "age", "lower": 0, "upper": 120, "default": 50}, ...]}``;
* a list of features: ``[{"name": "age", "lower": 0, "upper": 120, "default": 50}, ...]``;
* names mapped to their definitions:
  ``{"age": {"lower": 0, "upper": 120, "default": 50}, "sex": {"kind": "categorical", ...}}``;
* one feature: ``{"name": "age", "lower": 0, "upper": 120, "default": 50}``.

A feature's fields are those of :class:`~pubsubml.schema.Feature`: ``kind`` (``"numeric"``, the
default, or ``"categorical"``), ``lower`` and ``upper`` (numeric), ``categories`` (categorical),
``default`` (required) and ``description``.  Whatever is wrong with a file is reported as one line
naming the file and the feature.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pubsubml.errors import FeatureDefinitionError
from pubsubml.schema import Feature, FeatureSchema

__all__ = ["SHAPES", "parse_feature_definitions", "read_feature_file"]

#: The accepted shapes, as error messages name them.
SHAPES = (
    '{"features": [...]} (a schema), a list of features, {"NAME": {definition}, ...} or one feature'
)


def read_feature_file(path: str | os.PathLike[str]) -> FeatureSchema:
    """Read a JSON file of public feature definitions in any accepted shape.

    Parameters
    ----------
    path : path
        A JSON file (UTF-8): a schema ``{"features": [...]}``, a list of features, a mapping of
        feature names to their definitions, or one feature.

    Returns
    -------
    FeatureSchema
        The features in the file's order.

    Raises
    ------
    FeatureDefinitionError
        The file is missing, a folder, unreadable, not UTF-8, not JSON, of no accepted shape,
        or holds an invalid feature (bounds, categories, default) or the same name twice; the
        message is one line that names the file.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "bounds.json").write_text('{"age": {"lower": 0, "upper": 120, "default": 50}}')
    >>> read_feature_file(folder / "bounds.json").names
    ['age']
    >>> _ = (folder / "bad.json").write_text('{"age": {"lower": 0, "default": 50}}')
    >>> try:
    ...     read_feature_file(folder / "bad.json")
    ... except FeatureDefinitionError as exc:
    ...     print(str(exc).removeprefix(str(folder)))
    /bad.json: feature 'age': numeric feature 'age' needs public lower and upper bounds
    """
    file = Path(path)
    if not file.exists():
        raise FeatureDefinitionError(f"{file} does not exist")
    if file.is_dir():
        raise FeatureDefinitionError(f"{file} is a folder, not a JSON file")
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise FeatureDefinitionError(f"{file} is not JSON: not UTF-8 text") from None
    except OSError as exc:
        raise FeatureDefinitionError(f"cannot read {file}: {exc.strerror or exc}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FeatureDefinitionError(
            f"{file} is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    return parse_feature_definitions(raw, source=str(file))


def parse_feature_definitions(
    raw: Any, *, source: str = "the feature definitions"
) -> FeatureSchema:
    """Public feature definitions decoded from JSON, in any accepted shape, as a schema.

    Parameters
    ----------
    raw : object
        A decoded JSON document (see :func:`read_feature_file` for the shapes).
    source : str, default="the feature definitions"
        What the definitions came from, named in error messages.

    Returns
    -------
    FeatureSchema

    Raises
    ------
    FeatureDefinitionError
        No accepted shape, an invalid feature or the same name twice (one line).

    Examples
    --------
    >>> parse_feature_definitions([{"name": "wbc", "lower": 0, "upper": 50, "default": 7}]).names
    ['wbc']
    >>> parse_feature_definitions({"sex": {"kind": "categorical", "categories": ["f", "m"],
    ...                                    "default": "f"}})["sex"].categories
    ('f', 'm')
    """
    items = _items(raw, source)
    features = [_feature(item, i, source) for i, item in enumerate(items)]
    try:
        return FeatureSchema(features=tuple(features))
    except ValidationError as exc:
        raise FeatureDefinitionError(f"{source}: {_problem(exc)}") from None


def _items(raw: Any, source: str) -> list[Any]:
    """The feature objects of a document, each a mapping with a ``name``."""
    if isinstance(raw, Mapping) and "features" in raw:
        raw = raw["features"]
        if not isinstance(raw, list):
            raise FeatureDefinitionError(f'{source}: "features" must be a list of features')
    if isinstance(raw, list):
        if not raw:
            raise FeatureDefinitionError(f"{source} holds no feature")
        return raw
    if not isinstance(raw, Mapping) or not raw:
        kind = "an empty object" if isinstance(raw, Mapping) else f"a JSON {_json_type(raw)}"
        raise FeatureDefinitionError(f"{source} holds {kind}; expected {SHAPES}")
    if all(isinstance(spec, Mapping) for spec in raw.values()):
        items = []
        for name, spec in raw.items():
            if spec.get("name", name) != name:
                raise FeatureDefinitionError(
                    f"{source}: the definition under {name!r} names feature {spec['name']!r}"
                )
            items.append({**spec, "name": name})
        return items
    if "name" in raw:
        return [raw]
    bad = next(k for k, v in raw.items() if not isinstance(v, Mapping))
    raise FeatureDefinitionError(
        f"{source}: {bad!r} maps to a JSON {_json_type(raw[bad])}, not to a definition "
        '{"lower": ..., "upper": ..., "default": ...}'
    )


def _feature(item: Any, index: int, source: str) -> Feature:
    if not isinstance(item, Mapping):
        raise FeatureDefinitionError(
            f"{source}: feature #{index + 1} is a JSON {_json_type(item)}, not an object"
        )
    name = item.get("name")
    label = f"feature {name!r}" if isinstance(name, str) else f"feature #{index + 1}"
    try:
        return Feature.model_validate(dict(item))
    except ValidationError as exc:
        raise FeatureDefinitionError(f"{source}: {label}: {_problem(exc)}") from None


def _problem(exc: ValidationError) -> str:
    """pydantic's first error as one line (with how many more there are)."""
    errors = exc.errors()
    first = errors[0]
    message = str(first.get("msg", "invalid")).removeprefix("Value error, ")
    where = ".".join(str(part) for part in first.get("loc", ()))
    text = f"{where}: {message}" if where else message
    if first.get("type") == "missing" and where:
        text = f"{where} is missing"
    elif first.get("type") == "extra_forbidden" and where:
        text = f"unknown field {where!r} (fields: {', '.join(Feature.model_fields)})"
    more = len(errors) - 1
    return text + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return {str: "string", list: "array", dict: "object", type(None): "null"}.get(
        type(value), type(value).__name__
    )
