"""Where the embedded solver, critic and refiner go wrong, per number (also ``mathteams probe
embedded``): `trainers.embedded.probe_embedded`; ``--help`` says how."""

import sys

from trainers.embedded.probe_embedded import main

if __name__ == "__main__":
    sys.exit(main())
