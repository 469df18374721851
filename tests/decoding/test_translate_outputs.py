"""``scanmt translate``: outputs checked up front and written as one unit, long lines, bad devices and models
(issue 27, items 3, 4, 8, 18, 21, 22, 23, 24)."""

from __future__ import annotations

import copy
import errno
import importlib
import os

import pytest
import torch

from scanmt.api import TranslateRequest, translate_file
from scanmt.cli.main import main
from scanmt.decoding.translator import Translator
from scanmt.errors import ScanmtError
from scanmt.model.checkpoint import load_checkpoint, save_checkpoint
from scanmt.training.trainer import Trainer
from tests.conftest import assert_one_line_error, tiny_config

translate_api = importlib.import_module("scanmt.api.translate")  # the module (scanmt.api.translate is a function)
SENTENCES = ["Ein Hund läuft.", "Zwei Männer spielen Fußball.", "Eine Frau liest."]


def _input(tmp_path, lines, name: str = "in.de") -> str:
    path = tmp_path / name
    path.write_text("".join(f"{ln}\n" for ln in lines), encoding="utf-8")
    return str(path)



def _no_decoding(monkeypatch) -> None:
    """Make any decoding fail the test: the checks must come before the work."""
    def refuse(*args, **kwargs):
        raise AssertionError("decoding started before the inputs and outputs were checked")

    monkeypatch.setattr(Translator, "search", refuse)
    monkeypatch.setattr(Translator, "force_pieces", refuse)


# ---------------------------------------------------------------------------------------------- item 3

def test_output_that_is_the_input_is_refused_and_the_input_unchanged(model, tmp_path, capsys, monkeypatch):
    """Item 3: ``--input X --output X`` replaced the source with its translations."""
    _no_decoding(monkeypatch)
    inp = _input(tmp_path, SENTENCES)
    before = open(inp, "rb").read()
    assert_one_line_error(capsys, ["translate", "--model", str(model), "--input", inp, "--output", inp],
                       f"--output {inp} is the --input file")
    link = tmp_path / "link.de"
    link.symlink_to(inp)  # the same file under another name
    assert_one_line_error(capsys, ["translate", "--model", str(model), "--input", inp, "--output", str(link)],
                       "is the --input file")
    assert open(inp, "rb").read() == before


@pytest.mark.parametrize("options", [("--output", "--tokenized-out"), ("--output", "--attention-out"),
                                     ("--tokenized-out", "--attention-out")])
def test_two_outputs_naming_one_file_are_refused(model, tmp_path, capsys, monkeypatch, options):
    _no_decoding(monkeypatch)
    same = str(tmp_path / "same.txt")
    argv = ["translate", "--model", str(model), "--input", _input(tmp_path, SENTENCES), "--output",
            str(tmp_path / "out.en")]
    for option in options:
        argv += [option, same] if option != "--output" else []
    if "--output" in options:
        argv[argv.index("--output") + 1] = same
    assert_one_line_error(capsys, argv, "name the same file")
    with pytest.raises(ScanmtError, match="name the same file"):  # the Python API gives the same error
        translate_file(TranslateRequest(**_request_fields(model, tmp_path, options, same)))
    assert not os.path.exists(same)


def _request_fields(model, tmp_path, options, same) -> dict:
    fields = {"model": str(model), "input": _input(tmp_path, SENTENCES), "output": str(tmp_path / "out.en")}
    for option in options:
        fields[option[2:].replace("-", "_")] = same
    return fields


# ---------------------------------------------------------------------------------------------- item 4

def test_a_failed_second_write_changes_no_output(model, tmp_path, monkeypatch):
    """Item 4: on a full disk ``--output`` was replaced while ``--attention-out`` kept the previous run's."""
    out, tok, attn = tmp_path / "out.en", tmp_path / "out.tok.en", tmp_path / "out.npz"
    for path in (out, tok, attn):
        path.write_text(f"previous run: {path.name}\n")
    real = translate_api.write_attention

    def full_disk(path, translations, tr):
        real(path, translations, tr)
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(translate_api, "write_attention", full_disk)
    request = TranslateRequest(model=str(model), input=_input(tmp_path, SENTENCES), output=str(out),
                               tokenized_out=str(tok), attention_out=str(attn), beam=1)
    with pytest.raises(OSError, match="No space left"):
        translate_file(request)
    for path in (out, tok, attn):
        assert path.read_text() == f"previous run: {path.name}\n", f"{path.name} was changed"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.de", "out.en", "out.npz", "out.tok.en"]
    monkeypatch.setattr(translate_api, "write_attention", real)
    translate_file(request)  # and without the failure, all three are replaced
    assert len(out.read_text().splitlines()) == 3 and len(tok.read_text().splitlines()) == 3
    assert attn.read_bytes()[:2] == b"PK"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.de", "out.en", "out.npz", "out.tok.en"]


# ---------------------------------------------------------------------------------------------- item 8

def test_an_over_long_line_is_refused_before_decoding(model, tmp_path, capsys, monkeypatch):
    """Item 8: one 20,000-word line took more than 18 GB (attention kept for 2 S + 10 steps of S columns)."""
    _no_decoding(monkeypatch)
    long_line = " ".join(["Hund"] * 1200)  # > 1000 subwords, the default decode.max_source_len
    inp = _input(tmp_path, [SENTENCES[0], long_line])
    argv = ["translate", "--model", str(model), "--input", inp, "--output", str(tmp_path / "o.en"), "--beam", "1"]
    assert_one_line_error(capsys, argv, f"{inp}:2: the line has ", "more than decode.max_source_len=1000",
                       "--max-source-len N")
    assert_one_line_error(capsys, argv + ["--max-source-len", "2"], f"{inp}:1: the line has ",
                       "decode.max_source_len=2")
    assert not (tmp_path / "o.en").exists()


def test_the_length_limit_can_be_raised_and_max_len_cuts_first(model, tmp_path):
    inp = _input(tmp_path, [" ".join(["Hund"] * 30)])
    with pytest.raises(ScanmtError, match="max_source_len=10"):
        translate_file(TranslateRequest(model=str(model), input=inp, output=str(tmp_path / "a"), max_source_len=10,
                                        beam=1))
    translate_file(TranslateRequest(model=str(model), input=inp, output=str(tmp_path / "b"), max_source_len=10,
                                    max_len=10, beam=1))
    assert len((tmp_path / "b").read_text().splitlines()) == 1


# ---------------------------------------------------------------------------------------------- item 22

def test_outputs_that_cannot_be_written_fail_before_the_work(model, tmp_path, capsys, monkeypatch):
    """Item 22: ``--output DIR`` failed only after every sentence was translated."""
    _no_decoding(monkeypatch)
    inp = _input(tmp_path, SENTENCES)
    (tmp_path / "afile").write_text("x\n")
    base = ["translate", "--model", str(model), "--input", inp, "--output", str(tmp_path / "o.en")]
    for option in ("--output", "--tokenized-out", "--attention-out"):
        argv = list(base) + ([option, str(tmp_path)] if option != "--output" else [])
        if option == "--output":
            argv[argv.index("--output") + 1] = str(tmp_path)
        assert_one_line_error(capsys, argv, f"{option} {tmp_path}: is a folder")
        argv[argv.index(option) + 1] = str(tmp_path / "afile" / "below" / "o")
        assert_one_line_error(capsys, argv, f"{option} ", "is a file, not a folder")


# ---------------------------------------------------------------------------------------------- item 21

def test_carriage_return_line_endings_are_refused(model, tmp_path, capsys, monkeypatch):
    """Item 21: a file with CR-only line endings was translated as one sentence (245 s, 1 line out for 100)."""
    _no_decoding(monkeypatch)
    inp = tmp_path / "mac.de"
    inp.write_bytes("\r".join(SENTENCES).encode() + b"\r")
    assert_one_line_error(capsys, ["translate", "--model", str(model), "--input", str(inp), "--output",
                                str(tmp_path / "o")], f"{inp}: input file has carriage-return-only line endings")
    inp.write_bytes(b"Ein Hund.\r\nZwei\rMaenner.\r\n")
    assert_one_line_error(capsys, ["translate", "--model", str(model), "--input", str(inp), "--output",
                                str(tmp_path / "o")], f"{inp}:2: input file has a carriage return")


# ---------------------------------------------------------------------------------------------- item 18, 23, 24

@pytest.mark.parametrize("device, expected", [
    ("cuda" if not torch.cuda.is_available() else "cuda:99", "--device cuda"),
    ("tpu", "--device tpu: "),
    ("nonsense", "--device nonsense: not a device"),
])
def test_unusable_devices_are_one_line(model, tmp_path, capsys, device, expected):
    """Item 18: ``--device cuda`` without CUDA was an AssertionError, ``--device tpu`` a RuntimeError."""
    assert_one_line_error(capsys, ["translate", "--model", str(model), "--input", _input(tmp_path, SENTENCES),
                                "--output", str(tmp_path / "o"), "--device", device], expected)


def _edited_checkpoint(model, tmp_path, edit) -> str:
    ckpt = copy.deepcopy(load_checkpoint(model))
    edit(ckpt)
    path = tmp_path / "edited.pt"
    save_checkpoint(path, ckpt)
    return str(path)


def _nan(ckpt):
    ckpt["model"]["generator.weight"][0, 0] = float("nan")


def _wrong_shape(ckpt):
    ckpt["model"]["generator.weight"] = torch.zeros(3, 4)


def _bad_config(ckpt):
    ckpt["config"]["model"]["hidden_size"] = "big"


def _missing(ckpt):
    del ckpt["model"]["generator.weight"]


@pytest.mark.parametrize("edit, expected", [
    (_nan, ["parameter generator.weight holds NaN or infinite values"]),
    (_wrong_shape, ["parameter generator.weight has shape (3, 4) in the file", "needs ("]),
    (_bad_config, ["the config stored in the checkpoint is not valid", "model.hidden_size"]),
    (_missing, ["lacks generator.weight"]),
])
def test_a_damaged_checkpoint_is_one_line_naming_the_file(model, tmp_path, capsys, edit, expected):
    """Items 18 and 23: NaN weights gave a ValueError traceback, a wrong shape an error cut off at
    "...loading state_dict for NMTModel:", a bad config an error without the file."""
    path = _edited_checkpoint(model, tmp_path, edit)
    assert_one_line_error(capsys, ["translate", "--model", path, "--input", _input(tmp_path, SENTENCES),
                                "--output", str(tmp_path / "o")], f"{path}: ", *expected)


def test_fertility_for_a_softmax_model_is_refused(model, tmp_path, capsys, monkeypatch):
    """Item 24: ``--fertility`` was silently ignored for a model that does not use bounds."""
    _no_decoding(monkeypatch)
    fert = _input(tmp_path, ["1 1 1 1 1 1 1 1 1 1"] * 3, "bounds.fert")
    assert_one_line_error(capsys, ["translate", "--model", str(model), "--input", _input(tmp_path, SENTENCES),
                                "--output", str(tmp_path / "o"), "--fertility", fert],
                       "--fertility", "softmax does not use them")
