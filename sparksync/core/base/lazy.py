"""A package's public names, imported from their modules only when first used.

Each core package lists what it exports in its ``__init__`` (``__all__``)
and maps every name to the module that holds it, so ``from
sparksync.core.fleet import Fleet`` works without the window importing
paramiko, numpy or the keyring at start-up::

    _WHERE = {"Fleet": "fleet", ...}
    __all__ = ["Fleet", ...]
    __getattr__, __dir__ = lazy_exports(__name__, _WHERE)

Type checkers read the same names from an ``if TYPE_CHECKING:`` block of imports.

``lazy_module`` does the same for one heavy library that a module needs only
once it has data to work on (numpy for the dashboard's buffers: the window
paints before the first sample arrives)::

    if TYPE_CHECKING:
        import numpy as np
    else:
        np = lazy_module("numpy")
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, where: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` for ``package`` (``where``: name -> its module)."""
    names = sorted(where)

    def __getattr__(name: str) -> Any:  # noqa: N807 - the module hook's own name
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)  # the next lookup finds it without this hook
        return value

    def __dir__() -> list[str]:  # noqa: N807
        return sorted(set(names) | set(vars(sys.modules[package])))

    return __getattr__, __dir__


class _LazyModule(types.ModuleType):
    """Stands for a module until one of its attributes is first read."""

    def __getattr__(self, attr: str) -> Any:
        value = getattr(importlib.import_module(self.__name__), attr)
        setattr(self, attr, value)  # the next lookup of this name skips the hook (hot paths use np.*)
        return value


def lazy_module(name: str) -> types.ModuleType:
    """``name``, imported when an attribute of it is first used, not when this is called."""
    return sys.modules.get(name) or _LazyModule(name)
