"""The command line: every option of every command is explained in ``--help``; ``--set`` takes several items."""

from __future__ import annotations

import argparse

import pytest

from scanmt.cli.main import build_parser, main


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """``(path, parser)`` of every (sub)command, ``experiment run`` and ``experiment report`` included."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for sub in subs:
        for name, p in sub.choices.items():
            yield from _commands(p, path + (name,))


COMMANDS = list(_commands(build_parser()))


def test_all_commands_are_found():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"demo", "prepare", "train", "translate", "evaluate", "experiment run", "experiment report"} <= names


@pytest.mark.parametrize(("path", "parser"), COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_every_option_has_help(path, parser, capsys):
    undocumented = [a.option_strings or a.dest for a in parser._actions
                    if not isinstance(a, argparse._SubParsersAction) and not (a.help or "").strip()]
    assert not undocumented, f"scanmt {' '.join(path)}: options without help: {undocumented}"
    with pytest.raises(SystemExit) as exc:
        main([*path, "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: scanmt " + " ".join(path)) and "options:" in text


@pytest.mark.parametrize("argv", [
    ["train", "--config", "c.yaml", "--out", "o"],
    ["experiment", "run", "g.yaml", "--out", "o"],
    ["fertility", "--data", "d"],
    ["demo"],
])
def test_set_takes_several_items_and_repeats(argv):
    parser = build_parser()
    args = parser.parse_args([*argv, "--set", "a.b=1", "c.d=2", "--set", "e.f=3"])
    assert args.set == ["a.b=1", "c.d=2", "e.f=3"]
    assert parser.parse_args(argv).set == []
