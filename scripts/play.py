"""Play one episode of an environment with scripted agents and print the transcript and rewards
(also ``mathteams play``): `envs.testing.play`; needs only the base install (no torch)."""

from envs.testing.play import main

if __name__ == "__main__":
    main()
