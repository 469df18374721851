"""Entry point of the ``scanmt`` command."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from scanmt.allocator import tune_malloc
from scanmt.cli import HelpFormatter
from scanmt.errors import ScanmtError
from scanmt.io import ProgressBarSafeHandler, os_error_line, setup_logging  # noqa: F401 - where they were defined before
from scanmt.io import close_progress_bars
from scanmt.processes import exit_status, sigterm_interrupts

# command modules under scanmt.cli, in the order ``--help`` lists them
COMMANDS: tuple[str, ...] = (
    "demo",
    "prepare",
    "align",
    "fertility",
    "train",
    "translate",
    "tune_penalties",
    "average",
    "evaluate",
    "stress",
    "plot_attention",
    "experiment",
)


def _load(name: str):
    return importlib.import_module(f"scanmt.cli.{name}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scanmt",
        description="Sparse and constrained attention for neural machine translation.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=f"scanmt {version()}", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for mod_name in COMMANDS:
        try:
            mod = _load(mod_name)
        except ModuleNotFoundError as exc:  # a command module not written yet
            if exc.name == f"scanmt.cli.{mod_name}":
                continue
            raise
        p = sub.add_parser(
            mod.NAME,
            help=mod.HELP,
            description=getattr(mod, "DESCRIPTION", mod.HELP),
            formatter_class=HelpFormatter,
        )
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def request_from_argv(argv: Sequence[str]):
    """The typed request (:mod:`scanmt.api`) of ``scanmt`` arguments ``[COMMAND, options...]``, e.g. a
    request's ``to_argv()``; for the commands that have one (not demo, plot-attention, experiment)."""
    args = build_parser().parse_args(list(argv))
    module = _load(args.command.replace("-", "_"))
    if not hasattr(module, "request_from_args"):
        raise ValueError(f"scanmt {args.command} has no request type")
    return module.request_from_args(args)


def version() -> str:
    """The installed distribution's version (the source tree's when it is not installed)."""
    try:
        from importlib.metadata import PackageNotFoundError, version as dist_version

        return dist_version("scanmt")
    except PackageNotFoundError:
        import scanmt

        return scanmt.__version__


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(args.verbose)
    tune_malloc()  # large temporary tensors reuse heap memory instead of new pages (scanmt.allocator)
    try:
        with sigterm_interrupts():  # SIGTERM cleans up like Ctrl-C (temporary files, children, last.pt)
            return int(args._run(args) or 0)
    except ScanmtError as exc:
        _tell(args.command, f"error: {exc}")
        return 2
    except OSError as exc:  # a disk that is full, a folder that is not writable, ...
        if args.verbose:
            raise
        _tell(args.command, f"error: {os_error_line(exc)}")
        return 1
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (processes.Interrupted)
        _tell(args.command, "interrupted")
        return exit_status(exc)


def _tell(command: str, what: str) -> None:
    """``scanmt COMMAND: WHAT`` on stderr, on a line of its own (after the progress bars it ends)."""
    close_progress_bars()
    print(f"scanmt {command}: {what}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
