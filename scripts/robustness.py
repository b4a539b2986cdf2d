"""The robustness corpus (`benchmarks.corpus`): write or check tests/data/robustness.jsonl.

python scripts/robustness.py --write     # regenerate tests/data/robustness.jsonl
python scripts/robustness.py --check     # exit 1 when the committed file differs
python scripts/bench.py robustness       # score every verifier on it (a table, or --json)
"""

import sys

from benchmarks.corpus import main

if __name__ == "__main__":
    sys.exit(main())
