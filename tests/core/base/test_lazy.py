"""``lazy_module``: a library imported on its first use, then read like the module itself."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sparksync.core.base.lazy import lazy_module

_PROBE = """
import sys
from sparksync.core.base.lazy import lazy_module
json = lazy_module("json")
before = "json" in sys.modules
text = json.dumps({"a": 1})
print(before, "json" in sys.modules, text, json.loads is sys.modules["json"].loads)
"""


def test_the_module_is_imported_on_the_first_attribute_read_not_before():
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["False", "True", '{"a":', "1}", "True"]


def test_a_module_already_imported_is_returned_as_it_is():
    assert lazy_module("sys") is sys


def test_a_name_the_module_does_not_have_is_an_attribute_error():
    proxy = lazy_module("sparksync.core.base.no_such_module_here")
    with pytest.raises(ModuleNotFoundError):
        proxy.anything  # noqa: B018
    units = lazy_module("sparksync.core.base.units")
    with pytest.raises(AttributeError):
        units.no_such_name  # noqa: B018
