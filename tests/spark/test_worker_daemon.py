"""What a restarted query's Python workers no longer pay (a driver restart on a fresh
clone): task workers are forked from the connector's daemon with pyarrow, NumPy and the connector
imported already (:mod:`oncelog.spark.workerdaemon`), and with ``PYTHONDONTWRITEBYTECODE`` set the
connector's bytecode is written once (:func:`oncelog.spark.session.compile_connector`) instead of
every worker compiling it again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.e2e  # starts Spark and Python processes


def _worker_view(_):
    import os
    import sys

    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        parent = [a.decode() for a in f.read().split(b"\0") if a]
    return (tuple(parent[1:3]), "oncelog.spark.source" in sys.modules, "pyarrow" in sys.modules,
            "pandas" in sys.modules)


def test_task_workers_are_forked_from_the_connectors_daemon_with_it_imported(spark):
    views = set(spark.sparkContext.parallelize(range(4), 2).map(_worker_view).collect())
    assert views == {(("-m", "oncelog.spark.workerdaemon"), True, True, True)}, views


def test_the_connectors_bytecode_is_written_when_python_writes_none(tmp_path):
    """A copy of the package in a new directory, imported with ``-B``: nothing compiled until
    compile_connector writes every module's bytecode where the import system looks for it."""
    import oncelog

    src = os.path.dirname(oncelog.__file__)
    subprocess.run(["cp", "-r", src, str(tmp_path / "oncelog")], check=True)
    subprocess.run(["find", str(tmp_path / "oncelog"), "-name", "__pycache__", "-prune", "-exec", "rm", "-rf", "{}",
                    "+"], check=True)
    code = textwrap.dedent("""
        import importlib.util, os, sys
        import oncelog.spark.session as s
        assert sys.dont_write_bytecode and oncelog_dir in s.__file__, s.__file__
        src = os.path.join(oncelog_dir, "spark", "source.py")
        assert not os.path.exists(importlib.util.cache_from_source(src))
        s.compile_connector(wait=True)
        assert s.compile_connector() is None  # once per process
        print(os.path.exists(importlib.util.cache_from_source(src)))
    """).replace("oncelog_dir", repr(str(tmp_path / "oncelog")))
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "True"
