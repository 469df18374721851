"""Command-line interface: ``scanmt <command> ...``.

Each command lives in its own module exposing ``NAME``, ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``; :mod:`scanmt.cli.main`
lists them.
"""

import argparse


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Every command's ``--help``: defaults shown, the description's line breaks (examples) kept."""
