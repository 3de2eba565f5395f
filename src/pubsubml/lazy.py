"""Package faces that import their modules on first use (PEP 562).

A package face (``pubsubml/privacy/__init__.py``, say) re-exports the names of its modules.
Importing them all when the face is imported makes every ``import pubsubml.<package>.<module>``
pay for the whole package: a client command that only needs the model card's classes loaded the
registry's server, the accountant's SciPy stack and torch, seconds before it did anything.  A lazy
face states its names once, as imports under ``if TYPE_CHECKING:`` (type checkers and editors
read them as written), and :func:`attach` gives it the module-level ``__getattr__`` and
``__dir__`` that import a name's module when the name is first used, as scikit-image does with
``lazy_loader`` (scientific Python's SPEC 1, "Lazy loading of submodules and functions").

Usage, at the end of a face::

    if TYPE_CHECKING:
        from pubsubml.privacy.accountants import compute_epsilon

    __all__ = ["compute_epsilon"]
    __getattr__, __dir__ = attach(__name__, __file__)
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["attach", "type_checking_imports"]


def type_checking_imports(path: str | Path) -> dict[str, tuple[str, str]]:
    """The names a module imports under ``if TYPE_CHECKING:``, mapped to (module, name there).

    Only absolute ``from module import name [as alias]`` statements directly in such a block
    count.

    Parameters
    ----------
    path : str or Path
        The module's source file.

    Returns
    -------
    dict of str to (str, str)
        ``alias -> (module, name)``.

    Examples
    --------
    >>> import os, tempfile
    >>> fd, path = tempfile.mkstemp(suffix=".py")
    >>> with os.fdopen(fd, "w") as f:
    ...     _ = f.write("if TYPE_CHECKING:\\n    from math import pi as PI, tau\\n")
    >>> type_checking_imports(path)
    {'PI': ('math', 'pi'), 'tau': ('math', 'tau')}
    >>> os.remove(path)
    """
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    names: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if not isinstance(node, ast.If) or ast.unparse(node.test) not in (
            "TYPE_CHECKING",
            "typing.TYPE_CHECKING",
        ):
            continue
        for stmt in node.body:
            if isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.level == 0:
                for alias in stmt.names:
                    names[alias.asname or alias.name] = (stmt.module, alias.name)
    return names


def attach(package: str, path: str | Path) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for the lazy face of ``package``.

    A name imported under ``if TYPE_CHECKING:`` in ``path`` resolves on first use by importing
    its module, and is then kept in the package's namespace (later uses are plain attribute
    reads).  A name that is one of the package's modules imports that module, so
    ``pubsubml.privacy.accountants`` works after ``import pubsubml.privacy`` as it did when the
    face imported every module.  Anything else raises :class:`AttributeError`.

    Parameters
    ----------
    package : str
        The face's ``__name__``.
    path : str or Path
        The face's ``__file__``.

    Returns
    -------
    (callable, callable)
        The module's ``__getattr__(name)`` and ``__dir__()``.
    """
    exports = type_checking_imports(path)

    def __getattr__(name: str) -> Any:
        module = sys.modules[package]
        if name in exports:
            source, original = exports[name]
            value = getattr(importlib.import_module(source), original)
            setattr(module, name, value)
            return value
        is_package = hasattr(module, "__path__")
        if (
            is_package
            and not name.startswith("__")
            and importlib.util.find_spec(f"{package}.{name}")
        ):
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
