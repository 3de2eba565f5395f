"""The exception hierarchy of pubsubml.

Every error the package raises on purpose derives from :class:`PubsubmlError`, so a caller can
catch the whole family in one place.  Errors about bad input also derive from :class:`ValueError`
(or :class:`KeyError`) so that code written for the standard library keeps working.

Bad input never changes state: an operation that raises one of these errors has written nothing.
"""

from __future__ import annotations

__all__ = [
    "AuthenticationError",
    "ChannelSyntaxError",
    "ConflictError",
    "DataValidationError",
    "DigestMismatchError",
    "DuplicateReleaseError",
    "ExecutorConnectionError",
    "FeatureDefinitionError",
    "InvalidPrivacyParameterError",
    "LabelError",
    "LearnerRegistrationError",
    "MissingDatabaseSchemaError",
    "NotFoundError",
    "PaperAccountingWarning",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "PrivacyBudgetExceededError",
    "PrivacyError",
    "PubsubmlError",
    "RegistryError",
    "RegistryUnreachableError",
    "SchemaMismatchError",
    "SchemaVersionError",
    "ServiceBusyError",
    "SignatureError",
    "UnknownAccountantError",
    "UnknownLearnerError",
    "UntrustedArtifactError",
]


class PubsubmlError(Exception):
    """Root of every error raised on purpose by pubsubml."""


class DataValidationError(PubsubmlError, ValueError):
    """Input data is malformed: NaN or infinite values, wrong shape, values out of bounds."""


class SchemaMismatchError(DataValidationError):
    """Columns or features do not match the declared :class:`~pubsubml.schema.FeatureSchema`."""


class LabelError(DataValidationError):
    """Labels are outside the declared classes, or label sets cannot be aligned."""


class FeatureDefinitionError(DataValidationError):
    """A file (or document) of public feature definitions cannot be read as a
    :class:`~pubsubml.schema.FeatureSchema`: missing, not JSON, of no known shape, or holding an
    invalid feature."""


class ChannelSyntaxError(PubsubmlError, ValueError):
    """A channel expression such as ``"a & b | c"`` does not parse (pubsub-ml.txt §3.2)."""


class PrivacyError(PubsubmlError):
    """Base class of privacy errors."""


class PaperAccountingWarning(UserWarning):
    """An ε was computed as a paper computes it, but the mechanism that ran is not covered by it.

    Raised (as a warning) where a method's released quantity also depends on a model trained on
    the same private rows without noise (ProxyFL's proxy with β > 0, the domain-experts Algorithm
    1 gradient): the accountant's ε is reported, labelled "paper accounting", and is not a DP
    guarantee.
    """


class InvalidPrivacyParameterError(PrivacyError, ValueError):
    """A privacy parameter is out of range: ε ≤ 0, δ outside (0, 1), δ ≥ 1/n, σ ≤ 0, q ∉ (0, 1]."""


class PrivacyBudgetExceededError(PrivacyError):
    """A release would spend more than the site's declared (ε, δ) budget; nothing was released."""


class DuplicateReleaseError(PrivacyError, ValueError):
    """A release with this id is already charged to the privacy ledger; nothing was charged."""


class UnknownAccountantError(PrivacyError, KeyError):
    """No privacy accountant (or accounting backend) is registered under the requested name."""

    def __str__(self) -> str:  # KeyError quotes its message; show it plainly instead.
        return str(self.args[0]) if self.args else ""


class SeededNoiseError(PrivacyError, ValueError):
    """A model whose DP noise came from a seed (a simulation) offered where only secure noise goes.

    Whoever knows the seed can regenerate the noise and subtract it: such a model's ε protects
    nothing.  A registry refuses it unless started for research with seeded noise allowed.
    """


class SeededNoiseWarning(UserWarning):
    """A site releases a model whose DP noise came from a seed (fine in a simulation only)."""


class UntrustedArtifactError(PubsubmlError, ValueError):
    """A model artifact failed a safety check (format, payload, external data, op domain)."""


class DigestMismatchError(UntrustedArtifactError):
    """The SHA-256 digest of the weights does not match the one in the model card."""


class SignatureError(UntrustedArtifactError):
    """The Ed25519 signature of a model card is missing, malformed or made by an untrusted key."""


class LearnerRegistrationError(PubsubmlError, ValueError):
    """A learner registration is invalid: malformed name or task, or a duplicate name."""


class UnknownLearnerError(PubsubmlError, KeyError):
    """No learner is registered under the requested name."""

    def __str__(self) -> str:  # KeyError quotes its message; show it plainly instead.
        return str(self.args[0]) if self.args else ""


class RegistryError(PubsubmlError):
    """Base class of errors reported by the model registry service and its client."""


class AuthenticationError(RegistryError):
    """No credentials, or credentials that match no site and not the admin token (HTTP 401)."""


class PermissionDeniedError(RegistryError):
    """The authenticated caller may not perform this operation (HTTP 403)."""


class NotFoundError(RegistryError, LookupError):
    """The resource does not exist, or the caller may not see it (HTTP 404)."""


class ConflictError(RegistryError):
    """The request conflicts with the registry's state, e.g. a name already taken (HTTP 409)."""


class PayloadTooLargeError(RegistryError, ValueError):
    """An upload exceeds the registry's size limit (HTTP 413)."""


class ServiceBusyError(RegistryError):
    """The registry is at its limit of concurrent work; nothing was done, retry later (HTTP 503)."""


class SchemaVersionError(RegistryError):
    """The registry database is not at the schema version this code expects (run the migrations)."""


class MissingDatabaseSchemaError(RegistryError):
    """The PostgreSQL schema that the database URL's ``search_path`` names does not exist (create
    it, then run the migrations); nothing was written."""


class RegistryUnreachableError(RegistryError, ConnectionError):
    """The registry could not be reached, or did not answer: connection refused, unknown host,
    timeout, connection lost.

    Parameters
    ----------
    message : str
    url : str, optional
        The registry's base URL.
    reason : str, optional
        What happened, in a few words (``"connection refused"``, ``"timed out after 30 s"``).
    sent : bool, default=False
        Whether the request may have reached the registry (``False``: no connection was opened,
        so nothing was done; ``True``: the connection broke or timed out after the request was
        sent, and whether it took effect is unknown).
    """

    def __init__(
        self,
        message: str = "",
        *,
        url: str | None = None,
        reason: str | None = None,
        sent: bool = False,
    ) -> None:
        super().__init__(message)
        self.url = url
        self.reason = reason
        self.sent = sent


# ---- simulations ------------------------------------------------------------------------------
class ExecutorConnectionError(PubsubmlError, ConnectionError):
    """A simulation could not join the compute cluster it was given; nothing ran."""
