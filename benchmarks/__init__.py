"""The benchmarks of ``mathteams bench`` (``scripts/bench.py``): one module per command, the
helpers they share (`common`) and the robustness corpus (`corpus`, ``scripts/robustness.py``).

`benchmarks.cli` holds the command line (`COMMANDS`, ``main``). Each command module
defines ``NAME`` (the subcommand), ``add_parser(subparsers)``, which registers the command's flags
and ``set_defaults(func=run)``, and ``run(args)``, which prints the figures and returns them as a
JSON-serialisable dict. Importing a command module imports no torch; its ``run`` imports what it
measures. Nothing in the other packages imports this one.
"""
