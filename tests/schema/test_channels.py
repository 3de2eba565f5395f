"""Tests of pubsubml.schema.channels: parsing and matching subscription channels."""

from __future__ import annotations

import itertools
import random

import pytest
from pydantic import ValidationError

from pubsubml.errors import ChannelSyntaxError
from pubsubml.schema import Channel
from pubsubml.schema.channels import WILDCARD

NAMES = ["age", "sex", "wbc", "bmi", "icu_los"]


def _reference(text: str, have: set[str]) -> bool:
    """The channel as a Python boolean expression (``and`` binds tighter than ``or``)."""
    expression = text.replace("&", " and ").replace("|", " or ")
    return bool(eval(expression, {}, {n: n in have for n in NAMES}))


def _random_channel(rng: random.Random) -> str:
    terms = [" & ".join(rng.sample(NAMES, rng.randint(1, 3))) for _ in range(rng.randint(1, 3))]
    return " | ".join(terms)


def test_matching_agrees_with_boolean_evaluation_on_every_feature_set() -> None:
    rng = random.Random(0)
    subsets = [set(c) for k in range(len(NAMES) + 1) for c in itertools.combinations(NAMES, k)]

    for _ in range(30):
        text = _random_channel(rng)
        channel = Channel.parse(text)
        for have in subsets:
            assert channel.matches(have) == _reference(text, have), (text, have)


def test_terms_are_sorted_and_deduplicated() -> None:
    channel = Channel.parse("wbc & age & wbc | sex")

    assert channel.terms == (("age", "wbc"), ("sex",))
    assert str(channel) == "age & wbc | sex"


def test_unicode_operators_and_whitespace_are_equivalent() -> None:
    ascii_channel = Channel.parse("age & sex | wbc")

    assert Channel.parse("age ∧ sex ∨ wbc") == ascii_channel
    assert Channel.parse("  age&sex|wbc\t") == ascii_channel
    assert Channel.parse("sex & age | wbc") == ascii_channel


def test_str_round_trips_and_equal_channels_hash_alike() -> None:
    channel = Channel.parse("icu_los ∧ age ∨ lab.wbc-count")

    again = Channel.parse(str(channel))

    assert again == channel
    assert len({channel, again}) == 1
    assert Channel.model_validate_json(channel.model_dump_json()) == channel


def test_features_lists_every_named_feature() -> None:
    assert Channel.parse("age & sex | wbc | age").features == {"age", "sex", "wbc"}


def test_matches_accepts_any_iterable_of_names() -> None:
    channel = Channel.parse("age & sex")

    assert channel.matches(iter(["sex", "age", "bmi"]))
    assert channel.matches(("age", "sex"))
    assert not channel.matches([])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("& age", "has no feature before it"),
        ("age &", "ends with an operator"),
        ("age | | sex", "has no feature before it"),
        ("age && sex", "has no feature before it"),
        ("age sex", "missing operator before 'sex'"),
        ("age + sex", "unexpected character '\\+'"),
        ("age & (sex)", "unexpected character '\\('"),
        ("1age", "unexpected character '1'"),
    ],
)
def test_malformed_text_raises_channel_syntax_error(text: str, message: str) -> None:
    with pytest.raises(ChannelSyntaxError, match=message):
        Channel.parse(text)


def test_non_string_text_raises_channel_syntax_error() -> None:
    with pytest.raises(ChannelSyntaxError):
        Channel.parse(None)  # type: ignore[arg-type]


def test_syntax_errors_are_value_errors() -> None:
    with pytest.raises(ValueError):
        Channel.parse("age |")


@pytest.mark.parametrize(
    "terms",
    [(), (("age",), ()), (("1age",),), (("a" * 129,),)],
    ids=["none", "empty", "bad", "long"],
)
def test_direct_construction_is_validated(terms: tuple[tuple[str, ...], ...]) -> None:
    with pytest.raises(ValidationError):
        Channel(terms=terms)


def test_channels_are_frozen() -> None:
    channel = Channel.parse("age")

    with pytest.raises(ValidationError):
        channel.terms = (("sex",),)  # type: ignore[misc]


def test_overlong_name_raises_channel_syntax_error() -> None:
    with pytest.raises(ChannelSyntaxError, match="invalid feature name"):
        Channel.parse("age & " + "a" * 129)


def test_the_wildcard_matches_every_model_and_names_no_feature() -> None:
    every = Channel.parse(" * ")

    assert every.is_wildcard and every.terms == ((WILDCARD,),)
    assert every.matches([]) and every.matches(["age"]) and every.matches(iter(NAMES))
    assert every.features == set()
    assert not Channel.parse("age").is_wildcard


def test_the_wildcard_round_trips_through_str_and_json() -> None:
    every = Channel.parse("*")

    assert str(every) == "*"
    assert Channel.parse(str(every)) == every
    assert Channel.model_validate_json(every.model_dump_json()) == every
    assert Channel(terms=(("*",),)) == every


@pytest.mark.parametrize("text", ["* | age", "age | *", "* & age", "age & *", "**", "* *", "a*"])
def test_the_wildcard_must_be_the_whole_channel(text: str) -> None:
    with pytest.raises(ChannelSyntaxError, match="must be the whole channel"):
        Channel.parse(text)


@pytest.mark.parametrize("terms", [(("*", "age"),), (("*",), ("age",)), (("age",), ("*",))])
def test_direct_construction_refuses_a_wildcard_mixed_with_features(
    terms: tuple[tuple[str, ...], ...],
) -> None:
    with pytest.raises(ValidationError, match="must be the whole channel"):
        Channel(terms=terms)
