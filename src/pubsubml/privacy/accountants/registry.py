"""The accountants by name: one registry, one factory (Opacus' ``accountants/registry.py``).

Adding a backend is registering one subclass of
:class:`~pubsubml.privacy.accountants.accountant.PrivacyAccountant` under its
:meth:`~pubsubml.privacy.accountants.accountant.PrivacyAccountant.mechanism` name
(:func:`register_accountant`); :func:`create_accountant` makes a fresh one and
:func:`accountant_class` gives the class, whose ``epsilon_of`` every ε of a release goes through
(:func:`~pubsubml.privacy.accountants.release.release_epsilon`).
"""

from __future__ import annotations

import inspect

from pubsubml.errors import InvalidPrivacyParameterError, UnknownAccountantError
from pubsubml.privacy.accountants.accountant import PrivacyAccountant
from pubsubml.privacy.accountants.pld import PLDPrivacyAccountant
from pubsubml.privacy.accountants.pure import PurePrivacyAccountant
from pubsubml.privacy.accountants.rdp import RDPPrivacyAccountant

__all__ = ["accountant_class", "create_accountant", "register_accountant"]

_ACCOUNTANTS: dict[str, type[PrivacyAccountant]] = {
    cls.mechanism(): cls
    for cls in (PLDPrivacyAccountant, RDPPrivacyAccountant, PurePrivacyAccountant)
}


def register_accountant(name: str, cls: type[PrivacyAccountant]) -> None:
    """Register the accountant class ``cls`` under ``name``, its :meth:`mechanism` name.

    Raises
    ------
    InvalidPrivacyParameterError
        If the name is taken or empty, ``cls`` is not a concrete :class:`PrivacyAccountant`
        subclass, or its ``mechanism()`` is not ``name``.

    Examples
    --------
    >>> register_accountant("pld", PLDPrivacyAccountant)
    Traceback (most recent call last):
        ...
    pubsubml.errors.InvalidPrivacyParameterError: an accountant is already registered as 'pld'
    """
    if not isinstance(name, str) or not name:
        raise InvalidPrivacyParameterError(f"accountant name must be a non-empty str, got {name!r}")
    if not (isinstance(cls, type) and issubclass(cls, PrivacyAccountant)) or inspect.isabstract(
        cls
    ):
        raise InvalidPrivacyParameterError(f"{cls!r} is not a concrete PrivacyAccountant subclass")
    if name in _ACCOUNTANTS:
        raise InvalidPrivacyParameterError(f"an accountant is already registered as {name!r}")
    if cls.mechanism() != name:
        raise InvalidPrivacyParameterError(
            f"{cls.__name__}.mechanism() is {cls.mechanism()!r}; register it under that name"
        )
    _ACCOUNTANTS[name] = cls


def accountant_class(name: str) -> type[PrivacyAccountant]:
    """The accountant class registered under ``name``.

    Raises
    ------
    UnknownAccountantError
        If nothing is registered under ``name``.
    """
    try:
        return _ACCOUNTANTS[name]
    except (KeyError, TypeError):
        raise UnknownAccountantError(
            f"no accountant registered as {name!r}; known: {sorted(_ACCOUNTANTS)}"
        ) from None


def create_accountant(name: str) -> PrivacyAccountant:
    """A fresh accountant of the class registered under ``name``.

    Raises
    ------
    UnknownAccountantError
        If nothing is registered under ``name``.

    Examples
    --------
    >>> create_accountant("rdp").backend
    'rdp'
    """
    return accountant_class(name)()
