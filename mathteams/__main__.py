"""``python -m mathteams``: the ``mathteams`` command (`mathteams.cli.main`)."""

import sys

from mathteams.cli import main

if __name__ == "__main__":
    sys.exit(main())
