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


def whole_number_at_least(text: str, minimum: int) -> int:
    """``int(text)``, or an ``argparse.ArgumentTypeError`` when it is not a whole number >= ``minimum``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """An ``argparse`` type: a whole number >= 0."""
    return whole_number_at_least(text, 0)


def positive_int(text: str) -> int:
    """An ``argparse`` type: a whole number >= 1."""
    return whole_number_at_least(text, 1)
