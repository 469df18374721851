"""``evaluate`` and ``plot-attention`` with damaged attention files, bad ``--dpi``, outputs that cannot be written,
a short hypothesis file: one line each, no traceback (issue 27, items 14, 17, 22, 24)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from scanmt.api import EvaluateRequest, evaluate
from scanmt.cli.main import main
from scanmt.data.attention_file import SentenceAttention, save_attention
from scanmt.errors import ScanmtError
from tests.conftest import assert_one_line_error
from scanmt.viz.attention_map import Panel, plot_attention_maps



@pytest.fixture
def attention(tmp_path):
    path = tmp_path / "good.npz"
    sents = [SentenceAttention(np.full((2, 3), 1 / 3, dtype=np.float32), ["a", "b", "c"], ["x", "</s>"])
             for _ in range(5)]
    save_attention(path, sents, {"transform": "softmax"})
    return path


def _damaged(tmp_path, attention) -> dict[str, str]:
    data = attention.read_bytes()
    files = {"empty": b"", "truncated": data[: len(data) // 2], "cut-at-the-end": data[:-30], "text": b"hello\n"}
    paths = {}
    for name, content in files.items():
        (tmp_path / f"{name}.npz").write_bytes(content)
        paths[name] = str(tmp_path / f"{name}.npz")
    return paths


def test_damaged_attention_files_are_one_line(tmp_path, attention, capsys):
    """Item 14: an empty or truncated ``.npz`` gave ``BadZipFile`` or ``EOFError``."""
    for name, path in _damaged(tmp_path, attention).items():
        assert_one_line_error(capsys, ["evaluate", "--attention", path], f"{path}: ")
        assert_one_line_error(capsys, ["plot-attention", "--attention", path, "--index", "0", "--out", str(tmp_path / "m.png")],
                  f"{path}: ")
        assert not (tmp_path / "m.png").exists(), name


@pytest.mark.parametrize("dpi", ["0", "-1", "20000", "many"])
def test_dpi_out_of_range_is_refused(tmp_path, attention, capsys, dpi):
    """Item 17: ``--dpi 0|-1|20000`` gave ZeroDivisionError, ValueError or MemoryError."""
    with pytest.raises(SystemExit) as exit_status:  # argparse's error
        main(["plot-attention", "--attention", str(attention), "--index", "0", "--out", str(tmp_path / "m.png"),
              "--dpi", dpi])
    assert exit_status.value.code == 2
    err = capsys.readouterr().err
    assert "argument --dpi:" in err and "Traceback" not in err, err
    panel = Panel("a", np.full((2, 3), 1 / 3), ["a", "b", "c"], ["x", "</s>"])
    with pytest.raises(ScanmtError, match="--dpi must be a whole number from 10 to 1000"):  # the Python API
        plot_attention_maps([panel], tmp_path / "m.png", dpi=int(dpi) if dpi != "many" else dpi)


def test_evaluate_json_that_cannot_be_written_fails_before_the_work(tmp_path, attention, capsys, monkeypatch):
    """Item 22: ``evaluate --json DIR`` failed only after every metric was computed."""
    evaluate_module = importlib.import_module("scanmt.api.evaluate")  # the module, not the function

    def refuse(*args, **kwargs):
        raise AssertionError("the metrics were computed before --json was checked")

    monkeypatch.setattr(evaluate_module, "attention_metrics", refuse)
    (tmp_path / "afile").write_text("x\n")
    assert_one_line_error(capsys, ["evaluate", "--attention", str(attention), "--json", str(tmp_path)],
              f"--json {tmp_path}: is a folder")
    assert_one_line_error(capsys, ["evaluate", "--attention", str(attention), "--json", str(tmp_path / "afile" / "m.json")],
              "is a file, not a folder")
    assert_one_line_error(capsys, ["evaluate", "--attention", str(attention), "--json", str(attention)],
              f"--json {attention} is the --attention file")
    with pytest.raises(ScanmtError, match="is a folder"):
        evaluate(EvaluateRequest(attention=attention, json=tmp_path))


def test_a_short_hypothesis_file_is_named(tmp_path, capsys):
    """Item 24: a short hypothesis file blamed the reference."""
    ref, hyp = tmp_path / "ref.en", tmp_path / "hyp.en"
    ref.write_text("a b\nc d\ne f\n")
    hyp.write_text("a b\n")
    assert_one_line_error(capsys, ["evaluate", "--hyp", str(hyp), "--ref", str(ref)],
              f"error: {hyp}: {hyp} has only 1 lines but {ref} has 3")


def test_partial_attention_files_say_what_they_hold(tmp_path, attention, capsys):
    """An attention file restored from an archive with a figure window holds some sentences' attention: asking
    for another, by ``evaluate``, ``plot-attention --index`` or the sample, is one line naming what it holds; a
    list of rows that are no sentence indices is a damaged file."""
    import shutil

    from tests.experiments.test_report_combined import make_partial

    def partial(rows, name="partial.npz"):
        shutil.copy(attention, tmp_path / name)
        make_partial(tmp_path / name, rows, "kept by an archive for the sources of 3 subwords")
        return str(tmp_path / name)

    path, png = partial([1, 3]), str(tmp_path / "m.png")
    what = f"{path}: holds the attention of 2 of its 5 sentences (kept by an archive for the sources of 3 subwords), not of "
    assert_one_line_error(capsys, ["evaluate", "--attention", path], what + "sentence 0; translate again")
    assert_one_line_error(capsys, ["plot-attention", "--attention", path, "--index", "2", "--out", png],
                          what + "sentence 2; translate again")
    assert main(["plot-attention", "--attention", path, "--sample", "5", "--out", png]) == 0
    assert sorted(p.name for p in tmp_path.glob("m.*.png")) == ["m.1.png", "m.3.png"]
    assert_one_line_error(capsys, ["plot-attention", "--attention", partial([]), "--sample", "1", "--out", png],
                          "no sentence has at most ")
    bad = partial([1, 7], "bad.npz")
    assert_one_line_error(capsys, ["evaluate", "--attention", bad],
                          f"{bad}: its meta lists the sentences it holds attention for as [1, 7], not indices below 5")
