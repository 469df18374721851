"""Command-line interface: ``scanmt <command> ...``.

Each command lives in its own module exposing ``NAME``, ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``; :mod:`scanmt.cli.main`
lists them.  The commands with a :mod:`scanmt.api` function are thin: ``run``
builds the typed request (``request_from_args``), calls the API and prints.
"""

import argparse


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Every command's ``--help``: defaults shown, the description's line breaks (examples) kept.

    A default is shown only where it says something: not for options without one
    (None), flags (False), empty lists, or help that already names its default.
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if default is None or default is False or default == [] or default == argparse.SUPPRESS or "default" in text:
            return text
        return super()._get_help_string(action)


def positive_int(text: str) -> int:
    """An ``argparse`` type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value
