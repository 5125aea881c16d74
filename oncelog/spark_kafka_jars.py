"""Spark's own Kafka connector (``format("kafka")``), fetched from Maven Central, for the
side-by-side runs of ``oncelog demo --sink spark-kafka`` and ``python -m bench spark``.

:func:`spark_kafka_jars` fetches ``org.apache.spark:spark-sql-kafka-0-10_2.13`` of one Spark
version and what it needs at run time (``kafka-clients``, ``commons-pool2``,
``spark-token-provider-kafka-0-10``) with Maven, through :func:`oncelog.tools.apache_kafka.maven_fetch`
(same cache root, lock and whole-or-absent ``lib``), into
``$XDG_CACHE_HOME/oncelog/spark-sql-kafka/<version>/lib``; the paths go to ``spark.jars``.

The connector is compiled against Spark's internal APIs, so its version must be the running
Spark's. :func:`runtime` pairs them: the installed PySpark when Maven Central serves its
connector; otherwise (PySpark 4.3.0 is on PyPI while Maven Central's newest
``spark-sql-kafka-0-10_2.13`` is 4.2.0, checked 2026-11-25) the nearest pair both registries
serve (:data:`FALLBACK_VERSION`, or ``$ONCELOG_SPARK_KAFKA_VERSION``) in a separate virtualenv in
the cache (one per parent environment): ``pip install pyspark==<pair>`` and nothing else, with the current interpreter's
site-packages appended to its path (``site.addsitedir`` in a ``.pth``), so that its own PySpark
wins and oncelog, pyarrow, confluent-kafka come from here. Our connector runs unchanged on
PySpark 4.2+ (the Python data source API it uses is the same).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass

from .tools.apache_kafka import ApacheKafkaUnavailable, maven_fetch
from .cachedir import user_cache

FALLBACK_VERSION = "4.2.0"  # newest Spark with both pyspark on PyPI and spark-sql-kafka on Maven Central
VERSION_ENV = "ONCELOG_SPARK_KAFKA_VERSION"


def _cache_root() -> str:
    return user_cache()


def _pom(spark_version: str) -> str:
    # Spark's own artifacts (spark-core, spark-sql, ...) are `provided` in spark-sql-kafka's pom,
    # so runtime scope brings the connector, the token provider, kafka-clients, commons-pool2 and
    # their libraries; the ones PySpark ships already are dropped afterwards.
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>oncelog</groupId><artifactId>spark-sql-kafka-runtime</artifactId><version>{spark_version}</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.spark</groupId><artifactId>spark-sql-kafka-0-10_2.13</artifactId><version>{spark_version}</version></dependency>
  </dependencies>
</project>
"""


def jar_artifact(name: str) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients``: a jar's name without its version."""
    return re.sub(r"-\d[^-]*(?:-[A-Za-z0-9.]+)*\.jar$", "", name)


def _pyspark_jars_dir(python: str) -> str | None:
    if python == sys.executable:
        import pyspark

        return os.path.join(os.path.dirname(pyspark.__file__), "jars")
    out = subprocess.run([python, "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"],
                         capture_output=True, text=True, timeout=120)
    return os.path.join(out.stdout.strip(), "jars") if out.returncode == 0 else None


def spark_kafka_jars(spark_version: str, *, python: str | None = None, quiet: bool = True) -> list[str]:
    """The jars of Spark's Kafka connector ``spark_version`` (fetched on the first call), less the
    libraries the PySpark of ``python`` ships already (lz4, snappy, slf4j, Hadoop, Scala: two
    versions of one class on a classpath is a lottery). Raises ApacheKafkaUnavailable."""
    home = os.path.join(_cache_root(), "spark-sql-kafka", spark_version)
    lib = maven_fetch(home, _pom(spark_version), f"spark-sql-kafka-0-10_2.13 {spark_version}", quiet=quiet)
    shipped: set[str] = set()
    with contextlib.suppress(ImportError, OSError, subprocess.SubprocessError):
        jars_dir = _pyspark_jars_dir(python or sys.executable)
        if jars_dir:
            shipped = {jar_artifact(j) for j in os.listdir(jars_dir)}
    return sorted(os.path.join(lib, j) for j in os.listdir(lib)
                  if j.endswith(".jar") and jar_artifact(j) not in shipped)


def pyspark_python(spark_version: str, *, quiet: bool = True) -> str:
    """An interpreter whose ``import pyspark`` is ``spark_version``: this one if it is, else a
    virtualenv in the cache made on the first call (see the module docstring)."""
    import pyspark

    if pyspark.__version__ == spark_version:
        return sys.executable
    # One per parent environment: its .pth points at this interpreter's site-packages (and so at
    # this checkout's oncelog); another clone or venv must not import its neighbour's code.
    purelib = sysconfig.get_paths()["purelib"]
    tag = hashlib.sha256(os.path.realpath(purelib).encode()).hexdigest()[:10]
    home = os.path.join(_cache_root(), f"pyspark-{spark_version}-{tag}")
    venv = os.path.join(home, "venv")
    python = os.path.join(venv, "bin", "python")
    if os.path.exists(os.path.join(venv, ".ready")):
        return python
    os.makedirs(home, exist_ok=True)
    import fcntl

    with open(os.path.join(home, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(venv, ".ready")):
            return python
        shutil.rmtree(venv, ignore_errors=True)
        if not quiet:
            print(f"making a virtualenv with PySpark {spark_version} in {venv} ...", file=sys.stderr)
        log_path = os.path.join(home, "venv.log")
        with open(log_path, "w") as log:
            steps = [[sys.executable, "-m", "venv", "--without-pip", venv],
                     [sys.executable, "-m", "pip", "--python", python, "install", "--no-input",
                      f"pyspark=={spark_version}"]]
            for cmd in steps:
                try:
                    rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        timeout=1800).returncode
                except subprocess.TimeoutExpired:
                    rc = -1
                if rc != 0:
                    raise ApacheKafkaUnavailable(f"could not make a PySpark {spark_version} virtualenv "
                                                 f"({' '.join(cmd[:4])}... exit {rc}; see {log_path})")
        site_dir = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip()
        with open(os.path.join(site_dir, "zz_oncelog_parent.pth"), "w") as f:
            # Appended after the venv's own site-packages: its pyspark and py4j win, the rest
            # (oncelog, pyarrow, confluent-kafka, ...) is this interpreter's.
            f.write(f"import site; site.addsitedir({purelib!r})\n")
        open(os.path.join(venv, ".ready"), "w").close()
    return python


@dataclass
class Runtime:
    """Where Spark's Kafka connector runs: ``python`` (for the Spark driver and PYSPARK_PYTHON)
    has PySpark ``spark_version``; ``jars`` go to ``spark.jars``; ``note`` says why ``python`` is not
    the current interpreter (empty when it is)."""

    spark_version: str
    python: str
    jars: list[str]
    note: str = ""


def runtime(*, quiet: bool = True) -> Runtime:
    """Spark's Kafka connector paired with a PySpark of the same version (see the module docstring)."""
    import pyspark

    installed = pyspark.__version__
    wanted = os.environ.get(VERSION_ENV)
    # Maven Central said it has no connector for the installed Spark: asked again once a day,
    # not at every run (each asking starts Maven, ~10 s).
    absent = os.path.join(_cache_root(), "spark-sql-kafka", f"{installed}.absent")
    with contextlib.suppress(OSError):
        if time.time() - os.path.getmtime(absent) > 86400:
            os.remove(absent)
    if (not wanted or wanted == installed) and not os.path.exists(absent):
        try:
            return Runtime(installed, sys.executable, spark_kafka_jars(installed, quiet=quiet))
        except ApacheKafkaUnavailable as exc:
            if "not found" not in str(exc) and "Could not find artifact" not in str(exc):
                raise
            with contextlib.suppress(OSError):
                os.makedirs(os.path.dirname(absent), exist_ok=True)
                with open(absent, "w") as f:
                    f.write(f"{exc}\n")
    pair = wanted or FALLBACK_VERSION
    python = pyspark_python(pair, quiet=quiet)
    note = (f"Maven Central serves no spark-sql-kafka-0-10_2.13 {installed} (the installed PySpark): "
            f"Spark's connector runs on the nearest pair served, Spark/PySpark {pair}, in {os.path.dirname(os.path.dirname(python))}"
            if not wanted else f"Spark/PySpark {pair} (${VERSION_ENV}) in {os.path.dirname(os.path.dirname(python))}")
    return Runtime(pair, python, spark_kafka_jars(pair, python=python, quiet=quiet), note)
