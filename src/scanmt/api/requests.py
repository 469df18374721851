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

A request checks itself when it is built (:meth:`CommandRequest.__post_init__`): every field
must have its annotated type (a whole number for ``int``, a finite number for ``float``, a
tuple or list, not a string, for a sequence; as many values as a ``tuple[str, str]`` names),
and a field declared with a range (``option(range=...)``, mostly the ranges of the config
keys they set, :data:`scanmt.config.RANGES`: ``option(key=...)``) must lie in it.  The command line builds the
same request, so ``scanmt COMMAND`` and the API refuse a value with the same message
(``--beam (decode.beam) must be in [1, 1000] (1 = greedy), got 0``).
"""

from __future__ import annotations

import dataclasses
import math
import shlex
import types
import typing
from pathlib import Path
from typing import Any, ClassVar

from scanmt.config import Range, key_range
from scanmt.errors import ConfigError


def option(default: Any = dataclasses.MISSING, *, flag: str | None = None, range: Range | None = None,
           key: str | None = None) -> Any:
    """A request field written as ``flag`` (default: ``--`` + the field name with ``-`` for ``_``), whose
    value must lie in ``range``, or in the range of the config ``key`` it sets (named in the message);
    None is always allowed where the default is None."""
    metadata: dict[str, Any] = {"option": flag} if flag else {}
    if key is not None:
        metadata["key"] = key
        range = range or key_range(key)
    if range is not None:
        metadata["range"] = range
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
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            check_field(f, hints[f.name], getattr(self, f.name))

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


def _kind(hint: Any) -> tuple[Any, bool]:
    """``(type, optional)`` of a field annotation (``int | None`` -> ``(int, True)``)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0], len(args) < len(typing.get_args(hint))
    return hint, False


def _type_problem(kind: Any, value: Any) -> str | None:
    """What is wrong with the type of ``value`` for the annotation ``kind`` (None: nothing)."""
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if typing.get_origin(kind) is tuple:
        if not isinstance(value, tuple):
            return f"expected a sequence of values (a tuple or list), got {value!r}"
        args = typing.get_args(kind)
        if args and args[-1] is not Ellipsis and len(value) != len(args):
            return f"expected {len(args)} values, got {len(value)}: {value!r}"
        return None
    checks = {
        bool: (isinstance(value, bool), "true or false"),
        int: (is_number and isinstance(value, int), "a whole number"),
        float: (is_number, "a number"),
        str: (isinstance(value, (str, Path)), "a string"),
        Path: (isinstance(value, (str, Path)), "a path"),
    }
    ok, words = checks.get(kind, (True, ""))
    return None if ok else f"expected {words}, got {value!r}"


def check_field(f: dataclasses.Field, hint: Any, value: Any) -> None:
    """Raise :class:`ConfigError` naming the option for a value of the wrong type or out of the field's range."""
    kind, optional = _kind(hint)
    if value is None and (optional or f.default is None):
        return
    problem = _type_problem(kind, value)
    if problem:
        raise ConfigError(f"{option_name(f)}: {problem}")
    if "range" in f.metadata:
        name = option_name(f) + (f" ({f.metadata['key']})" if "key" in f.metadata else "")
        f.metadata["range"].check(name, value, integer=kind is int)
    elif kind is float and not math.isfinite(value):
        raise ConfigError(f"{option_name(f)}: expected a finite number, got {value}")


def request_from_namespace(cls: type, args: Any) -> Any:
    """The request ``cls`` from parsed arguments (lists become tuples)."""
    values = {}
    for f in dataclasses.fields(cls):
        value = getattr(args, option_dest(f))
        values[f.name] = tuple(value) if isinstance(value, list) else value
    return cls(**values)
