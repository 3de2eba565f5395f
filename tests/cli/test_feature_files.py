"""Files of public feature definitions: every accepted shape gives the same schema, and every bad
file is one error line naming the file (and the feature)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pubsubml.cli.feature_files import parse_feature_definitions, read_feature_file
from pubsubml.errors import DataValidationError, FeatureDefinitionError
from pubsubml.schema import Feature, FeatureSchema

AGE = {"lower": 0, "upper": 120, "default": 50}
SEX = {"kind": "categorical", "categories": ["f", "m"], "default": "f"}
SCHEMA = FeatureSchema(
    features=(Feature(name="age", **AGE), Feature(name="sex", **SEX))  # type: ignore[arg-type]
)


@pytest.mark.parametrize(
    "document",
    [
        json.loads(SCHEMA.to_json()),  # as `pubsubml schema infer` writes it
        [{"name": "age", **AGE}, {"name": "sex", **SEX}],  # a list of features
        {"age": AGE, "sex": SEX},  # names mapped to definitions (the --public-bounds file)
        {"age": {"name": "age", **AGE}, "sex": SEX},  # a definition may repeat its name
    ],
    ids=["schema", "list", "mapping", "mapping-with-names"],
)
def test_every_shape_reads_as_the_same_schema(document: Any, tmp_path: Path) -> None:
    path = tmp_path / "features.json"
    path.write_text(json.dumps(document))

    schema = read_feature_file(path)

    assert schema == SCHEMA


def test_one_feature_reads_as_a_schema_of_one(tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"name": "age", **AGE}))

    assert read_feature_file(path) == SCHEMA.subset(["age"])


def test_a_schema_written_by_to_json_reads_back_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "schema.json"
    path.write_text(SCHEMA.to_json())

    assert read_feature_file(path).to_json() == SCHEMA.to_json()


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{not json", ["is not JSON", "line 1, column 2"]),
        ("5", ["holds a JSON number", "expected"]),
        ("{}", ["holds an empty object"]),
        ("[]", ["holds no feature"]),
        ('{"features": 3}', ['"features" must be a list']),
        ('{"age": 5}', ["'age' maps to a JSON number"]),
        ("[1]", ["feature #1 is a JSON number"]),
        ('{"age": {"lower": 0, "upper": 120}}', ["feature 'age'", "default is missing"]),
        ('{"age": {"lower": 0, "default": 5}}', ["feature 'age'", "needs public lower and upper"]),
        ('{"age": {"lower": 9, "upper": 1, "default": 5}}', ["lower must be < upper"]),
        ('{"age": {"lower": 0, "upper": 9, "default": 5, "mean": 4}}', ["unknown field 'mean'"]),
        ('{"age": {"name": "sex", "lower": 0, "upper": 1, "default": 0}}', ["names feature"]),
        (
            '[{"name": "age", "lower": 0, "upper": 1, "default": 0}, '
            '{"name": "age", "lower": 0, "upper": 1, "default": 0}]',
            ["duplicate feature names"],
        ),
        ('[{"name": "a b", "lower": 0, "upper": 1, "default": 0}]', ["invalid feature name"]),
    ],
)
def test_a_bad_file_is_one_line_naming_the_file(
    text: str, words: list[str], tmp_path: Path
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)

    with pytest.raises(FeatureDefinitionError) as info:
        read_feature_file(path)

    message = str(info.value)
    assert len(message.splitlines()) == 1 and message.startswith(str(path)), message
    for word in words:
        assert word in message, (word, message)


def test_missing_folder_and_non_utf8_files_are_refused(tmp_path: Path) -> None:
    (tmp_path / "latin1.json").write_bytes(b'{"\xe9ge": 1}')
    cases = {
        tmp_path / "absent.json": "does not exist",
        tmp_path: "is a folder",
        tmp_path / "latin1.json": "not UTF-8",
    }
    for path, words in cases.items():
        with pytest.raises(FeatureDefinitionError, match=words):
            read_feature_file(path)


def test_the_error_is_a_validation_error_of_the_package() -> None:
    with pytest.raises(DataValidationError):
        parse_feature_definitions("age")
    with pytest.raises(ValueError, match="the feature definitions holds a JSON string"):
        parse_feature_definitions("age")
