"""``scanmt prepare``: language codes in file names, invisible lines, a partial mirror (issue 27, items 2, 20, 24)."""

from __future__ import annotations

import gzip

import pytest

from scanmt.api import PrepareRequest, prepare
from scanmt.cli.main import main
from scanmt.errors import DataError


def _write(path, lines: list[str]) -> str:
    path.write_text("".join(f"{ln}\n" for ln in lines), encoding="utf-8")
    return str(path)


@pytest.fixture
def raw(tmp_path):
    de = _write(tmp_path / "a.de", [f"Ein Mann {i} geht in den Park ." for i in range(10)])
    en = _write(tmp_path / "a.en", [f"A man {i} walks to the park ." for i in range(10)])
    return de, en


def _argv(raw, out, pair: str) -> list[str]:
    return ["prepare", "--train", *raw, "--valid", *raw, "--pair", pair, "--out", str(out), "--vocab-size", "40"]


@pytest.mark.parametrize("pair", ["../../../notes.txt-en", "de/x-en", "de-de", "de-DE", "d.e-en", "de-en-fr", "de-"])
def test_pair_must_be_two_different_language_codes(raw, tmp_path, capsys, pair):
    """Item 2: the pair entered file names unchecked (``../../../notes.txt-en`` wrote outside ``--out``, ``de/x-en``
    made subfolders, ``de-de`` wrote English over German)."""
    (tmp_path / "notes.txt.raw.en").write_text("keep\n")
    out = tmp_path / "deep" / "er" / "out"
    assert main(_argv(raw, out, pair)) == 2
    err = capsys.readouterr().err
    assert err.startswith("scanmt prepare: error: --pair") and len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    assert not out.exists() and (tmp_path / "notes.txt.raw.en").read_text() == "keep\n"
    with pytest.raises(DataError, match="--pair"):  # the Python API: the same check, the same message
        prepare(PrepareRequest(pair=pair, out=str(out), train=raw, valid=raw, vocab_size=40))


def test_region_tags_with_an_underscore_are_language_codes(raw, tmp_path):
    result = prepare(PrepareRequest(pair="pt_BR-en", out=str(tmp_path / "out"), train=raw, valid=raw, vocab_size=40))
    assert (result.src_lang, result.tgt_lang) == ("pt_BR", "en")
    assert (tmp_path / "out" / "train.bpe.pt_BR").is_file()


def test_experiment_pair_is_checked_too(tmp_path, capsys):
    argv = ["experiment", "run", "experiments/table1.yaml", "--data", "multi30k", "--pair", "de-de",
            "--out", str(tmp_path / "x")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--pair de-de: the source and target language are the same" in err and "Traceback" not in err


@pytest.mark.parametrize("bad", ["\x01\x02", "\u200b \u200b", "\x7f\u2060"])
def test_a_line_of_invisible_characters_names_the_users_file(raw, tmp_path, capsys, bad):
    """Item 20: such a line passed prepare, and train failed naming the generated ``train.bpe.de:N``."""
    lines = [f"Ein Mann {i} geht ." for i in range(10)]
    lines[6] = bad
    de = _write(tmp_path / "user.de", lines)
    assert main(_argv((de, raw[1]), tmp_path / "out", "de-en")) == 2
    err = capsys.readouterr().err
    assert f"{de}:7: source file has a line with no visible character" in err, err
    assert len(err.splitlines()) == 1 and not (tmp_path / "out").exists()


def test_a_mirror_missing_one_file_is_refused(tmp_path, capsys):
    """Item 24: with ``--mirror`` missing a file, prepare silently took it from the shared copy."""
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    with gzip.open(mirror / "train.de.gz", "wt", encoding="utf-8") as fh:
        fh.write("Ein Hund .\n")
    argv = ["prepare", "--corpus", "multi30k", "--pair", "de-en", "--mirror", str(mirror), "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"--mirror {mirror}: " in err and "train.en.gz" in err and "Traceback" not in err, err
    assert len(err.splitlines()) == 1
