"""Whether Spark's Python workers can import the connector, checked once on the driver.

Spark runs a data source's code in Python worker processes started with ``PYSPARK_PYTHON``
(or ``spark.pyspark.python``), ``python3`` from the PATH when neither is set: not necessarily
the interpreter of the driver script. A worker without oncelog fails deep inside Spark with
"No module named 'oncelog'", or, without pyarrow, with a crashed worker. The driver registers
the data source (``spark.dataSource.register``, which calls ``name()`` on the driver), so that
is where the worker interpreter is probed, once per interpreter, and a clear message raised.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

_PROBE = ("import importlib.util as u; "
          "print(','.join(m for m in ('oncelog', 'pyarrow') if u.find_spec(m) is None))")

_checked: dict[str, str | None] = {}


class WorkerPythonError(RuntimeError):
    """Spark's Python workers would run an interpreter that cannot import the connector."""


def worker_python_problem(python: str) -> str | None:
    """None when ``python`` (a command or path, as PYSPARK_PYTHON holds it) imports oncelog and
    pyarrow; otherwise what is wrong and what to do."""
    if python in _checked:
        return _checked[python]
    exe = shutil.which(python) or python
    where = (f"PYSPARK_PYTHON={python}" if os.environ.get("PYSPARK_PYTHON") == python
             else f"{python} (PYSPARK_PYTHON is not set)" if "PYSPARK_PYTHON" not in os.environ else python)
    fix = ("set PYSPARK_PYTHON (or spark.pyspark.python) to an interpreter that has oncelog installed, "
           f"e.g. PYSPARK_PYTHON={sys.executable}, before the SparkSession is created")
    try:
        done = subprocess.run([exe, "-c", _PROBE], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        problem = f"Spark's Python workers would run {where}, which cannot be started ({exc}): {fix}"
    else:
        missing = done.stdout.strip() if done.returncode == 0 else "oncelog"
        problem = None if not missing else (
            f"Spark's Python workers would run {where}, which cannot import {missing.replace(',', ' and ')}: {fix}")
    _checked[python] = problem
    return problem


def check_driver_session() -> None:
    """On the driver with an active SparkContext, raise WorkerPythonError when its workers'
    interpreter lacks the connector. Elsewhere (Python workers have no SparkContext) nothing."""
    try:
        from pyspark import SparkContext
    except ImportError:  # pragma: no cover - pyspark is a dependency
        return
    sc = SparkContext._active_spark_context
    python = getattr(sc, "pythonExec", None)
    if not python or os.path.abspath(python) == sys.executable:
        return
    problem = worker_python_problem(python)
    if problem:
        raise WorkerPythonError(problem)
