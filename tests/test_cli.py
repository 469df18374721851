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


@pytest.mark.parametrize(("path", "parser"), COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_help_shows_no_empty_defaults(path, parser, capsys):
    """Issue 16 item 8: "(default: None)" everywhere, and a second default after help that names one."""
    with pytest.raises(SystemExit):
        main([*path, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for empty in ("(default: None)", "(default: False)", "(default: [])"):
        assert empty not in text, f"scanmt {' '.join(path)} --help shows {empty}"
    import re

    assert not re.search(r"\(default[^()]*\) \(default:", text), f"scanmt {' '.join(path)} --help: two defaults"


def test_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"scanmt {version('scanmt')}"


def test_log_lines_are_not_glued_onto_a_progress_bar(monkeypatch, capsys):
    """Issue 16 item 8: on a terminal a log record was written right after the bar's text, on its line."""
    import logging
    import re
    import sys

    from tqdm import tqdm

    import scanmt.cli.prepare as prepare_cli

    def command_with_a_bar(args):
        bar = tqdm(total=10, file=sys.stderr, mininterval=0, ascii=True, desc="work")
        bar.update(3)
        logging.getLogger("scanmt.test").info("a log line")
        bar.update(7)
        bar.close()
        return 0

    monkeypatch.setattr(prepare_cli, "run", command_with_a_bar)
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])  # as in a fresh process (pytest's own handlers aside)
    assert main(["prepare", "--pair", "de-en", "--out", "x"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"(^|[\r\n])\d\d:\d\d:\d\d INFO a log line\n", err), repr(err)  # not after the bar


def test_os_errors_are_one_line(tmp_path, capsys, monkeypatch):
    """An OSError (here: a full disk while the JSON is written; an output under a file is refused before the
    work since issue 27) is one line."""
    import errno

    from scanmt.api.evaluate import EvaluateResult

    def full_disk(self, path):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(EvaluateResult, "write_json", full_disk)
    hyp = tmp_path / "a.txt"
    hyp.write_text("a b\n")
    assert main(["evaluate", "--hyp", str(hyp), "--ref", str(hyp), "--json", str(tmp_path / "out.json")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"scanmt evaluate: error: No space left on device: {tmp_path / 'out.json'}"
    assert "Traceback" not in "".join(err)
