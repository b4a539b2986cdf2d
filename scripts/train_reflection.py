"""Train the agents of `math/reflection-v0` (solver -> critic -> refiner).

    python scripts/train_reflection.py                      # GRPO, embedded model, unknown task, CPU
    python scripts/train_reflection.py grpo --config scripts/configs/reflection_grpo.yaml
    python scripts/train_reflection.py grpo --help           # every field (env, GRPOConfig)

The first argument picks the algorithm (default grpo; --help lists them). It evaluates on
held-out problems, trains, evaluates again, and writes the model, metrics.json and curves.png
to --output_dir.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainers.run.cli import run_script

# The critic is paid for its verdict (the env's default; paying it by the revision's outcome
# taught it to accept). Every role's turn earns 0 when it states a false equation (--audit;
# `--audit ""` turns it off): paid by the verdict alone, a critic sharing weights with a mostly
# right solver learns to write "= 0: it checks" under any subtraction (envs/reflection.py).
# After a rejection the refiner solves afresh (--refiner_mode resolve; `revise` applies the
# critic's check): on validation, a refiner applying the trained critic's checks broke 60% of
# right answers (team final answer 0.18), one solving afresh 7% (0.86; docs/results.md, "Credit
# and protocol options, chosen on validation").
DEFAULTS = {"audit": "solver,critic,refiner", "refiner_mode": "resolve"}

if __name__ == "__main__":
    run_script("math/reflection-v0", sys.argv[1:], doc=__doc__, defaults=DEFAULTS)
