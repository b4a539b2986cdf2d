"""Serve verifiers over HTTP (also ``mathteams serve rewards``): the reward server's command
line, `rewards.serving.cli`; ``--help`` lists its flags."""

from rewards.serving.cli import main

if __name__ == "__main__":
    main()
