import sys

# ``python -m oncelog``: a process of its own. kio registers a hypothesis strategy for each of its
# types whenever hypothesis is importable (a developer's or a test environment), ~0.4 s of CPU at
# every start for examples no command draws (cli.cmd_serve says the same for the console script).
sys.modules.setdefault("hypothesis", None)

from .cli import main  # noqa: E402

sys.exit(main())
