"""The handlers register themselves: every module of ``oncelog.apis`` not starting with ``_`` is one
(``pkgutil`` finds them; no hand list to keep in step). Each says in its header what it serves,
in the manner of franz-go kfake's ``68_consumer_group_heartbeat.go``: the docstring opens with
``<Name> (key <k>), v<A>-<B>`` and has a ``Version notes:`` section, a ``<Name>: v<A>-<B>`` line
then one bullet per served version (``- v<N>: ...`` or ``- v<N>-<M>: ...``). The ranges written
there are the module's ``MIN_VERSION``/``MAX_VERSION``, which dispatch and ApiVersions use."""

from __future__ import annotations

import pathlib
import re

import pytest

from oncelog import apis
from oncelog.apis import HANDLERS

APIS_DIR = pathlib.Path(apis.__file__).parent
MODULE_NAMES = sorted(p.stem for p in APIS_DIR.glob("*.py") if not p.stem.startswith("_"))
BY_NAME = {m.__name__.rpartition(".")[2]: m for m in HANDLERS.values()}

RANGE = r"v(\d+)(?:-(\d+))?"


def _range(match: re.Match, first: int) -> tuple[int, int]:
    lo = int(match.group(first))
    hi = match.group(first + 1)
    return lo, int(hi) if hi is not None else lo


def test_every_handler_module_registers_itself_once():
    assert sorted(BY_NAME) == MODULE_NAMES
    assert len(HANDLERS) == len(MODULE_NAMES)
    assert all(key == module.API_KEY for key, module in HANDLERS.items())
    assert not hasattr(apis, "MODULES")


@pytest.mark.parametrize("name", MODULE_NAMES)
def test_the_header_says_the_versions_the_module_serves(name):
    module = BY_NAME[name]
    served = (module.MIN_VERSION, module.MAX_VERSION)
    doc = module.__doc__ or ""
    first = re.match(rf"(\w+) \(key (\d+)\), {RANGE}\b", doc)
    assert first, f"{name}: the docstring opens with '<Name> (key <k>), v<A>-<B>': {doc.splitlines()[:1]}"
    api = first.group(1)
    assert int(first.group(2)) == module.API_KEY
    assert _range(first, 3) == served, f"{name}: header {first.group(0)!r}, module serves v{served[0]}-{served[1]}"

    assert "\nVersion notes:\n" in doc, f"{name}: no 'Version notes:' section"
    notes = doc.split("\nVersion notes:\n", 1)[1]
    line = re.search(rf"^{api}: {RANGE}\b", notes, re.M)
    assert line, f"{name}: 'Version notes:' names no '{api}: v<A>-<B>'"
    assert _range(line, 1) == served, f"{name}: notes say {line.group(0)!r}, module serves v{served[0]}-{served[1]}"

    covered = []
    for bullet in re.finditer(rf"^- {RANGE}:", notes, re.M):
        lo, hi = _range(bullet, 1)
        covered.extend(range(lo, hi + 1))
    assert covered == list(range(served[0], served[1] + 1)), \
        f"{name}: the version bullets cover {covered}, not each of v{served[0]}-{served[1]} once, in order"
