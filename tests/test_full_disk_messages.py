"""A full disk names the destination, not a temporary file, and its message is a line of its own
(issue 52, item 15).

Before, ``translate``/``stress`` named the temporary file beside their output (``.lstm1.k2.hyp.en.28889.x.tmp``),
``prepare`` a file in its work folder (``.p1.tmp.123.x/spm.model``), and sentencepiece's failure to write its
vocabulary read as "could not learn N subwords".  A full disk is simulated as in
``tests/test_write_and_read_errors.py``: the writer fails as it does then.
"""

from __future__ import annotations

import errno
import os

import pytest

from scanmt.cli.main import main
from scanmt.io import atomic_outputs, write_lines

#: sentencepiece's error when its vocabulary file cannot be written (seen on a full tmpfs)
SPM_WRITE_LINE = ('INTERNAL: src/trainer_interface.cc(783) [output->WriteLine(absl::StrCat(piece.piece(), "\\t", '
                  'piece.score()))] ')


def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_outputs_written_as_a_unit_name_the_output(tmp_path, monkeypatch):
    hyp, attn = tmp_path / "lstm1.k2.hyp.en", tmp_path / "attn.npz"
    monkeypatch.setattr(os, "fsync", _no_space)
    with pytest.raises(OSError) as exc:
        with atomic_outputs([hyp, attn]) as temp:
            write_lines(temp[str(hyp)], ["a"])
    assert exc.value.filename == str(hyp) and exc.value.errno == errno.ENOSPC
    assert os.listdir(tmp_path) == []


@pytest.fixture
def raw(tmp_path):
    """Forty tiny German-English pairs."""
    de = [f"Ein Mann Nummer {i} geht mit dem Hund {i % 7} in den Park ." for i in range(40)]
    en = [f"A man number {i} walks the dog {i % 7} to the park ." for i in range(40)]
    (tmp_path / "a.de").write_text("\n".join(de) + "\n", encoding="utf-8")
    (tmp_path / "a.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    return tmp_path


def _prepare(raw, out, capsys) -> str:
    """``scanmt prepare`` of ``raw`` into ``out``, failing: its error line."""
    argv = ["prepare", "--train", str(raw / "a.de"), str(raw / "a.en"), "--valid", str(raw / "a.de"),
            str(raw / "a.en"), "--pair", "de-en", "--out", str(out), "--vocab-size", "100"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


def test_prepare_on_a_full_disk_names_the_file_in_out(raw, tmp_path, monkeypatch, capsys):
    from scanmt.data import prepare

    monkeypatch.setattr(prepare.os, "fsync", _no_space)
    out = tmp_path / "data"
    line = _prepare(raw, out, capsys)
    assert line.startswith(f"scanmt prepare: error: No space left on device: {out}/"), line
    assert ".tmp" not in line


def test_sentencepiece_unable_to_write_its_vocabulary_is_a_write_error_naming_out(raw, tmp_path, monkeypatch,
                                                                                   capsys):
    from scanmt.data import subword

    def fail(**kwargs):
        raise RuntimeError(SPM_WRITE_LINE)

    monkeypatch.setattr(subword.spm.SentencePieceTrainer, "train", fail)
    out = tmp_path / "data"
    line = _prepare(raw, out, capsys)
    assert line.startswith("scanmt prepare: error: sentencepiece could not write the file (INTERNAL: "), line
    assert line.endswith(f"is the disk full?: {out / 'spm.model'}"), line
