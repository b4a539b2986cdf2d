"""Train the debaters of `math/debate-v0`.

    python scripts/train_debate.py                      # GRPO, embedded model, unknown task, CPU
    python scripts/train_debate.py grpo --config scripts/configs/debate_grpo.yaml
    python scripts/train_debate.py grpo --help           # every field (env, GRPOConfig)

The first argument picks the algorithm (default grpo; --help lists them). It evaluates on
held-out problems, trains, evaluates again, and writes the model, metrics.json and curves.png
to --output_dir.
"""

import sys

from trainers.run.cli import run_script

if __name__ == "__main__":
    run_script("math/debate-v0", sys.argv[1:], doc=__doc__)
