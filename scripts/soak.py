"""Soak the env server and the reward server under load and faults, on loopback (also
``mathteams soak`` and ``python scripts/bench.py soak``): many concurrent sessions for minutes,
clients killed mid-episode, each server restarted, refused requests; checks the sessions'
contract and reports step latency and the servers' resident memory. The command's code and its
contract: `benchmarks.soak`; ``--help`` lists its flags.

    python scripts/soak.py                               # 64 sessions, 10 minutes
    python scripts/soak.py --sessions 8 --seconds 20 --kills 1
"""

import sys

from benchmarks.soak import main

if __name__ == "__main__":
    sys.exit(main())
