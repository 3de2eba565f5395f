"""Subscription channels: which published models a subscriber receives (pubsub-ml.txt §3.2).

A channel is a disjunction of conjunctions of feature names, F1 ∨ … ∨ Fk: a model matches when its
input features contain every feature of at least one term Fi (pubsub-ml.txt §3.2, Example 1).
Feature names follow the rules of the public feature dictionary
(:mod:`~pubsubml.schema.features`).  The wildcard ``*`` is the channel of every model (of the
subscription's task): it names no feature and matches any feature set.

Grammar (whitespace is ignored; ``&`` binds tighter than ``|``; ``∧``/``∨`` are synonyms)::

    channel := "*" | term ("|" term)*
    term    := name ("&" name)*
    name    := [A-Za-z_][A-Za-z0-9_.-]*     (at most 128 characters)
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from pubsubml.errors import ChannelSyntaxError
from pubsubml.schema.features import _NAME_RE

__all__ = ["WILDCARD", "Channel"]

#: The channel of every model of the task: ``Channel.parse("*")``.
WILDCARD = "*"

_WILDCARD_ALONE = (
    f"'{WILDCARD}' (every model of the task) must be the whole channel; it cannot be combined "
    "with features or operators"
)
_TOKEN_RE = re.compile(r"\s*(?:(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)|(?P<op>[&|∧∨]))")


class Channel(BaseModel):
    """A subscription channel F1 ∨ … ∨ Fk (pubsub-ml.txt §3.2).

    A model matches when its input features contain every feature of at least one term Fi.
    The wildcard channel ``*`` (``terms == (("*",),)``) matches every model.

    Examples
    --------
    >>> ch = Channel.parse("icu_los & age | wbc")
    >>> ch.matches(["age", "icu_los", "sex"]), ch.matches(["age"]), ch.matches(["wbc"])
    (True, False, True)
    >>> str(ch)
    'age & icu_los | wbc'
    >>> every = Channel.parse("*")
    >>> every.matches(["sex"]), every.is_wildcard, every.features, str(every)
    (True, True, set(), '*')
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    terms: tuple[tuple[str, ...], ...]

    @model_validator(mode="after")
    def _nonempty(self) -> Channel:
        if not self.terms or any(not t for t in self.terms):
            raise ChannelSyntaxError("a channel needs at least one non-empty term")
        if self.terms == ((WILDCARD,),):
            return self
        for t in self.terms:
            for name in t:
                if name == WILDCARD:
                    raise ChannelSyntaxError(_WILDCARD_ALONE)
                if not _NAME_RE.match(name):
                    raise ChannelSyntaxError(f"invalid feature name {name!r} in channel")
        return self

    @classmethod
    def parse(cls, text: str) -> Channel:
        """Parse ``"a & b | c"`` (also ``∧``/``∨``), or ``"*"`` for every model, into a channel.

        Raises
        ------
        ChannelSyntaxError
            On empty text, unknown characters, a dangling or doubled operator, or a ``*`` that
            is not the whole channel.
        """
        if not isinstance(text, str) or not text.strip():
            raise ChannelSyntaxError(
                "channel text is empty; expected e.g. 'age & sex | wbc', or '*' for every model"
            )
        if text.strip() == WILDCARD:
            return cls(terms=((WILDCARD,),))
        pos = 0
        terms: list[list[str]] = [[]]
        expect_name = True
        stripped = text.rstrip()
        while pos < len(stripped):
            m = _TOKEN_RE.match(stripped, pos)
            if m is None and stripped[pos:].lstrip().startswith(WILDCARD):
                raise ChannelSyntaxError(f"{_WILDCARD_ALONE}, got {text!r}")
            if m is None:
                raise ChannelSyntaxError(
                    f"unexpected character {stripped[pos:].lstrip()[:1]!r} at position {pos} in "
                    f"channel {text!r}; use feature names joined by '&' and '|'"
                )
            pos = m.end()
            if m.group("name"):
                if not expect_name:
                    raise ChannelSyntaxError(
                        f"missing operator before {m.group('name')!r} in channel {text!r}"
                    )
                terms[-1].append(m.group("name"))
                expect_name = False
            else:
                op = m.group("op")
                if expect_name:
                    raise ChannelSyntaxError(
                        f"operator {op!r} at position {m.start('op')} has no "
                        f"feature before it in channel {text!r}"
                    )
                if op in "|∨":
                    terms.append([])
                expect_name = True
        if expect_name:
            raise ChannelSyntaxError(f"channel {text!r} ends with an operator")
        try:
            return cls(terms=tuple(tuple(sorted(set(t))) for t in terms))
        except ValidationError as exc:  # the validator's ChannelSyntaxError, wrapped by pydantic
            raise ChannelSyntaxError(exc.errors()[0]["msg"].removeprefix("Value error, ")) from None

    @property
    def is_wildcard(self) -> bool:
        """Whether this is ``*``, the channel of every model."""
        return self.terms == ((WILDCARD,),)

    def matches(self, features: Iterable[str]) -> bool:
        """True when ``features`` contain every feature of at least one term (always for ``*``)."""
        if self.is_wildcard:
            return True
        have = set(features)
        return any(set(t) <= have for t in self.terms)

    @property
    def features(self) -> set[str]:
        """Every feature named anywhere in the channel (none for ``*``)."""
        if self.is_wildcard:
            return set()
        return {n for t in self.terms for n in t}

    def __str__(self) -> str:
        return " | ".join(" & ".join(t) for t in self.terms)
