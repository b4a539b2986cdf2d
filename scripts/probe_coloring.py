"""How a model plays the task family this script is named for, ``probe_<family>.py`` (also
``mathteams probe <family>``): `trainers.embedded.probe_family`; ``--help`` says how."""

import sys
from pathlib import Path

from trainers.embedded.probe_family import main

if __name__ == "__main__":
    sys.exit(main([Path(__file__).stem.removeprefix("probe_"), *sys.argv[1:]]))
