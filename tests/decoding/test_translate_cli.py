"""``scanmt translate`` with pipes, links, empty and over-long lines (issue 16, items 4 and 6)."""

from __future__ import annotations

import io
import os
import sys

import pytest
import torch

from scanmt.cli.main import main
from scanmt.data.attention_file import AttentionFile
from scanmt.training.trainer import Trainer
from tests.conftest import tiny_config

SENTENCES = ["Ein Hund läuft.", "Zwei Männer spielen Fußball.", "Eine Frau liest."]


def _input(tmp_path, lines) -> str:
    path = tmp_path / "in.de"
    path.write_text("".join(f"{ln}\n" for ln in lines), encoding="utf-8")
    return str(path)


def _translate(model, inp, out, *extra) -> int:
    return main(["translate", "--model", str(model), "--input", inp, "--output", str(out), "--beam", "2", *extra])


def test_output_symlink_is_kept_and_its_target_written(model, tmp_path):
    """Item 4: the atomic rename replaced the link (``--output /dev/stdout`` as root replaced /dev/stdout)."""
    target = tmp_path / "real.en"
    target.write_text("old\n")
    link = tmp_path / "link.en"
    link.symlink_to(target)
    assert _translate(model, _input(tmp_path, SENTENCES), link) == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert len(target.read_text().splitlines()) == 3


def test_output_pipe_is_written_not_replaced(model, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a reader, so that opening it to write does not block
    try:
        assert _translate(model, _input(tmp_path, SENTENCES), fifo) == 0
        assert os.path.exists(fifo) and not os.path.isfile(fifo), "the pipe was replaced by a file"
        got = os.read(fd, 1 << 16)
    finally:
        os.close(fd)
    assert len(got.decode().splitlines()) == 3


def test_stdin_and_stdout(model, tmp_path, monkeypatch, capsys):
    """Item 4: ``--output -`` wrote a file named ``-``; ``--input -`` said "file not found"."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("\n".join(SENTENCES).encode() + b"\n")))
    assert main(["translate", "--model", str(model), "--input", "-", "--output", "-", "--beam", "1"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 3, "stdout must hold the translations only"
    assert "translated 3 sentences from <stdin> -> -" in captured.err
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("argv", [
    ["--output", "-", "--tokenized-out", "-"],
    ["--output", "x", "--attention-out", "-"],
])
def test_stdio_misuse_is_an_error(model, tmp_path, capsys, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)  # an unfixed tree writes files named x or - here
    assert main(["translate", "--model", str(model), "--input", _input(tmp_path, SENTENCES), *argv]) == 2
    assert "error: --" in capsys.readouterr().err


def test_empty_line_gives_empty_output_line(model, tmp_path):
    """Item 6: one empty line aborted the whole file."""
    out, attn = tmp_path / "out.en", tmp_path / "a.npz"
    lines = [SENTENCES[0], "", SENTENCES[1], "   "]
    assert _translate(model, _input(tmp_path, lines), out, "--attention-out", str(attn)) == 0
    hyps = out.read_text().split("\n")
    assert len(hyps) == 5 and hyps[-1] == "" and hyps[1] == "" and hyps[3] == "" and hyps[0] and hyps[2]
    a = AttentionFile(attn)
    assert len(a) == 4 and a[1].hyp == ["</s>"] and a[1].attention.shape[0] == 1


def test_over_long_line_is_translated_or_cut_with_a_warning(model, tmp_path, caplog):
    """Item 6: a sentence over data.max_len failed the file and suggested a limit translate had no option for."""
    long = " ".join(["Ein Hund läuft."] * 40)
    inp = _input(tmp_path, [SENTENCES[0], long, SENTENCES[1]])
    with caplog.at_level("WARNING"):
        assert _translate(model, inp, tmp_path / "full.en") == 0
    assert "1 line(s) have more than 80 subwords" in caplog.text and "translated in full (lines 2;" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        assert _translate(model, inp, tmp_path / "cut.en", "--max-len", "5", "--tokenized-out",
                          str(tmp_path / "cut.tok")) == 0
    assert "1 line(s) have more than --max-len 5 subwords and were cut to their first 5 (lines 2)" in caplog.text
    assert len((tmp_path / "cut.en").read_text().splitlines()) == 3


@pytest.mark.parametrize("option", ["--beam", "--batch-size", "--max-len"])
@pytest.mark.parametrize("value", ["0", "-1"])
def test_zero_beam_or_batch_size_is_rejected(model, tmp_path, capsys, monkeypatch, option, value):
    """Item 6: ``--beam 0`` and ``--batch-size 0`` were silently accepted.  (Issue 27: the request checks
    the range, so the message is the API's.)"""
    monkeypatch.chdir(tmp_path)
    assert main(["translate", "--model", str(model), "--input", "x", "--output", "y", option, value]) == 2
    err = capsys.readouterr().err
    assert f"scanmt translate: error: {option} " in err and f"must be in [1, " in err and f"got {value}\n" in err


def test_min_output_len_option(model, tmp_path, capsys, monkeypatch):
    inp = _input(tmp_path, SENTENCES)
    assert _translate(model, inp, tmp_path / "o.en", "--min-output-len", "6", "--tokenized-out",
                      str(tmp_path / "o.tok")) == 0
    assert "output length 6 to 2 x source + 10" in capsys.readouterr().out
    monkeypatch.chdir(tmp_path)
    assert _translate(model, inp, tmp_path / "o.en", "--min-output-len", "-1") == 2
    err = capsys.readouterr().err
    assert "--min-output-len (decode.min_len) must be >= 0 (0 allows an empty translation), got -1" in err


def test_output_dev_stdout_appended_by_the_shell(model, tmp_path):
    """Item 4's repro: ``--output /dev/stdout`` while the shell appends stdout to a file.

    A private link with /dev/stdout's target stands in for it, so that an unfixed tree run as root
    replaces that link, not the machine's /dev/stdout.
    """
    import subprocess

    stdout_link = tmp_path / "stdout"
    stdout_link.symlink_to(os.readlink("/dev/stdout"))  # /proc/self/fd/1
    log = tmp_path / "log.txt"
    log.write_text("previous run\n")
    argv = [sys.executable, "-m", "scanmt", "translate", "--model", str(model), "--input",
            _input(tmp_path, SENTENCES), "--output", str(stdout_link), "--beam", "1"]
    with open(log, "a") as out:
        proc = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert stdout_link.is_symlink()
    lines = log.read_text().splitlines()
    assert lines[0] == "previous run" and len(lines) >= 4 and any(ln.startswith("translated 3 sentences") for ln in lines)


def test_max_len_with_force_target_is_refused(model, tmp_path, capsys):
    """``--max-len`` was silently ignored by forced decoding; now the pair of options is refused up front."""
    inp = _input(tmp_path, SENTENCES)
    out = tmp_path / "scores"
    assert main(["translate", "--model", str(model), "--input", inp, "--output", str(out), "--force-target", inp,
                 "--max-len", "5"]) == 2
    assert "--max-len" in capsys.readouterr().err and not out.exists()


def test_forced_decoding_prints_the_perplexity_that_validation_computes(small_data_dir, tmp_path, capsys):
    """``--force-target`` ends with the target file's perplexity: on the validation pairs, the number training
    logged as ``valid/ppl`` for the same weights (an independent computation: batched teacher forcing)."""
    trainer = Trainer(tiny_config(small_data_dir, train__max_steps=3, data__valid_limit=40), tmp_path / "run")
    trainer.train()
    trainer.model.eval()
    with torch.no_grad():
        want = trainer.task.validate()["valid/ppl"]
    src = (small_data_dir / "valid.raw.de").read_text(encoding="utf-8").splitlines()[:40]
    tgt = (small_data_dir / "valid.raw.en").read_text(encoding="utf-8").splitlines()[:40]
    inp, ref = tmp_path / "v.de", tmp_path / "v.en"
    inp.write_text("\n".join(src) + "\n", encoding="utf-8")
    ref.write_text("\n".join(tgt) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["translate", "--model", str(tmp_path / "run" / "last.pt"), "--input", str(inp), "--output",
                 str(tmp_path / "logp.txt"), "--force-target", str(ref)]) == 0
    captured = capsys.readouterr()
    line = next(ln for ln in (captured.out + captured.err).splitlines() if "perplexity:" in ln)
    got = float(line.split("perplexity:")[1].split()[0])
    assert got == pytest.approx(want, rel=1e-3)
    logp = [float(x) for x in (tmp_path / "logp.txt").read_text().split()]
    assert len(logp) == 40 and all(x < 0 for x in logp)
