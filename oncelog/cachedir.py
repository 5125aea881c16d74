"""Where oncelog keeps what it fetches or makes for the user: ``$XDG_CACHE_HOME/oncelog``
(``~/.cache/oncelog``): Apache Kafka and Spark's Kafka connector from Maven Central, the Spark
driver's class-data archive, the Spark home its Python workers start under, the demo's logs.
Standard library only: every floor may use it."""

from __future__ import annotations

import os


def user_cache(*parts: str) -> str:
    """``~/.cache/oncelog/<parts...>`` (``$XDG_CACHE_HOME`` when set); nothing is created."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "oncelog", *parts)
