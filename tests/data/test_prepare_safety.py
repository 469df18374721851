"""``scanmt prepare`` never deletes or writes into a folder it did not make (issue 16, items 1 and 7)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from scanmt.cli.main import main
from scanmt.data.prepare import SplitFiles, prepare
from scanmt.errors import DataError

VOCAB = 120  # small enough for 40 sentences


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    """Forty tiny German-English pairs (two files each for train and valid)."""
    d = tmp_path_factory.mktemp("raw")
    de = [f"Ein Mann Nummer {i} geht mit dem Hund {i % 7} in den Park ." for i in range(40)]
    en = [f"A man number {i} walks the dog {i % 7} to the park ." for i in range(40)]
    for name in ("a.de", "b.de"):
        (d / name).write_text("\n".join(de) + "\n", encoding="utf-8")
    for name in ("a.en", "b.en"):
        (d / name).write_text("\n".join(en) + "\n", encoding="utf-8")
    return d


def _splits(raw, test: bool = False) -> dict[str, SplitFiles]:
    splits = {"train": SplitFiles(raw / "a.de", raw / "a.en"), "valid": SplitFiles(raw / "b.de", raw / "b.en")}
    if test:
        splits["test"] = SplitFiles(raw / "b.de", raw / "b.en")
    return splits


def _cli(raw, out, *extra) -> list[str]:
    return ["prepare", "--train", str(raw / "a.de"), str(raw / "a.en"), "--valid", str(raw / "b.de"),
            str(raw / "b.en"), "--pair", "de-en", "--out", str(out), "--vocab-size", str(VOCAB), *extra]


def test_refuses_a_folder_that_is_not_a_preparation(raw, tmp_path, capsys):
    x = tmp_path / "x"
    x.mkdir()
    (x / "notes.txt").write_text("keep\n")
    for extra in ((), ("--force",)):
        assert main(_cli(raw, x, *extra)) == 2
        err = capsys.readouterr().err
        assert f"--out {x}: the folder is not empty and does not hold a scanmt preparation" in err
    assert (x / "notes.txt").read_text() == "keep\n"
    assert sorted(p.name for p in x.iterdir()) == ["notes.txt"]
    assert not list(tmp_path.glob(".x.tmp.*"))


def test_refuses_the_current_folder(raw, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "thesis.tex").write_text("years of work\n")
    with pytest.raises(DataError, match="not empty"):
        prepare(_splits(raw), "de", "en", ".", vocab_size=VOCAB)
    assert (tmp_path / "thesis.tex").exists()


def test_out_naming_a_file_fails_before_any_work(raw, tmp_path, monkeypatch, capsys):
    f = tmp_path / "data"
    f.write_text("a file\n")
    import scanmt.data.prepare as prep

    def no_work(*a, **k):
        raise AssertionError("tokenized although --out is a file")

    monkeypatch.setattr(prep, "_tokenize_file", no_work)
    assert main(_cli(raw, f)) == 2
    assert f"--out {f}: is a file, not a folder" in capsys.readouterr().err
    assert f.read_text() == "a file\n"


def test_empty_folder_and_symlink_are_used(raw, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    prepare(_splits(raw), "de", "en", empty, vocab_size=VOCAB)
    assert (empty / "meta.json").exists()
    target = tmp_path / "big-disk" / "data"
    target.mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(target)
    prepare(_splits(raw), "de", "en", link, vocab_size=VOCAB)
    assert link.is_symlink() and (target / "meta.json").exists()


def test_force_replaces_only_the_files_of_the_preparation(raw, tmp_path):
    out = tmp_path / "data"
    prepare(_splits(raw, test=True), "de", "en", out, vocab_size=VOCAB)
    (out / "notes.txt").write_text("keep\n")
    (out / "align").mkdir()
    (out / "align" / "train.subword.align").write_text("0-0\n")
    with pytest.raises(DataError, match="other settings; use another --out or --force"):
        prepare(_splits(raw), "de", "en", out, vocab_size=VOCAB + 10)
    meta = prepare(_splits(raw), "de", "en", out, vocab_size=VOCAB + 10, force=True)
    assert json.loads((out / "meta.json").read_text())["vocab_size"] == VOCAB + 10 == meta["vocab_size"]
    assert (out / "notes.txt").read_text() == "keep\n" and (out / "align" / "train.subword.align").exists()
    assert not list(out.glob("test.*")), "the old preparation's test split was left behind"
    assert sorted(p.name for p in out.iterdir()) == sorted(meta["files"] + ["notes.txt", "align", ".lock"])
    assert not list(tmp_path.glob(".data.tmp.*"))


def test_interrupted_force_replacement_is_finished_by_a_rerun(raw, tmp_path):
    out = tmp_path / "data"
    meta = prepare(_splits(raw), "de", "en", out, vocab_size=VOCAB)
    (out / "notes.txt").write_text("keep\n")
    # killed in the middle of replacing: the marker lists the names, meta.json is already gone
    (out / ".prepare-partial").write_text(json.dumps(meta["files"]))
    (out / "meta.json").unlink()
    prepare(_splits(raw), "de", "en", out, vocab_size=VOCAB)
    assert (out / "meta.json").exists() and not (out / ".prepare-partial").exists()
    assert (out / "notes.txt").read_text() == "keep\n"


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_leftover_of_a_killed_prepare_is_removed(raw, tmp_path, caplog):
    out = tmp_path / "data"
    dead = tmp_path / f".data.tmp.{_dead_pid()}.abcd1234"
    dead.mkdir()
    (dead / "train.tok.de").write_text("half\n")
    running = tmp_path / f".data.tmp.{os.getppid()}.efgh5678"  # a live process: not ours to remove
    running.mkdir()
    old_style = tmp_path / ".data.tmp.k2j3h4g5"
    old_style.mkdir()
    with caplog.at_level("WARNING"):
        prepare(_splits(raw), "de", "en", out, vocab_size=VOCAB)
    assert not dead.exists() and running.exists() and old_style.exists()
    assert f"removed {dead}, left behind by an interrupted prepare" in caplog.text
    assert f"{old_style} looks left behind by an interrupted prepare" in caplog.text


def test_kill_9_during_prepare_then_rerun(raw, tmp_path):
    """A real ``kill -9`` while sentencepiece trains; the rerun cleans up and succeeds."""
    big = tmp_path / "big"
    big.mkdir()
    lines_de = (raw / "a.de").read_text().splitlines() * 400
    lines_en = (raw / "a.en").read_text().splitlines() * 400
    for lang, lines in (("de", lines_de), ("en", lines_en)):
        (big / f"t.{lang}").write_text("\n".join(f"{ln} {i}" for i, ln in enumerate(lines)) + "\n")
    out = tmp_path / "data"
    argv = ["-m", "scanmt", "prepare", "--train", str(big / "t.de"), str(big / "t.en"), "--valid",
            str(raw / "b.de"), str(raw / "b.en"), "--pair", "de-en", "--out", str(out), "--vocab-size", "300"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, *argv], env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    for line in proc.stderr:  # the temporary folder exists once tokenizing has begun
        if b"tokenize" in line or list(tmp_path.glob(".data.tmp.*")):
            break
    proc.kill()
    proc.wait()
    left = list(tmp_path.glob(".data.tmp.*"))
    assert left, "expected the killed run to leave its temporary folder"
    assert sorted(p.name for p in out.iterdir()) == [".lock"]  # its lock, taken after the input checks
    assert main(_cli(raw, out)) == 0
    assert not list(tmp_path.glob(".data.tmp.*")) and (out / "meta.json").exists()


def test_empty_training_file_is_a_clear_error(raw, tmp_path, capsys):
    (tmp_path / "e.de").write_text("")
    (tmp_path / "e.en").write_text("")
    argv = _cli(raw, tmp_path / "out")
    argv[2:4] = [str(tmp_path / "e.de"), str(tmp_path / "e.en")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == f"scanmt prepare: error: {tmp_path / 'e.de'}: the train source file is empty (no sentences)"


@pytest.mark.parametrize(("size", "message"), [
    (100000, r"--vocab-size 100000 is too large for the training text \(.*a\.de and .*a\.en\): sentencepiece "
             r"can make at most \d+ subwords from it; use --vocab-size \d+ or less"),
    (5, r"--vocab-size 5 is too small for the training text .*use --vocab-size \d+ or more"),
])
def test_vocab_size_sentencepiece_cannot_make_is_explained(raw, tmp_path, capsys, size, message):
    argv = _cli(raw, tmp_path / "out")
    argv[-1] = str(size)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "INTERNAL" not in err and ".tmp." not in err
    assert __import__("re").search(message, err), err
    assert not list(tmp_path.glob(".out.tmp.*"))


@pytest.mark.parametrize("size", ["0", "-5", "many"])
def test_vocab_size_must_be_a_positive_whole_number(raw, tmp_path, capsys, size):
    argv = _cli(raw, tmp_path / "out")
    argv[-1] = size
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and "argument --vocab-size:" in capsys.readouterr().err
