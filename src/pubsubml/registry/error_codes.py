"""The registry's error codes: which HTTP status and code each :mod:`pubsubml.errors` class gets.

One table for both sides: the service answers with it
(:mod:`pubsubml.registry.api.errors`) and :class:`~pubsubml.registry.client.RegistryClient` maps
the codes back to the same exception classes.  It imports neither the web framework nor the
database layer, so a client loads it without the server.
"""

from __future__ import annotations

from pubsubml.errors import (
    AuthenticationError,
    ChannelSyntaxError,
    ConflictError,
    DataValidationError,
    DigestMismatchError,
    DuplicateReleaseError,
    InvalidPrivacyParameterError,
    LabelError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    PrivacyBudgetExceededError,
    PubsubmlError,
    SchemaMismatchError,
    SchemaVersionError,
    SeededNoiseError,
    ServiceBusyError,
    SignatureError,
    UntrustedArtifactError,
)

__all__ = ["ERROR_CODES"]

# Most specific first: the first class the exception is an instance of decides.
ERROR_CODES: tuple[tuple[type[PubsubmlError], int, str], ...] = (
    (AuthenticationError, 401, "unauthenticated"),
    (PermissionDeniedError, 403, "forbidden"),
    (NotFoundError, 404, "not_found"),
    (PrivacyBudgetExceededError, 409, "budget_exceeded"),
    (DuplicateReleaseError, 409, "duplicate_release"),
    (ConflictError, 409, "conflict"),
    (PayloadTooLargeError, 413, "payload_too_large"),
    (DigestMismatchError, 422, "digest_mismatch"),
    (SignatureError, 422, "invalid_signature"),
    (UntrustedArtifactError, 422, "untrusted_artifact"),
    (SeededNoiseError, 422, "seeded_noise"),
    (SchemaMismatchError, 422, "schema_mismatch"),
    (LabelError, 422, "label_error"),
    (DataValidationError, 422, "validation_error"),
    (ChannelSyntaxError, 422, "channel_syntax"),
    (InvalidPrivacyParameterError, 422, "invalid_privacy"),
    (SchemaVersionError, 503, "schema_version"),
    (ServiceBusyError, 503, "busy"),
)
