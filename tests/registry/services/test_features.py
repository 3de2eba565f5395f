"""Tests of pubsubml.registry.services.features: the consortium's feature dictionary."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from pubsubml.errors import ConflictError, PermissionDeniedError, SchemaMismatchError
from pubsubml.registry.auth import ADMIN, Principal
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.services.features import (
    add_features,
    check_against_dictionary,
    known_features,
    list_features,
)
from pubsubml.registry.tables import EventRow
from pubsubml.schema import Feature, FeatureSchema
from registry.conftest import statements

AGE = Feature(name="age", lower=0, upper=100, default=50)
SEX = Feature(name="sex", kind="categorical", categories=("f", "m"), default="f")
WBC = Feature(name="wbc", lower=0, upper=50, default=7)


def _add(db: Database, features: list[Feature]) -> list[Feature]:
    with db.write() as s:
        return add_features(s, ADMIN, features)


def _events(db: Database) -> list[tuple[str, dict[str, object]]]:
    with db.read() as s:
        rows = s.execute(select(EventRow).order_by(EventRow.position)).scalars()
        return [(r.kind, json.loads(r.payload)) for r in rows]


def test_adding_returns_only_new_features_and_logs_them(db: Database) -> None:
    assert _add(db, [WBC, AGE]) == [WBC, AGE]
    assert _add(db, [AGE, SEX, SEX]) == [SEX]
    assert _add(db, [AGE, SEX]) == []
    assert _events(db) == [
        ("features.added", {"names": ["wbc", "age"]}),
        ("features.added", {"names": ["sex"]}),
    ]
    with db.read() as s:
        assert list_features(s) == [AGE, SEX, WBC]  # by name, as defined


@pytest.mark.parametrize(
    "changed",
    [
        AGE.model_copy(update={"upper": 120.0}),
        AGE.model_copy(update={"default": 40.0}),
        AGE.model_copy(update={"description": "age in years"}),
    ],
)
def test_a_feature_is_never_redefined(db: Database, changed: Feature) -> None:
    _add(db, [AGE])
    with pytest.raises(ConflictError, match="immutable"):
        _add(db, [WBC, changed])
    with db.read() as s:
        assert list_features(s) == [AGE]  # the whole batch was refused
    assert len(_events(db)) == 1


def test_a_batch_that_contradicts_itself_is_refused(db: Database) -> None:
    with pytest.raises(ConflictError, match="'age'"):
        _add(db, [AGE, AGE.model_copy(update={"lower": 1.0})])
    with db.read() as s:
        assert list_features(s) == []


def test_only_the_admin_edits_the_dictionary(db: Database) -> None:
    site = Principal(kind="site", site_id=1, name="a", roles="both")
    with pytest.raises(PermissionDeniedError, match="administrator"), db.write() as s:
        add_features(s, site, [AGE])
    assert _events(db) == []


def test_known_features_is_the_defined_subset(db: Database) -> None:
    _add(db, [AGE, SEX])
    with db.read() as s:
        assert known_features(s, ["sex", "zzz", "age", "sex"]) == {"age", "sex"}
        assert known_features(s, []) == set()


def test_a_model_schema_must_match_the_agreed_entries(db: Database) -> None:
    _add(db, [AGE, SEX])
    described = AGE.model_copy(update={"description": "in years"})
    with db.read() as s:
        check_against_dictionary(s, FeatureSchema(features=(SEX, described)))  # no error
        with pytest.raises(SchemaMismatchError, match=r"\['wbc'\].*not in"):
            check_against_dictionary(s, FeatureSchema(features=(AGE, WBC)))
        narrower = AGE.model_copy(update={"upper": 90.0})
        with pytest.raises(SchemaMismatchError, match=r"\['age'\] differ"):
            check_against_dictionary(s, FeatureSchema(features=(narrower, SEX)))
        recoded = SEX.model_copy(update={"categories": ("m", "f")})
        with pytest.raises(SchemaMismatchError, match=r"\['sex'\] differ"):
            check_against_dictionary(s, FeatureSchema(features=(recoded,)))


def test_dictionary_entries_are_read_once_per_engine(db: Database) -> None:
    """Entries are immutable: once read they are checked from memory, and an entry another
    replica adds later is read when a model first uses it."""
    _add(db, [AGE, SEX])
    narrower = AGE.model_copy(update={"upper": 99.0})
    bmi = Feature(name="bmi", lower=0, upper=60, default=25)
    with statements(db, "FROM features") as reads:
        with db.read() as s:
            check_against_dictionary(s, FeatureSchema(features=(AGE, SEX)))
            assert len(reads) == 1
            check_against_dictionary(s, FeatureSchema(features=(AGE,)))
            with pytest.raises(SchemaMismatchError, match="differ"):
                check_against_dictionary(s, FeatureSchema(features=(narrower,)))
            assert len(reads) == 1  # all from memory
        other = Database(str(db.engine.url))  # another replica of the same database
        try:
            _add(other, [WBC])
        finally:
            other.dispose()
        with db.read() as s:
            check_against_dictionary(s, FeatureSchema(features=(AGE, WBC)))
            with pytest.raises(SchemaMismatchError, match="not in the consortium"):
                check_against_dictionary(s, FeatureSchema(features=(bmi,)))
        assert len(reads) == 3  # WBC read once, then bmi looked for (and not kept)
