"""Evaluate policies on any registered env x task (also ``mathteams evaluate``): the command
line of `trainers.run.evaluate_cli`, whose docstring and ``--help`` tell every flag and table."""

from trainers.run.evaluate_cli import main

if __name__ == "__main__":
    main()
