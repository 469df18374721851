"""Typed requests of the commands, and their command lines.

Every request dataclass of :mod:`scanmt.api` describes one ``scanmt COMMAND`` run.
Its fields are the command's options: a field ``foo_bar`` is the option
``--foo-bar`` (argparse's ``dest`` is the field name) unless its metadata names
another (:func:`option`).  :meth:`CommandRequest.to_argv` writes the request back
as the arguments of ``scanmt`` (``[COMMAND, --option, value, ...]``, what
:func:`scanmt.cli.main.main` takes), leaving out options at their default, and
``scanmt.cli.COMMAND.request_from_args`` parses them back into the same request.

How a field is written:

- a value (``str``, ``Path``, ``int``, ``float``): ``--opt VALUE``, left out when None;
- a flag (``bool``): ``--opt`` when True;
- a sequence (``tuple``): ``--opt A B ...`` (``nargs``), left out when empty.
"""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path
from typing import Any, ClassVar


def option(default: Any = dataclasses.MISSING, *, flag: str | None = None) -> Any:
    """A request field written as ``flag`` (default: ``--`` + the field name with ``-`` for ``_``)."""
    metadata = {"option": flag} if flag else {}
    return dataclasses.field(default=default, metadata=metadata)


def option_name(f: dataclasses.Field) -> str:
    """The command-line option of a request field."""
    return f.metadata.get("option") or "--" + f.name.replace("_", "-")


def option_dest(f: dataclasses.Field) -> str:
    """The ``argparse`` destination of a request field's option."""
    return option_name(f).lstrip("-").replace("-", "_")


def _words(value: Any) -> list[str]:
    if isinstance(value, bool):
        return []
    if isinstance(value, (tuple, list)):
        return [str(v) for v in value]
    return [str(value)]


class CommandRequest:
    """Base of the request dataclasses: ``COMMAND`` and the way back to a command line."""

    #: the ``scanmt`` command this request runs (as typed: ``tune-penalties``)
    COMMAND: ClassVar[str] = ""

    def __post_init__(self) -> None:
        """Values in the field's declared form: ``str`` or ``Path`` as annotated, sequences as tuples."""
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value, kind = getattr(self, f.name), str(f.type)
            if isinstance(value, list):
                value = tuple(value)
            elif isinstance(value, Path) and kind.startswith("str"):
                value = str(value)
            elif isinstance(value, str) and kind.startswith("Path"):
                value = Path(value)
            object.__setattr__(self, f.name, value)

    def to_argv(self) -> list[str]:
        """``[COMMAND, options...]``: the arguments of ``scanmt`` that give this request back."""
        argv = [self.COMMAND]
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if value is None or value is False or value == () or (
                f.default is not dataclasses.MISSING and value == f.default
            ):
                continue
            argv += [option_name(f), *_words(value)]
        return argv

    def command_line(self) -> str:
        """The shell command line ``scanmt COMMAND ...`` of this request (for ``command.txt``)."""
        return "scanmt " + shlex.join(self.to_argv())


def request_from_namespace(cls: type, args: Any) -> Any:
    """The request ``cls`` from parsed arguments (lists become tuples)."""
    values = {}
    for f in dataclasses.fields(cls):
        value = getattr(args, option_dest(f))
        values[f.name] = tuple(value) if isinstance(value, list) else value
    return cls(**values)
