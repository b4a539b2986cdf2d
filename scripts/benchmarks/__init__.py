"""The commands of ``scripts/bench.py``, one module each, and the helpers they share (`common`).

Each command module defines ``NAME`` (the subcommand), ``add_parser(subparsers)``, which
registers the command's flags and ``set_defaults(func=run)``, and ``run(args)``, which prints the
figures and returns them as a JSON-serialisable dict. ``scripts/bench.py`` puts ``scripts/`` on
``sys.path`` and imports them from there; nothing else imports this folder.
"""
