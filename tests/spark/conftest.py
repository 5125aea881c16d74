"""Spark fixtures: one SparkSession per test session (Spark start-up costs 5-13 s here), real
broker processes per test, never mocks.

The session runs ``local[2,3]``: two cores, and up to 3 attempts per task so that tests can
inject one task failure and see it retried (Spark's ``local[N,F]``). Python workers run this
interpreter (PYSPARK_PYTHON), which has pyarrow and the package installed.
"""

from __future__ import annotations

import os
import sys
import uuid

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def spark_env() -> dict[str, str]:
    """Environment for a process that starts Spark: workers must run this interpreter."""
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env


def driver_java_options() -> str:
    """Map the demo's class-data archive of Spark's driver JVM when there is one (see
    ``oncelog.pipeline.jvmcache``; the demo's tests run first in this group and make it): each
    driver start of the crash tests is then ~5 s shorter. Without one, drivers start as usual."""
    from oncelog.pipeline.jvmcache import JvmCache

    cache = JvmCache.locate()
    return cache.java_options() if cache.ready() else ""


@pytest.fixture(scope="session")
def spark():
    os.environ.update({k: v for k, v in spark_env().items() if k.startswith("PYSPARK") or k == "PYTHONPATH"})
    from oncelog.spark.session import local_session

    session = local_session("local[2,3]", app_name="oncelog-tests", java_options=driver_java_options())
    yield session
    session.stop()


@pytest.fixture
def uniq():
    """A fresh name suffix (topics, query names) per test."""
    return uuid.uuid4().hex[:8]
