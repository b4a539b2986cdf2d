"""Rebuild the embedded default model from its recipe (also ``mathteams build-embedded``): the
command line of `trainers.embedded.cli`; ``--help`` lists its flags."""

import sys

from trainers.embedded.cli import main

if __name__ == "__main__":
    sys.exit(main())
