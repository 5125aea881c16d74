"""The class-data archive cache of Spark's driver JVM (oncelog.pipeline.jvmcache): old archives
are pruned, so that a new virtualenv per CI run does not fill the user's cache folder."""

from __future__ import annotations

import os

from oncelog.pipeline.jvmcache import JvmCache


def test_prune_keeps_the_current_archive_and_the_newest_others(tmp_path):
    names = [f"spark-driver-{i:012x}.jsa" for i in range(6)]
    for age, name in enumerate(names):  # names[0] is the newest
        path = tmp_path / name
        path.write_bytes(b"x")
        os.utime(path, (1_000_000 - age * 100, 1_000_000 - age * 100))
    (tmp_path / "unrelated.txt").write_text("keep me")
    current = tmp_path / names[5]  # the oldest file, but the archive in use: never removed
    cache = JvmCache(str(current), None)
    removed = cache.prune()
    assert sorted(os.path.basename(p) for p in removed) == sorted(names[2:5])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([names[0], names[1], names[5], "unrelated.txt"])
    assert cache.prune() == []  # nothing more to remove
