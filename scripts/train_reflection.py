"""Train the agents of `math/reflection-v0` (solver -> critic -> refiner).

    python scripts/train_reflection.py                      # GRPO, embedded model, unknown task, CPU
    python scripts/train_reflection.py grpo --config scripts/configs/reflection_grpo.yaml
    python scripts/train_reflection.py grpo --help           # every field (env, GRPOConfig)

The first argument picks the algorithm (only `grpo` so far). It evaluates on held-out problems,
trains, evaluates again, and writes the model, metrics.json and curves.png to --output_dir.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainers.cli import run_script

if __name__ == "__main__":
    # The critic is paid by the outcome of the revision it led to: a verdict-only reward lets a
    # critic that shares the solver's weights learn to say "incorrect" by corrupting arithmetic.
    run_script(
        "math/reflection-v0", sys.argv[1:], doc=__doc__, defaults={"critic_reward": "outcome"}
    )
