"""DROP through ``scanmt evaluate`` with a small eflomal word aligner trained on Multi30k."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import pytest

from scanmt.cli.main import main
from scanmt.data.align import Aligner, AlignerSettings
from scanmt.data.tokenize import tokenize_all

N_TRAIN = 400
N_TEST = 20


def _lines(path: Path, n: int) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()[:n]


@pytest.fixture(scope="module")
def setup(shared_data, tmp_path_factory):
    m30k = shared_data / "multi30k"
    tmp = tmp_path_factory.mktemp("drop")
    de = tokenize_all(_lines(m30k / "train.de.gz", N_TRAIN), "de")
    en = tokenize_all(_lines(m30k / "train.en.gz", N_TRAIN), "en")
    aligner = Aligner(AlignerSettings(n_samplers=1), info={"level": "word", "src_lang": "de", "tgt_lang": "en"})
    aligner.fit(de, en)
    aligner.save(tmp / "align" / "word")
    src = _lines(m30k / "test_2016_flickr.de.gz", N_TEST)
    ref = _lines(m30k / "test_2016_flickr.en.gz", N_TEST)
    for name, text in (("src.de", src), ("ref.en", ref)):
        (tmp / name).write_text("".join(x + "\n" for x in text), encoding="utf-8")
    return tmp, aligner


def _drop(capsys, tmp: Path, hyp: list[str], model: Path, *extra: str) -> tuple[int, dict, str]:
    (tmp / "hyp.en").write_text("".join(x + "\n" for x in hyp), encoding="utf-8")
    out = tmp / "r.json"
    out.unlink(missing_ok=True)
    rc = main(["evaluate", "--src", str(tmp / "src.de"), "--ref", str(tmp / "ref.en"), "--hyp", str(tmp / "hyp.en"),
               "--align-model", str(model), "--metrics", "drop", "--json", str(out), *extra])
    _, err = capsys.readouterr()
    return rc, (json.loads(out.read_text()) if rc == 0 else {}), err


def test_drop_zero_for_reference_and_total_for_empty_output(setup, capsys):
    tmp, _ = setup
    ref = (tmp / "ref.en").read_text(encoding="utf-8").splitlines()
    rc, res, err = _drop(capsys, tmp, ref, tmp / "align")  # ALIGN_DIR: the word model is found below it
    assert rc == 0, err
    d = res["drop"]
    assert d["dropped"] == 0 and d["score"] == 0.0
    src_words = sum(len(x.split()) for x in tokenize_all((tmp / "src.de").read_text().splitlines(), "de"))
    assert d["source_words"] == src_words
    assert 0.5 * src_words < d["ref_aligned"] <= src_words
    # an empty output drops every reference-aligned source word
    rc, res, err = _drop(capsys, tmp, [""] * N_TEST, tmp / "align" / "word")
    assert rc == 0, err
    assert res["drop"]["score_of_ref_aligned"] == pytest.approx(100.0)
    assert res["drop"]["dropped"] == res["drop"]["ref_aligned"]


def test_drop_rejects_subword_aligner_and_wrong_languages(setup, capsys, tmp_path):
    tmp, aligner = setup
    aligner.info = {"level": "subword", "src_lang": "de", "tgt_lang": "en"}
    aligner.save(tmp_path / "sub")
    rc, _, err = _drop(capsys, tmp, ["x"] * N_TEST, tmp_path / "sub")
    assert rc == 2 and "subword-level aligner" in err
    rc, _, err = _drop(capsys, tmp, ["x"] * N_TEST, tmp / "align", "--src-lang", "fr")
    assert rc == 2 and "aligns de->en" in err
    rc, _, err = _drop(capsys, tmp, ["x"] * N_TEST, tmp_path / "nothing")
    assert rc == 2 and "not a saved aligner" in err


def test_drop_samples_average_over_every_pairing(setup, capsys):
    """--drop-samples 3: 3 alignments of each side, DROP averaged over the 9 pairings, their spread reported."""
    tmp, _ = setup
    ref = (tmp / "ref.en").read_text(encoding="utf-8").splitlines()
    hyp = [" ".join(x.split()[: max(1, len(x.split()) // 2)]) for x in ref]  # half of each reference: drops
    rc, res, err = _drop(capsys, tmp, hyp, tmp / "align", "--drop-samples", "3")
    assert rc == 0, err
    d = res["drop"]
    assert d["samples"] == 3 and len(d["scores"]) == 9
    assert d["score"] == pytest.approx(sum(d["scores"]) / 9)
    assert d["score_sd"] == pytest.approx(statistics.stdev(d["scores"]))
    assert 0 < d["score"] < 100
    assert d["dropped"] == pytest.approx(d["score"] * d["source_words"] / 100)
    # the output equal to the reference reuses each sample's reference links: zero in every pairing
    rc, res, err = _drop(capsys, tmp, ref, tmp / "align", "--drop-samples", "2")
    assert rc == 0, err
    assert res["drop"]["scores"] == [0.0] * 4 and res["drop"]["score_sd"] == 0.0


def test_drop_samples_must_be_positive(setup, capsys):
    tmp, _ = setup
    rc, _, err = _drop(capsys, tmp, ["x"] * N_TEST, tmp / "align", "--drop-samples", "0")
    assert rc == 2 and "--drop-samples must be a positive integer, got 0" in err
