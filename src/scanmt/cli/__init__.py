"""Command-line interface: ``scanmt <command> ...``.

Each command lives in its own module exposing ``NAME``, ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``; :mod:`scanmt.cli.main`
lists them.
"""
