"""How well a model's ``reach`` critic checks, per level (also ``mathteams probe critic``):
`trainers.embedded.probe_critic`; ``--help`` says how."""

from trainers.embedded.probe_critic import main

if __name__ == "__main__":
    main()
