"""Fuzz every environment and every verifier with adversarial text, with a large budget (also
``mathteams fuzz``): the command line of `envs.testing.fuzz_cli`; ``--help`` lists its flags."""

import sys

from envs.testing.fuzz_cli import main

if __name__ == "__main__":
    sys.exit(main())
