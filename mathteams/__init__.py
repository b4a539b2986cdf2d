"""The ``mathteams`` command (`mathteams.cli`): the project's one entry point, on top of every
package it reaches (benchmarks, trainers, agents, envs, rewards); ``python -m mathteams`` runs
it too."""
