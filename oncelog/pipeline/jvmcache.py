"""A class-data archive of the Spark driver's JVM, so that restarts start faster.

Every driver restart loads and verifies the same ~16,000 Spark classes. A CDS (class data
sharing) archive of them, mapped at start-up with ``-XX:SharedArchiveFile``, halves a restart
on this 2-core machine (first committed micro-batch after a driver SIGKILL 15.6 s without it,
8.7 s with it; the JVM loads its classes one after the other, so the archive saves
more wall time than CPU). The archive is made from a running driver: its JVM starts with
``-XX:+RecordDynamicDumpInfo`` and, once its first micro-batch is done (the classes are loaded),
the driver itself asks its JVM for ``VM.cds dynamic_dump`` through the DiagnosticCommand MBean
(:func:`dump_from_driver`; ~7 s, during which the JVM stands still, ~130 MB). It needs neither
``jcmd`` (a JRE has none: that turned the archive off on a machine with Java 17's runtime only,
and every driver start then took twice as long) nor the attach mechanism. Recording costs the
first run ~7 s of JVM CPU (the JVM then spins its lambda forms itself instead of taking them from
the JDK's archive), which is why only a run that makes the archive records.

The archive lives in the user's cache directory, keyed by the Java and PySpark installations
(and the job's flavor: Spark's Kafka source and sink load other classes), and is used by later
starts, this run's restarts included. A read-only cache turns it off. A JVM that cannot map an
archive it is given (stale, another JVM) starts without it, and without the JDK's own archive
either: :func:`archive_mapped` asks the JVM (``VM.info``) so that the demo can say so.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass

from ..cachedir import user_cache


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return os.path.realpath(os.path.join(home, "bin", "java"))
    found = shutil.which("java")
    return os.path.realpath(found) if found else None


def _pyspark_of(python: str | None) -> tuple[str, str]:
    """(version, package directory) of the PySpark that ``python`` imports (this interpreter's when
    None or this one)."""
    # Not realpath: two virtualenvs' interpreters resolve to the same binary, with other PySparks.
    if python is None or os.path.abspath(python) == os.path.abspath(sys.executable):
        import pyspark

        return pyspark.__version__, os.path.dirname(pyspark.__file__)
    out = subprocess.run([python, "-c", "import os, pyspark; print(pyspark.__version__); "
                                        "print(os.path.dirname(pyspark.__file__))"],
                         capture_output=True, text=True, timeout=120, check=True).stdout.split("\n")
    return out[0].strip(), out[1].strip()


@dataclass
class JvmCache:
    path: str | None
    reason: str = ""  # why the cache is off

    @classmethod
    def locate(cls, enabled: bool = True, *, python: str | None = None, flavor: str = "") -> "JvmCache":
        """The archive for drivers whose PySpark is ``python``'s (this interpreter's by default; the
        key is made of the Java and that PySpark installation). ``flavor`` names a job whose classes
        differ (``"kafka"``: Spark's own Kafka source and sink): a separate archive, pruned apart."""
        if not enabled:
            return cls(None, "off (--no-jvm-cache)")
        java = _java()
        if java is None:
            return cls(None, "off: no java found")
        try:
            version, package = _pyspark_of(python)
            jars = os.path.join(package, "jars")
            key = f"{java}:{os.stat(java).st_mtime_ns}:{version}:{os.stat(jars).st_mtime_ns}" + (
                f":{flavor}" if flavor else "")
        except (ImportError, OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
            return cls(None, f"off: {exc}")
        folder = user_cache()
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as exc:
            return cls(None, f"off: {exc}")
        if not os.access(folder, os.W_OK):
            return cls(None, f"off: {folder} is not writable")
        digest = hashlib.sha1(key.encode()).hexdigest()[:12]
        return cls(os.path.join(folder, f"{cls.PREFIX}{flavor + '-' if flavor else ''}{digest}.jsa"))

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def ready(self) -> bool:
        return self.path is not None and os.path.exists(self.path)

    def java_options(self) -> str:
        """Options for the next driver: map the archive, or record what a dump needs."""
        if not self.enabled:
            return ""
        if self.ready():
            return f"-XX:SharedArchiveFile={self.path}"
        return "-XX:+RecordDynamicDumpInfo"

    def recording(self, java_options: str) -> bool:
        """Whether a driver started with ``java_options`` is to make the archive."""
        return self.enabled and not self.ready() and "RecordDynamicDumpInfo" in java_options

    def saved(self) -> None:
        """After a driver wrote the archive (:func:`dump_from_driver`): prune the old ones."""
        self.prune()

    PREFIX = "spark-driver-"
    KEEP = 3  # archives of one flavor kept in the cache folder (each ~130 MB): one per Java/PySpark installation

    def prune(self) -> list[str]:
        """Remove all but the ``KEEP`` newest archives of this one's flavor: every new virtualenv
        (a clean clone's CI run, say) has a new key, and the old archives would otherwise pile up."""
        folder = os.path.dirname(self.path)
        flavor = _flavor(os.path.basename(self.path))
        archives = []
        for name in os.listdir(folder):
            full = os.path.join(folder, name)
            if (name.startswith(self.PREFIX) and name.endswith(".jsa") and full != self.path
                    and _flavor(name) == flavor):
                try:
                    archives.append((os.stat(full).st_mtime, full))
                except OSError:
                    pass
        removed = []
        for _, full in sorted(archives, reverse=True)[self.KEEP - 1:]:
            try:
                os.remove(full)
                removed.append(full)
            except OSError:
                pass
        return removed


def _flavor(name: str) -> str:
    """``spark-driver-kafka-<digest>.jsa`` -> ``kafka``; ``spark-driver-<digest>.jsa`` -> ``""``."""
    middle = name[len(JvmCache.PREFIX):-len(".jsa")]
    return middle.rsplit("-", 1)[0] if "-" in middle else ""


# -- in the driver process (py4j to its JVM) ------------------------------------------------------
def _diagnostic_command(spark, command: str, *args: str) -> str:
    """Run a ``jcmd`` command in the driver's own JVM through the DiagnosticCommand MBean
    (``VM.cds`` -> ``vmCds``). ``MBeanServer.invoke`` is called through reflection on the
    interface: the platform server's class is not exported to py4j."""
    sc = spark.sparkContext
    jvm, gw = sc._jvm, sc._gateway
    klass = jvm.java.lang.Class
    op = "".join(w if i == 0 else w[:1].upper() + w[1:]
                 for i, w in enumerate(command.replace(".", "_").lower().split("_")))
    argv = gw.new_array(jvm.java.lang.String, len(args))
    for i, a in enumerate(args):
        argv[i] = a
    params = gw.new_array(jvm.java.lang.Object, 1)
    params[0] = argv
    signature = gw.new_array(jvm.java.lang.String, 1)
    signature[0] = "[Ljava.lang.String;"
    types = gw.new_array(klass, 4)
    for i, name in enumerate(("javax.management.ObjectName", "java.lang.String", "[Ljava.lang.Object;",
                              "[Ljava.lang.String;")):
        types[i] = klass.forName(name)
    invoke = klass.forName("javax.management.MBeanServer").getMethod("invoke", types)
    call = gw.new_array(jvm.java.lang.Object, 4)
    call[0] = jvm.javax.management.ObjectName("com.sun.management:type=DiagnosticCommand")
    call[1] = op
    call[2] = params
    call[3] = signature
    return str(invoke.invoke(jvm.java.lang.management.ManagementFactory.getPlatformMBeanServer(), call))


def dump_from_driver(spark, path: str) -> tuple[bool, str]:
    """In the driver (its JVM started with ``-XX:+RecordDynamicDumpInfo``): write the JVM's
    class-data archive to ``path``, whole or not at all. Returns (ok, what happened)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    t = time.time()
    try:
        out = _diagnostic_command(spark, "VM.cds", "dynamic_dump", tmp)
    except Exception as exc:  # noqa: BLE001 - py4j's errors, a JVM without VM.cds: no archive, said so
        out = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    if not (os.path.exists(tmp) and os.path.getsize(tmp) > 0):
        with contextlib.suppress(OSError):
            os.remove(tmp)
        return False, f"VM.cds dynamic_dump wrote nothing: {out.strip()[-300:]}"
    size = os.path.getsize(tmp)
    os.replace(tmp, path)
    return True, f"{size / 1e6:.0f} MB in {time.time() - t:.1f}s"


_MAPPED = re.compile(r"CDS archive\(s\) mapped at: .*?size (\d+)")


def archive_mapped(spark, path: str) -> dict:
    """In the driver: whether its JVM mapped the archive at ``path`` it was started with. The JVM
    says how many bytes of class data it mapped (``VM.info``: the JDK's archive plus ours); the
    archive counts as used when that covers most of its file."""
    try:
        info = _diagnostic_command(spark, "VM.info")
    except Exception as exc:  # noqa: BLE001 - only a diagnostic
        return {"used": None, "detail": f"{type(exc).__name__}"}
    m = _MAPPED.search(info)
    mapped = int(m.group(1)) if m else 0
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0
    return {"used": bool(size) and mapped >= 0.8 * size, "mapped_bytes": mapped, "archive_bytes": size}
