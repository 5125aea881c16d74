import sys

from .cli import main

# Client processes are spawned: they re-import this module as __mp_main__, so guard the run.
if __name__ == "__main__":
    sys.exit(main())
