"""How a model plays ``coloring`` (also ``mathteams probe coloring``):
`trainers.embedded.probe_coloring`; ``--help`` says how."""

import sys

from trainers.embedded.probe_coloring import main

if __name__ == "__main__":
    sys.exit(main())
