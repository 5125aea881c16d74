"""``format("oncelog")`` without a ``register`` call, after installing as the README says.

PySpark finds Python data sources by listing top-level modules named ``pyspark_*`` with
``pkgutil.iter_modules()`` in a Python worker when the session starts; the module's
``DefaultSource`` is registered under its name. ``pkgutil`` sees ``sys.path`` entries only, so
setuptools' default editable install for this flat layout (an import hook, no path entry) hid
``pyspark_oncelog`` and ``format("oncelog")`` failed with DATA_SOURCE_NOT_FOUND, unless the checkout
was on PYTHONPATH — as it is in this test run, which is how the other tests missed it.

Each case installs the package from a copy of the sources into a throwaway venv, as a user does
(``pip install -e .`` and ``pip install .``; ``--no-deps``: the dependencies come from this test
run's environment through a path entry, whose ``.pth`` files are not processed, so the package
under test is not visible that way), then runs a fresh Python with that venv first on PATH (an
activated venv), no PYTHONPATH and no SPARK_*/PYSPARK_* variables: it starts a SparkSession and
calls ``spark.read.format("oncelog").load()``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv

import pytest

pytestmark = pytest.mark.e2e

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHIPPED = ["pyproject.toml", "README.md", "oncelog", "pyspark_oncelog"]

PROGRAM = r"""
import json, pyspark_oncelog
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "1").getOrCreate())
try:
    df = (spark.read.format("oncelog").option("kafka.bootstrap.servers", "127.0.0.1:1")
          .option("subscribe", "t").load())
    print(json.dumps({"module": pyspark_oncelog.__file__, "schema": df.schema.fieldNames()}))
finally:
    spark.stop()
"""


@pytest.mark.parametrize("editable", [True, False], ids=["pip-install-e", "pip-install"])
def test_format_oncelog_without_register(tmp_path, editable):
    src = tmp_path / "src"
    src.mkdir()
    for name in SHIPPED:
        path = os.path.join(REPO, name)
        if os.path.isdir(path):
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(path, src / name)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = str(env_dir / "bin" / "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(purelib, "_test_run_deps.pth"), "w") as f:  # this run's dependencies, as a path entry
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SPARK_", "PYSPARK_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    install = [python, "-m", "pip", "install", "-q", "--no-deps"]
    install += ["-e", str(src)] if editable else [str(src)]
    done = subprocess.run(install, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, f"{' '.join(install)}:\n{done.stdout}\n{done.stderr}"

    run = subprocess.run([python, "-c", PROGRAM], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=300)
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert run.returncode == 0 and lines, f"format('oncelog') without register failed:\n{run.stderr[-4000:]}"
    import json

    got = json.loads(lines[-1])
    # the module PySpark found is the one this case installed (the copy, or the venv's own copy of it)
    expected_root = str(src) if editable else purelib
    assert got["module"].startswith(expected_root), (got["module"], expected_root)
    assert got["schema"][:5] == ["key", "value", "topic", "partition", "offset"], got
