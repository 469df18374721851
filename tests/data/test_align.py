"""eflomal aligner on a small real Multi30k subset: training, new pairs, save/load, CLI.

eflomal is not deterministic (it seeds from /dev/urandom), so these tests check
properties that hold for any reasonable run (sentence-final '.' aligned to '.',
links inside the sentences, file formats), not exact links.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from scanmt.cli.main import main
from scanmt.data.align import (
    MODEL_FILE,
    PRIORS_FILE,
    Aligner,
    AlignerSettings,
    as_token_lists,
    project_to_words,
)
from scanmt.data.subword import SubwordModel, train_subword_model
from scanmt.data.tokenize import tokenize
from scanmt.errors import ConfigError, DataError
from scanmt.data.links import read_links

SHARED = Path(__file__).parents[2] / ".." / "shared" / "data"
N_TRAIN, N_NEW = 400, 40


def _multi30k(split: str, lang: str, n: int) -> list[str]:
    path = SHARED / "multi30k" / f"{split}.{lang}.gz"
    if not path.exists():
        pytest.skip(f"Multi30k not found at {path} (shared data absent)")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [tokenize(next(fh), lang) for _ in range(n)]


@pytest.fixture(scope="module")
def corpus():
    de = _multi30k("train", "de", N_TRAIN + N_NEW)
    en = _multi30k("train", "en", N_TRAIN + N_NEW)
    return [s.split() for s in de], [s.split() for s in en]


@pytest.fixture(scope="module")
def trained(corpus):
    de, en = corpus
    aligner = Aligner(AlignerSettings(n_samplers=2))
    fwd, rev = aligner.fit_directional(de[:N_TRAIN], en[:N_TRAIN])
    return aligner, fwd, rev


def _final_period_rate(links, src, tgt) -> float:
    pairs = [(ls, s, t) for ls, s, t in zip(links, src, tgt) if s[-1] == "." and t[-1] == "."]
    assert len(pairs) > 10
    return sum((len(s) - 1, len(t) - 1) in ls for ls, s, t in pairs) / len(pairs)


def _in_range(links, src, tgt) -> bool:
    return all(0 <= i < len(s) and 0 <= j < len(t) for ls, s, t in zip(links, src, tgt) for i, j in ls)


def test_training_alignment(trained, corpus):
    aligner, fwd, rev = trained
    de, en = corpus[0][:N_TRAIN], corpus[1][:N_TRAIN]
    assert aligner.trained and aligner.n_train == N_TRAIN and len(fwd) == len(rev) == N_TRAIN
    # directional constraints: fwd gives each target word <= 1 source, rev each source <= 1 target
    for f, r in zip(fwd, rev):
        js = [j for _, j in f]
        is_ = [i for i, _ in r]
        assert len(js) == len(set(js)) and len(is_) == len(set(is_))
    sym = aligner.symmetrize(fwd, rev)
    assert _in_range(sym, de, en)
    for f, r, s in zip(fwd, rev, sym):
        assert (f & r) <= s <= (f | r)
    assert _final_period_rate(sym, de, en) > 0.9
    # most source words get a link
    n_src = sum(map(len, de))
    assert sum(len({i for i, _ in s}) for s in sym) / n_src > 0.7


def test_save_load_and_align_new_pairs(trained, corpus, tmp_path):
    aligner, _, _ = trained
    aligner.info = {"level": "word"}
    aligner.save(tmp_path / "m")
    assert (tmp_path / "m" / MODEL_FILE).exists() and (tmp_path / "m" / PRIORS_FILE).exists()
    meta = json.loads((tmp_path / "m" / MODEL_FILE).read_text())
    assert meta["settings"]["n_samplers"] == 2 and meta["n_train"] == N_TRAIN and meta["info"] == {"level": "word"}

    loaded = Aligner.load(tmp_path / "m")
    assert loaded.settings == aligner.settings and loaded.train_digest == aligner.train_digest
    assert loaded._priors == aligner._priors
    priors = gzip.decompress((tmp_path / "m" / PRIORS_FILE).read_bytes()).decode()
    assert priors.startswith("LEX\t") and "\nHMMF\t" in priors

    de, en = corpus[0][N_TRAIN:], corpus[1][N_TRAIN:]  # unseen pairs
    links = loaded.align(de, en)
    assert len(links) == N_NEW and _in_range(links, de, en)
    assert _final_period_rate(links, de, en) > 0.9
    # lines of text and a file work as inputs too
    (tmp_path / "s").write_text("".join(" ".join(s) + "\n" for s in de[:3]))
    again = loaded.align(tmp_path / "s", [" ".join(t) for t in en[:3]])
    assert len(again) == 3 and _in_range(again, de[:3], en[:3])


def test_errors(trained, tmp_path):
    with pytest.raises(DataError, match="not been trained"):
        Aligner().align([["a"]], [["b"]])
    with pytest.raises(DataError, match="not been trained"):
        Aligner().save(tmp_path / "x")
    with pytest.raises(DataError, match="source has 2 sentences but target has 1"):
        trained[0].align([["a"], ["b"]], [["c"]])
    with pytest.raises(DataError, match="sentence 1: bad token 'a b'"):
        as_token_lists([["a b"]])
    with pytest.raises(DataError, match="no aligner.json"):
        Aligner.load(tmp_path)
    (tmp_path / MODEL_FILE).write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON"):
        Aligner.load(tmp_path)
    (tmp_path / MODEL_FILE).write_text(json.dumps({"format": "scanmt-aligner", "version": 1, "settings": {}}))
    with pytest.raises(DataError, match="priors.gz: missing"):
        Aligner.load(tmp_path)
    with pytest.raises(ConfigError, match="unknown symmetrization"):
        AlignerSettings(symmetrization="gdfa")
    with pytest.raises(ConfigError, match="unknown key"):
        AlignerSettings.from_dict({"seed": 1})
    with pytest.raises(DataError, match="empty corpus"):
        Aligner().fit([], [])


def test_empty_sentences_are_allowed(trained):
    links = trained[0].align([["Ein", "Hund", "."], []], [["A", "dog", "."], ["x"]])
    assert len(links) == 2 and links[1] == set()


def test_project_to_words():
    src = ["▁ein", "▁Hund", "e", "▁."]
    tgt = ["▁a", "▁dog", "s", "▁."]
    assert project_to_words({(0, 0), (1, 1), (2, 2), (2, 1), (3, 3)}, src, tgt) == {(0, 0), (1, 1), (2, 2)}
    with pytest.raises(DataError, match="outside"):
        project_to_words({(4, 0)}, src, tgt)


# ---------------------------------------------------------------------------- CLI on a tiny prepared dir


@pytest.fixture(scope="module")
def prepared(corpus, tmp_path_factory) -> Path:
    de, en = corpus
    d = tmp_path_factory.mktemp("prepared")
    splits = {"train": slice(0, N_TRAIN), "valid": slice(N_TRAIN, N_TRAIN + N_NEW)}
    for split, sl in splits.items():
        (d / f"{split}.tok.de").write_text("".join(" ".join(s) + "\n" for s in de[sl]))
        (d / f"{split}.tok.en").write_text("".join(" ".join(s) + "\n" for s in en[sl]))
    train_subword_model([d / "train.tok.de", d / "train.tok.en"], d / "spm", 600)
    sp = SubwordModel(d / "spm.model")
    for split in splits:
        for lang in ("de", "en"):
            lines = (d / f"{split}.tok.{lang}").read_text().splitlines()
            (d / f"{split}.bpe.{lang}").write_text("".join(" ".join(p) + "\n" for p in sp.encode_all(lines)))
    (d / "meta.json").write_text(json.dumps({"src_lang": "de", "tgt_lang": "en", "splits": list(splits)}))
    return d


def _lens(path: Path) -> list[int]:
    return [len(ln.split()) for ln in path.read_text().splitlines()]


FAST = ("--samplers", "2", "--rel-iterations", "0.5")


def test_cli_train_apply_and_fertility(prepared, tmp_path, capsys):
    d = prepared
    out = tmp_path / "align"
    assert main(["align", "--data", str(d), "--out", str(out), *FAST]) == 0
    text = capsys.readouterr().out
    assert "subword level" in text and "word level" in text
    for level, kind in (("subword", "bpe"), ("word", "tok")):
        for split in ("train", "valid"):
            path = out / f"{split}.{level}.align"
            links = read_links(path, src_lens=_lens(d / f"{split}.{kind}.de"), tgt_lens=_lens(d / f"{split}.{kind}.en"))
            assert sum(len(s) for s, _ in links) > 0
        assert (out / level / MODEL_FILE).exists()

    # a second run reuses the aligners and link files
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest) == {f"{s}.{lv}.align" for s in ("train", "valid") for lv in ("word", "subword")}
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("*.align")}
    assert main(["align", "--data", str(d), "--out", str(out), "--level", "word", *FAST]) == 0
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.align")} == before
    # --force retrains: a new model id, and the valid links are redone with it
    assert main(["align", "--data", str(d), "--out", str(out), "--level", "word", *FAST, "--force"]) == 0
    forced = json.loads((out / "manifest.json").read_text())
    assert forced["valid.word.align"]["aligner"] != manifest["valid.word.align"]["aligner"]
    assert forced["valid.word.align"]["aligner"] == Aligner.load(out / "word").model_id
    assert forced["valid.subword.align"] == manifest["valid.subword.align"]
    assert (out / "valid.word.align").stat().st_mtime_ns != before["valid.word.align"]

    # apply mode: new pairs with the saved word-level priors
    res = tmp_path / "new.align"
    rc = main(["align", "--model", str(out), "--level", "word", "--src", str(d / "valid.tok.de"),
               "--tgt", str(d / "valid.tok.en"), "--out", str(res)])
    assert rc == 0
    assert len(read_links(res, src_lens=_lens(d / "valid.tok.de"), tgt_lens=_lens(d / "valid.tok.en"))) == N_NEW

    # fertility strategies on top of the subword alignments
    assert main(["fertility", "--data", str(d), "--strategy", "guided", "--align-dir", str(out)]) == 0
    assert main(["fertility", "--data", str(d), "--strategy", "actual", "--align-dir", str(out)]) == 0
    fert_files = sorted(p.name for p in (d / "fertility").glob("*.fert"))
    assert len(fert_files) == 4

    # bad usage
    assert main(["align", "--model", str(out), "--src", str(d / "valid.tok.de")]) == 2
    assert "--src FILE --tgt FILE --out FILE" in capsys.readouterr().err


def test_cli_eval_gold(prepared, tmp_path, capsys):
    gold = SHARED / "alignments" / "deen-rwth"
    if not (gold / "test.talp").exists():
        pytest.skip(f"gold alignments not found at {gold} (shared data absent)")
    report = tmp_path / "aer.json"
    rc = main(["align", "--eval-gold", str(gold), "--data", str(prepared), "--out", str(report),
               "--rel-iterations", "0.3", "--samplers", "1"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "grow-diag-final-and" in out and "<- used" in out
    r = json.loads(report.read_text())
    assert r["n_gold"] == 508 and r["n_train"] == N_TRAIN
    # with 400 in-domain sentences the numbers are poor, but far better than chance
    assert 0 < r["results"]["grow-diag-final-and"]["aer"] < 80
