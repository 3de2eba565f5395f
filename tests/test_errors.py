"""Tests of pubsubml.errors: the exception hierarchy callers rely on to catch errors."""

from __future__ import annotations

import warnings

import pytest

from pubsubml import errors
from pubsubml.errors import (
    AuthenticationError,
    ChannelSyntaxError,
    ConflictError,
    DataValidationError,
    DigestMismatchError,
    DuplicateReleaseError,
    InvalidPrivacyParameterError,
    LabelError,
    LearnerRegistrationError,
    NotFoundError,
    PaperAccountingWarning,
    PayloadTooLargeError,
    PermissionDeniedError,
    PrivacyBudgetExceededError,
    PrivacyError,
    PubsubmlError,
    RegistryError,
    SchemaMismatchError,
    SchemaVersionError,
    ServiceBusyError,
    SignatureError,
    UnknownAccountantError,
    UnknownLearnerError,
    UntrustedArtifactError,
)

_EXCEPTIONS = [
    getattr(errors, name)
    for name in errors.__all__
    if isinstance(getattr(errors, name), type)
    and issubclass(getattr(errors, name), BaseException)
    and not issubclass(getattr(errors, name), Warning)
]


@pytest.mark.parametrize("cls", _EXCEPTIONS, ids=lambda c: c.__name__)
def test_one_except_clause_catches_every_error_of_the_package(cls: type[Exception]) -> None:
    with pytest.raises(PubsubmlError) as info:
        raise cls("boom")

    assert type(info.value) is cls


@pytest.mark.parametrize(
    "cls",
    [
        DataValidationError,
        SchemaMismatchError,
        LabelError,
        ChannelSyntaxError,
        InvalidPrivacyParameterError,
        DuplicateReleaseError,
        UntrustedArtifactError,
        DigestMismatchError,
        SignatureError,
        LearnerRegistrationError,
        PayloadTooLargeError,
    ],
    ids=lambda c: c.__name__,
)
def test_bad_input_errors_are_caught_as_value_error(cls: type[Exception]) -> None:
    with pytest.raises(ValueError, match="bad input"):
        raise cls("bad input")


@pytest.mark.parametrize(
    ("cls", "family"),
    [
        (SchemaMismatchError, DataValidationError),
        (LabelError, DataValidationError),
        (InvalidPrivacyParameterError, PrivacyError),
        (PrivacyBudgetExceededError, PrivacyError),
        (DuplicateReleaseError, PrivacyError),
        (UnknownAccountantError, PrivacyError),
        (DigestMismatchError, UntrustedArtifactError),
        (SignatureError, UntrustedArtifactError),
        (AuthenticationError, RegistryError),
        (PermissionDeniedError, RegistryError),
        (NotFoundError, RegistryError),
        (ConflictError, RegistryError),
        (PayloadTooLargeError, RegistryError),
        (ServiceBusyError, RegistryError),
        (SchemaVersionError, RegistryError),
    ],
    ids=lambda c: c.__name__,
)
def test_errors_are_caught_by_their_family(cls: type[Exception], family: type[Exception]) -> None:
    with pytest.raises(family):
        raise cls("x")


def test_refusals_are_not_value_errors() -> None:
    # An exhausted budget or a busy service is a refusal, not malformed input: code that catches
    # ValueError around input parsing must not swallow it.
    for cls in (PrivacyBudgetExceededError, ServiceBusyError, ConflictError):
        with pytest.raises(cls):
            try:
                raise cls("refused")
            except ValueError:
                pytest.fail(f"{cls.__name__} was caught as a ValueError")


@pytest.mark.parametrize("cls", [UnknownAccountantError, UnknownLearnerError])
def test_lookup_errors_are_key_errors_with_a_plain_message(cls: type[KeyError]) -> None:
    error = cls("no learner named 'svm'; registered: a, b")

    assert isinstance(error, KeyError)
    assert str(error) == "no learner named 'svm'; registered: a, b"
    assert str(KeyError("x")) == "'x'"  # the quoting the override removes
    assert str(cls()) == ""


def test_not_found_is_a_lookup_error() -> None:
    with pytest.raises(LookupError):
        raise NotFoundError("model 42")


def test_paper_accounting_warning_is_a_warning_outside_the_error_family() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn("paper accounting", PaperAccountingWarning, stacklevel=1)

    assert [w.category for w in caught] == [PaperAccountingWarning]
    assert issubclass(PaperAccountingWarning, UserWarning)
    assert not issubclass(PaperAccountingWarning, PubsubmlError)


def test_every_public_name_is_an_error_or_the_warning() -> None:
    public = {name: getattr(errors, name) for name in errors.__all__}

    assert {n for n, c in public.items() if issubclass(c, Warning)} == {"PaperAccountingWarning"}
    assert len(_EXCEPTIONS) == len(public) - 1
