"""Train the agents of `math/reflection-v0` (solver -> critic -> refiner).

    python scripts/train_reflection.py                      # GRPO, embedded model, unknown task, CPU
    python scripts/train_reflection.py grpo --config scripts/configs/reflection_grpo.yaml
    python scripts/train_reflection.py grpo --help           # every field (env, GRPOConfig)

The first argument picks the algorithm (default grpo; --help lists them). It evaluates on
held-out problems, trains, evaluates again, and writes the model, metrics.json and curves.png
to --output_dir.

Its defaults beyond the env's own are its run defaults, stated where the env is registered
(`envs.REFLECTION_RUNS`, and a task family's in its folder: `envs.TaskFamily.run_defaults`, the
reasons beside them); ``mathteams train reflection`` runs the same job.
"""

import sys

from trainers.run.cli import run_script

if __name__ == "__main__":
    run_script("math/reflection-v0", sys.argv[1:], doc=__doc__)
