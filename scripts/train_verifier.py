"""Train a learned verifier and compare it with the rule verifier (also ``mathteams
train-verifier``): the command line of `trainers.verifier.cli`; ``--help`` lists its flags."""

from trainers.verifier.cli import main

if __name__ == "__main__":
    main()
