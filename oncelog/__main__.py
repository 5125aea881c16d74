import sys

from .cli import keep_hypothesis_out, main  # cli itself loads neither kio nor hypothesis

keep_hypothesis_out()
sys.exit(main())
