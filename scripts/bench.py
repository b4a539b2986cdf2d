"""Benchmarks, one subcommand each: ``python scripts/bench.py <command> --help`` (also
``mathteams bench``). The commands live in `benchmarks`."""

import sys

from benchmarks.cli import main

if __name__ == "__main__":
    sys.exit(main())
