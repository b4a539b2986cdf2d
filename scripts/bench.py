"""Benchmarks, one subcommand each: ``python scripts/bench.py <command> --help`` (also
``mathteams bench``). The commands live in `trainers.benchmarks`."""

import sys

from trainers.benchmarks.cli import main

if __name__ == "__main__":
    sys.exit(main())
