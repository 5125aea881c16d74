"""No test module over 900 lines: a test file a reader cannot hold is split by topic (the groups
package keeps its own bound of 650 lines per module, tests/groups/test_package_map.py)."""

import pathlib

TESTS = pathlib.Path(__file__).resolve().parent
LIMIT = 900


def test_no_test_module_is_over_900_lines():
    long = {str(p.relative_to(TESTS)): n for p in TESTS.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > LIMIT}
    assert long == {}
