"""METEOR with and without WordNet synonyms; the WordNet set-up from Debian's files."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import nltk
import pytest

from scanmt.errors import DataError
from scanmt.metrics import wordnet_setup
from scanmt.metrics.meteor import WordNetStatus, _load, corpus_meteor, load_wordnet

# "car"/"auto" are WordNet synonyms that Porter stemming leaves unchanged (nltk matches synonyms on stems)
HYP = [["a", "car", "is", "here"]]
REF = [["a", "auto", "is", "here"]]
# no synonyms: 3 of 4 words match in 2 chunks -> P = R = 3/4, penalty 0.5 * (2/3)^3
WITHOUT = 100 * (1 - 0.5 * (2 / 3) ** 3) * 0.75


def test_meteor_without_synonyms_by_hand():
    r = corpus_meteor(HYP, REF, use_synonyms=False)
    assert r.score == pytest.approx(WITHOUT)
    assert not r.synonyms and "no synonyms" in r.note


def test_meteor_reports_missing_wordnet(tmp_path):
    status = _load((str(tmp_path),))  # a search path without WordNet
    assert not status.available
    assert "no synonyms" in status.note and "wordnet_setup" in status.note
    r = corpus_meteor(HYP, REF, wordnet=status)
    assert r.score == pytest.approx(WITHOUT)
    assert r.synonyms is False and r.note == status.note


@pytest.fixture(scope="module")
def wordnet() -> WordNetStatus:
    status = load_wordnet()
    if not status.available:
        pytest.skip(f"WordNet is not installed for nltk: {status.note}")
    return status


def test_meteor_with_wordnet_synonyms(wordnet):
    r = corpus_meteor(HYP, REF, wordnet=wordnet)
    assert r.synonyms and "WordNet" in r.note
    # all 4 words match in one chunk: P = R = 1, penalty 0.5 * (1/4)^3
    assert r.score == pytest.approx(100 * (1 - 0.5 * (1 / 4) ** 3))
    assert r.score > WITHOUT


def test_corpus_meteor_is_mean_of_sentences(wordnet):
    hyps = HYP + [["x", "y"], []]
    refs = REF + [["x", "y"], ["a"]]
    one = corpus_meteor(HYP, REF, wordnet=wordnet).score
    same = corpus_meteor([["x", "y"]], [["x", "y"]], wordnet=wordnet).score
    assert corpus_meteor(hyps, refs, wordnet=wordnet).score == pytest.approx((one + same + 0.0) / 3)


def test_meteor_errors():
    with pytest.raises(DataError, match="1 hypotheses but 2 references"):
        corpus_meteor([["a"]], [["a"], ["b"]], use_synonyms=False)
    with pytest.raises(DataError, match="no sentences"):
        corpus_meteor([], [], use_synonyms=False)


def test_lexnames_are_the_45_wordnet_files():
    lines = wordnet_setup.lexnames_text().splitlines()
    assert len(lines) == 45
    for i, line in enumerate(lines):
        num, name, cat = line.split("\t")
        assert int(num) == i
        assert cat == {"noun": "1", "verb": "2", "adj": "3", "adv": "4"}[name.split(".")[0]]
    assert lines[3].split("\t")[1] == "noun.Tops" and lines[44].split("\t")[1] == "adj.ppl"


def test_lexnames_match_debian_man_page():
    man = Path("/usr/share/man/man5/lexnames.5WN.gz")
    if not man.is_file():
        pytest.skip(f"{man} not installed (Debian package wordnet-base)")
    doc = gzip.decompress(man.read_bytes()).decode("utf-8", "replace")
    documented = re.findall(r"^(\d\d)\s+([a-z]+\.[A-Za-z]+)", doc, flags=re.M)
    ours = [tuple(x.split("\t")[:2]) for x in wordnet_setup.lexnames_text().splitlines()]
    assert documented == ours


def test_setup_without_debian_files_warns(tmp_path, capsys):
    assert wordnet_setup.setup_wordnet(tmp_path / "none", tmp_path / "nltk_data") is None
    assert "warning: WordNet not found" in capsys.readouterr().err
    assert not (tmp_path / "nltk_data").exists()
    assert wordnet_setup.main(["--source", str(tmp_path / "none"), "--target", str(tmp_path / "x")]) == 0


def test_setup_from_debian_files_is_loadable_and_idempotent(tmp_path, capsys):
    source = wordnet_setup.DEBIAN_WORDNET_DIR
    if not (source / "data.noun").is_file():
        pytest.skip(f"Debian WordNet files not in {source} (apt-get install wordnet-base)")
    corpus = wordnet_setup.setup_wordnet(source, tmp_path / "nltk_data")
    assert corpus == tmp_path / "nltk_data" / "corpora" / "wordnet"
    assert (corpus / "lexnames").is_file() and (corpus / "index.sense").is_file()
    assert all((corpus / f).stat().st_nlink == 1 for f in wordnet_setup.REQUIRED_FILES)
    first = capsys.readouterr().out
    assert "copied" in first and "wrote" in first
    wordnet_setup.setup_wordnet(source, tmp_path / "nltk_data")
    second = capsys.readouterr().out
    assert "copied" not in second and "wrote" not in second and "kept" in second
    saved = list(nltk.data.path)
    try:
        nltk.data.path[:] = [str(tmp_path / "nltk_data")]
        status = _load((str(tmp_path / "nltk_data"),))
        assert status.available, status.note
        reader = status.reader
        assert reader.synsets("dog")[0].lexname() == "noun.animal"
        assert reader.lemma_from_key("dog%1:05:00::").synset().name() == "dog.n.01"
        # a satellite adjective's key names its head word
        assert reader.lemma_from_key("galore%5:00:00:abundant:00").name() == "galore"
    finally:
        nltk.data.path[:] = saved
