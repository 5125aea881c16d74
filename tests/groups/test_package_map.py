"""The package map in ``oncelog/groups/__init__.py`` lists every module of the package, and no
module is longer than one can read as one idea (650 lines)."""

from __future__ import annotations

import pkgutil
from pathlib import Path

import oncelog.groups as groups


def test_the_package_map_names_every_module():
    modules = {m.name for m in pkgutil.iter_modules(groups.__path__)}
    missing = {m for m in modules if f":mod:`.{m}`" not in groups.__doc__}
    assert not missing, f"oncelog/groups/__init__.py does not list {sorted(missing)}"


def test_no_module_over_650_lines():
    long = {p.name: n for p in Path(groups.__path__[0]).glob("*.py")
            if (n := len(p.read_text().splitlines())) > 650}
    assert not long
