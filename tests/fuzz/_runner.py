"""Shared start-up of the atheris harnesses: libFuzzer arguments with safe defaults.

libFuzzer writes every new interesting input into the *first* corpus directory it is given, and
crash reproducers into the working directory. So unless the command line names directories, a
harness runs on ``[a fresh temporary directory, the committed seed corpus]`` (the committed seeds
are read, never written) and crash files go to ``$ONCELOG_FUZZ_ARTIFACTS`` (default
``/tmp/oncelog-fuzz/``) with a name saying which harness found them. A file argument runs just
that input (to replay a crash).
"""

from __future__ import annotations

import os
import sys
import tempfile

import atheris

DEFAULTS = {
    "-timeout": "10",  # one input taking 10 s is a hang: a bug
    "-rss_limit_mb": "2048",  # the harness process growing past 2 GiB is a bug
    "-max_len": "65536",
}


def main(name: str, test_one_input, seed_dirs: list[str]) -> None:
    args = sys.argv[1:]
    flags = [a for a in args if a.startswith("-")]
    paths = [a for a in args if not a.startswith("-")]
    for flag, value in DEFAULTS.items():
        if not any(f.startswith(flag + "=") for f in flags):
            flags.append(f"{flag}={value}")
    if not any(f.startswith("-artifact_prefix=") for f in flags):
        artifacts = os.environ.get("ONCELOG_FUZZ_ARTIFACTS", os.path.join(tempfile.gettempdir(), "oncelog-fuzz"))
        os.makedirs(artifacts, exist_ok=True)
        flags.append(f"-artifact_prefix={os.path.join(artifacts, name)}-")
    if not paths:
        paths = [tempfile.mkdtemp(prefix=f"oncelog-fuzz-{name}-"),
                 *[d for d in seed_dirs if os.path.isdir(d)]]
    atheris.Setup([sys.argv[0], *flags, *paths], test_one_input)
    atheris.Fuzz()
