"""The robustness corpus (`trainers.benchmarks.corpus`): write or check tests/data/robustness.jsonl.

python scripts/robustness.py --write     # regenerate tests/data/robustness.jsonl
python scripts/robustness.py --check     # exit 1 when the committed file differs
python scripts/bench.py robustness       # score every verifier on it (a table, or --json)
"""

import sys

# The corpus's names too, for the code that reads them from here (tests/rewards/).
from trainers.benchmarks.corpus import (  # noqa: F401
    CATEGORIES,
    CORPUS,
    build_corpus,
    load_corpus,
    main,
    render,
    score_verifier,
    timed,
)

if __name__ == "__main__":
    sys.exit(main())
