"""Serve registered envs over HTTP and WebSocket (also ``mathteams serve envs``): the env
server's command line, `envs.serving.cli`; ``--help`` lists its flags."""

from envs.serving.cli import main

if __name__ == "__main__":
    main()
