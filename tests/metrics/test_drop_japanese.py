"""DROP counts Japanese words (issue 53): MeCab's words, not Moses' (which splits kanji one by one and keeps kana
runs whole: 臨済宗のひとつで -> 臨 済 宗 のひとつで)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scanmt.cli.main import main
from scanmt.data.align import Aligner, AlignerSettings
from scanmt.data.tokenize import tokenize, tokenize_all
from scanmt.metrics.drop import drop_score
from tests.kftt_helpers import head_lines

N_TRAIN = 400
N_TEST = 20


def test_a_dropped_japanese_word_counts_once():
    """京都は日本の都市です。 -> 京都 は 日本 の 都市 です 。; the output leaves 日本 (word 2) out."""
    words = tokenize("京都は日本の都市です。", "ja").split()
    assert len(words) == 7
    ref = {(0, 0), (1, 1), (2, 5), (4, 3), (6, 6)}  # Kyoto is a city in Japan .
    hyp = {(0, 0), (1, 1), (4, 3), (6, 4)}  # Kyoto is a city .
    r = drop_score([ref], [hyp], [len(words)])
    assert (r.dropped, r.source_words, r.ref_aligned) == (1, 7, 5)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("drop-ja")
    ja = tokenize_all(head_lines("train.ja.gz", N_TRAIN), "ja")
    en = tokenize_all(head_lines("train.en.gz", N_TRAIN), "en")
    keep = [i for i in range(N_TRAIN) if ja[i] and en[i]]
    aligner = Aligner(AlignerSettings(n_samplers=1), info={"level": "word", "src_lang": "ja", "tgt_lang": "en"})
    aligner.fit([ja[i] for i in keep], [en[i] for i in keep])
    aligner.save(tmp / "align" / "word")
    for name, text in (("src.ja", head_lines("dev.ja.gz", N_TEST)), ("ref.en", head_lines("dev.en.gz", N_TEST))):
        (tmp / name).write_text("".join(x + "\n" for x in text), encoding="utf-8")
    return tmp


def _drop(capsys, tmp: Path, hyp: list[str]) -> dict:
    (tmp / "hyp.en").write_text("".join(x + "\n" for x in hyp), encoding="utf-8")
    out = tmp / "r.json"
    rc = main(["evaluate", "--src", str(tmp / "src.ja"), "--ref", str(tmp / "ref.en"), "--hyp", str(tmp / "hyp.en"),
               "--align-model", str(tmp / "align"), "--metrics", "drop", "--src-lang", "ja", "--tgt-lang", "en",
               "--json", str(out)])
    assert rc == 0, capsys.readouterr().err
    return json.loads(out.read_text())["drop"]


def test_evaluate_drop_counts_japanese_source_words(setup, capsys):
    src = (setup / "src.ja").read_text(encoding="utf-8").splitlines()
    mecab_words = sum(len(tokenize(x, "ja").split()) for x in src)
    moses_words = sum(len(tokenize(x, "de").split()) for x in src)  # what a Moses-only pipeline counted
    assert mecab_words != moses_words
    ref = (setup / "ref.en").read_text(encoding="utf-8").splitlines()
    d = _drop(capsys, setup, ref)
    assert d["source_words"] == mecab_words and d["dropped"] == 0
    assert 0.5 * mecab_words < d["ref_aligned"] <= mecab_words
    d = _drop(capsys, setup, [""] * N_TEST)  # an empty output drops every reference-aligned Japanese word
    assert d["dropped"] == d["ref_aligned"] > 0.5 * mecab_words
