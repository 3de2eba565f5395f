"""Nothing in the package unpickles: an AST scan of every module under ``src/``.

Published models come from strangers (DESIGN.md, "Published models are untrusted input"), so the
package never imports pickle-family modules and never calls a loader that may unpickle: ``pickle``
/ ``cPickle`` / ``_pickle`` / ``joblib`` / ``cloudpickle`` / ``dill`` / ``shelve`` imports,
``pickle.load(s)``, ``pandas.read_pickle``, ``torch.load`` without ``weights_only=True``,
``numpy.load`` with ``allow_pickle`` other than ``False``, ``yaml.load`` without a safe loader and
``yaml.unsafe_load``/``full_load``.  Aliases (``import numpy as np``, ``from torch import load``)
are resolved; ``__import__``/``importlib.import_module`` of a banned module is caught too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
BANNED_MODULES = frozenset(
    {"pickle", "cPickle", "_pickle", "joblib", "cloudpickle", "dill", "shelve"}
)
ALWAYS_BANNED_CALLS = frozenset(
    {"pandas.read_pickle", "yaml.unsafe_load", "yaml.full_load", "yaml.unsafe_load_all"}
)
SAFE_YAML_LOADERS = frozenset({"SafeLoader", "CSafeLoader", "BaseLoader"})


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _is_true(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _keyword(call: ast.Call, name: str) -> ast.keyword | None:
    return next((k for k in call.keywords if k.arg == name), None)


class _Scanner(ast.NodeVisitor):
    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}
        self.problems: list[tuple[int, str]] = []

    def _flag(self, node: ast.AST, message: str) -> None:
        self.problems.append((getattr(node, "lineno", 0), message))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] in BANNED_MODULES:
                self._flag(node, f"import {alias.name}")
            self.aliases[alias.asname or alias.name.split(".")[0]] = (
                alias.name if alias.asname else alias.name.split(".")[0]
            )

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if module.split(".")[0] in BANNED_MODULES:
            self._flag(node, f"from {module} import ...")
        for alias in node.names:
            self.aliases[alias.asname or alias.name] = f"{module}.{alias.name}"

    def _resolve(self, node: ast.expr) -> str | None:
        dotted = _dotted(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        full = self.aliases.get(head, head)
        return f"{full}.{rest}" if rest else full

    def visit_Call(self, node: ast.Call) -> None:
        name = self._resolve(node.func) or ""
        root = name.split(".")[0]
        if root in BANNED_MODULES:
            self._flag(node, f"call to {name}")
        if name in ALWAYS_BANNED_CALLS:
            self._flag(node, f"call to {name}")
        if name == "torch.load":
            weights_only = _keyword(node, "weights_only")
            if weights_only is None or not _is_true(weights_only.value):
                self._flag(node, "torch.load without weights_only=True")
        if name == "numpy.load":
            allow = _keyword(node, "allow_pickle")
            if allow is not None and not (
                isinstance(allow.value, ast.Constant) and allow.value.value is False
            ):
                self._flag(node, "numpy.load with allow_pickle not False")
        if name in ("yaml.load", "yaml.load_all"):
            loader = _keyword(node, "Loader")
            loader_node = (
                loader.value
                if loader is not None
                else (node.args[1] if len(node.args) > 1 else None)
            )
            loader_name = (_dotted(loader_node) or "") if loader_node is not None else ""
            if loader_name.split(".")[-1] not in SAFE_YAML_LOADERS:
                self._flag(node, f"{name} without a safe Loader")
        if name in ("__import__", "importlib.import_module") and node.args:
            target = node.args[0]
            if (
                isinstance(target, ast.Constant)
                and str(target.value).split(".")[0] in BANNED_MODULES
            ):
                self._flag(node, f"dynamic import of {target.value}")
        self.generic_visit(node)


def scan(source: str) -> list[tuple[int, str]]:
    """(line, problem) for every unpickling risk in ``source``."""
    scanner = _Scanner()
    scanner.visit(ast.parse(source))
    return scanner.problems


def test_no_module_under_src_can_unpickle() -> None:
    files = sorted(SRC.rglob("*.py"))
    assert files, f"no Python files found under {SRC}"

    problems = [
        f"{path.relative_to(SRC.parent)}:{line}: {what}"
        for path in files
        for line, what in scan(path.read_text(encoding="utf-8"))
    ]

    assert not problems, "unpickling risks:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    "source",
    [
        "import pickle",
        "import cPickle as p",
        "import joblib",
        "import cloudpickle",
        "import dill",
        "from pickle import loads",
        "from joblib import load as jl",
        "import _pickle",
        "import importlib\nimportlib.import_module('pickle')",
        "__import__('dill')",
        "import torch\ntorch.load(f)",
        "import torch\ntorch.load(f, weights_only=False)",
        "import torch as t\nt.load(f, weights_only=flag)",
        "from torch import load\nload(f)",
        "import numpy as np\nnp.load(f, allow_pickle=True)",
        "from numpy import load\nload(f, allow_pickle=x)",
        "import yaml\nyaml.load(s)",
        "import yaml\nyaml.load(s, Loader=yaml.Loader)",
        "import yaml\nyaml.unsafe_load(s)",
        "import pandas as pd\npd.read_pickle(p)",
    ],
)
def test_scanner_catches_unpickling(source: str) -> None:
    assert scan(source), source


@pytest.mark.parametrize(
    "source",
    [
        "import pickletools",
        "import torch\ntorch.load(f, weights_only=True)",
        "import numpy as np\nnp.load(f)",
        "import numpy as np\nnp.load(f, allow_pickle=False)",
        "import numpy as np\nnp.save(f, a, allow_pickle=False)",
        "import yaml\nyaml.load(s, Loader=yaml.SafeLoader)",
        "import yaml\nyaml.safe_load(s)",
        "import json\njson.load(f)",
        "load(f)",
    ],
)
def test_scanner_allows_safe_loaders(source: str) -> None:
    assert scan(source) == []
