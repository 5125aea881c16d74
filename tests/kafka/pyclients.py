"""Python Kafka clients of other versions than the test environment's, each in a throwaway venv
of its own under the user's cache (``~/.cache/oncelog/pyclients/<client>-<version>-py<X.Y>``),
made once per machine with pip from PyPI: the compatibility matrix's Python cells
(tests/kafka/test_client_versions.py). A version with no wheels for this Python (confluent-kafka
1.9.2 has none past 3.10) runs on an older CPython found on the machine (PATH, then pyenv's)."""

from __future__ import annotations

import fcntl
import glob
import importlib.metadata
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

from oncelog.cachedir import user_cache


@dataclass(frozen=True)
class PyClient:
    library: str  # the PyPI name: confluent-kafka, kafka-python, aiokafka
    version: str | None  # None: the test environment's own (the newest the project pins)
    python: str | None = None  # "3.10": the CPython it needs; None: this one
    pins: tuple[str, ...] = ()  # what else its venv must hold, as users of that version had it

    @property
    def label(self) -> str:
        return f"{self.library} {self.resolved_version}"

    @property
    def resolved_version(self) -> str:
        return self.version or importlib.metadata.version(self.library)


PY_CLIENTS = (
    PyClient("confluent-kafka", "1.9.2", python="3.10"),  # librdkafka 1.9.2
    PyClient("confluent-kafka", "2.3.0"),                 # librdkafka 2.3.0
    PyClient("confluent-kafka", None),
    PyClient("kafka-python", "2.0.2"),
    PyClient("kafka-python", None),
    PyClient("aiokafka", "0.8.1", pins=("kafka-python==2.0.2",)),  # 0.8 imports kafka-python's protocol
    PyClient("aiokafka", None),
)


class Unavailable(RuntimeError):
    """The interpreter or the packages a cell needs cannot be had here."""


def interpreter(version: str | None) -> str:
    if version is None:
        return sys.executable
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    candidates = sorted(glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", f"python{version}")),
                        reverse=True)
    candidates.append(shutil.which(f"python{version}"))  # pyenv's shims fail unless the version is selected
    for path in filter(None, candidates):
        if subprocess.run([path, "-c", "pass"], capture_output=True).returncode == 0:
            return path
    raise Unavailable(f"no CPython {version} that runs on PATH or in pyenv ({root})")


def python_for(client: PyClient) -> str:
    """The interpreter of ``client``'s venv, made on first use (pip install <library>==<version>)."""
    if client.version is None:
        return sys.executable
    base = interpreter(client.python)
    tag = subprocess.run([base, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True,
                         text=True, check=True).stdout.strip()
    home = user_cache("pyclients", f"{client.library}-{client.version}-py{tag}")
    python = os.path.join(home, "bin", "python")
    done = os.path.join(home, ".installed")
    if os.path.exists(done):
        return python
    os.makedirs(os.path.dirname(home), exist_ok=True)
    with open(home + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(done):
            return python
        shutil.rmtree(home, ignore_errors=True)
        subprocess.run([base, "-m", "venv", home], check=True, capture_output=True, timeout=300)
        pip = subprocess.run([python, "-m", "pip", "install", "-q", "--only-binary=:all:",
                              f"{client.library}=={client.version}", *client.pins],
                             capture_output=True, text=True, timeout=600)
        if pip.returncode != 0:
            shutil.rmtree(home, ignore_errors=True)
            raise Unavailable(f"pip could not install {client.library}=={client.version} on Python {tag}: "
                              f"{pip.stderr[-1500:]}")
        open(done, "w").close()
    return python
