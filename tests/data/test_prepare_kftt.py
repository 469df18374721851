"""``scanmt prepare --corpus kftt`` and ``--max-train-words`` (issue 53)."""

from __future__ import annotations

import gzip
import importlib
import json

import pytest

from scanmt.api import PrepareRequest, prepare
from scanmt.api.prepare import kftt_splits
from scanmt.cli.main import main
from scanmt.data.subword import word_index
from scanmt.data.tokenize import tokenize_all
from scanmt.errors import DataError
from tests.kftt_helpers import require_kftt, tiny_mirror


def _write(path, lines: list[str]) -> str:
    path.write_text("".join(f"{ln}\n" for ln in lines), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def kftt_small(tmp_path_factory):
    """The first 300 lines of every KFTT file, one English training line emptied, prepared ja-en by the CLI."""
    mirror = tiny_mirror(tmp_path_factory.mktemp("kftt"), 300)
    with gzip.open(mirror / "train.en.gz", "rt", encoding="utf-8") as fh:
        en = fh.read().splitlines()
    en[4] = ""  # KFTT's own training data has two empty English lines
    with gzip.open(mirror / "train.en.gz", "wt", encoding="utf-8") as fh:
        fh.writelines(f"{x}\n" for x in en)
    out = tmp_path_factory.mktemp("prepared") / "kftt-ja-en"
    rc = main(["prepare", "--corpus", "kftt", "--pair", "ja-en", "--mirror", str(mirror), "--out", str(out),
               "--vocab-size", "1000"])
    assert rc == 0
    return mirror, out


def test_kftt_is_prepared_from_a_mirror_with_the_papers_1_to_40_word_filter(kftt_small):
    mirror, out = kftt_small
    meta = json.loads((out / "meta.json").read_text())
    assert meta["sources"]["valid"] == {"src": str(mirror / "dev.ja.gz"), "tgt": str(mirror / "dev.en.gz")}
    assert meta["max_train_words"] == 40
    assert meta["tokenizers"] == {"ja": "mecab-unidic-lite+nfkc", "en": "moses"}
    with gzip.open(mirror / "train.ja.gz", "rt", encoding="utf-8") as fh:
        ja = fh.read().splitlines()
    with gzip.open(mirror / "train.en.gz", "rt", encoding="utf-8") as fh:
        en = fh.read().splitlines()
    lengths = [(len(a.split()), len(b.split())) for a, b in zip(tokenize_all(ja, "ja"), tokenize_all(en, "en"))]
    kept = [i for i, (a, b) in enumerate(lengths) if 1 <= a <= 40 and 1 <= b <= 40]
    assert 4 not in kept and any(max(n) > 40 for n in lengths)  # the empty line and long pairs are dropped
    assert meta["sizes"] == {"train": len(kept), "valid": 300, "test": 300}
    assert meta["train_filter"] == {"read": 300, "kept": len(kept)}
    raw = (out / "train.raw.ja").read_text(encoding="utf-8").splitlines()
    assert raw == [ja[i] for i in kept]
    for lang in ("ja", "en"):
        tok = (out / f"train.tok.{lang}").read_text(encoding="utf-8").splitlines()
        assert all(1 <= len(t.split()) <= 40 for t in tok)


def test_japanese_subwords_never_cross_words(kftt_small):
    """Sentencepiece learns on the words, so each word's pieces merge back into it (what DROP and maps index)."""
    _, out = kftt_small
    for split in ("train", "valid"):
        tok = (out / f"{split}.tok.ja").read_text(encoding="utf-8").splitlines()
        bpe = (out / f"{split}.bpe.ja").read_text(encoding="utf-8").splitlines()
        for words, pieces in zip(tok, bpe):
            p = pieces.split()
            assert max(word_index(p)) + 1 == len(words.split())
            assert "".join(p).replace("\u2581", " ").split() == words.split()


def test_kftt_preparation_is_reused_and_the_filter_is_a_setting(kftt_small, capsys):
    mirror, out = kftt_small
    before = (out / "meta.json").stat().st_mtime_ns
    argv = ["prepare", "--corpus", "kftt", "--pair", "ja-en", "--mirror", str(mirror), "--out", str(out),
            "--vocab-size", "1000"]
    assert main(argv) == 0 and (out / "meta.json").stat().st_mtime_ns == before
    assert main(argv + ["--max-train-words", "30"]) == 2
    assert "already holds data prepared with other settings" in capsys.readouterr().err


def test_en_ja_is_the_reverse_direction(tmp_path):
    mirror = tiny_mirror(tmp_path / "m", 3)
    splits = kftt_splits("en", "ja", str(mirror))
    assert {k: (v.src.name, v.tgt.name) for k, v in splits.items()} == {
        "train": ("train.en.gz", "train.ja.gz"), "valid": ("dev.en.gz", "dev.ja.gz"), "test": ("test.en.gz", "test.ja.gz")}


def test_kftt_is_found_through_scanmt_kftt(tmp_path, monkeypatch):
    mirror = tiny_mirror(tmp_path / "elsewhere", 3)
    monkeypatch.setenv("SCANMT_KFTT", str(mirror))
    assert kftt_splits("ja", "en", None)["train"].src == (mirror / "train.ja.gz").resolve()


def test_kftt_is_found_in_the_shared_folder(monkeypatch):
    shared = require_kftt()
    monkeypatch.delenv("SCANMT_KFTT", raising=False)
    assert kftt_splits("ja", "en", None)["test"].tgt == (shared / "test.en.gz").resolve()


def test_missing_kftt_is_one_line_naming_where_it_looked(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SCANMT_KFTT", str(tmp_path / "nowhere"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("scanmt.data.corpus_dirs.__file__", str(tmp_path / "a" / "b" / "c" / "corpus_dirs.py"))
    assert main(["prepare", "--corpus", "kftt", "--pair", "ja-en", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "KFTT file train.ja.gz not found in" in err and str(tmp_path / "nowhere") in err
    assert "SCANMT_KFTT" in err and "--mirror" in err and len(err.splitlines()) == 1, err


def test_a_mirror_missing_a_kftt_file_is_refused(tmp_path, capsys):
    mirror = tiny_mirror(tmp_path / "m", 3)
    (mirror / "dev.en.gz").unlink()
    assert main(["prepare", "--corpus", "kftt", "--pair", "ja-en", "--mirror", str(mirror),
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert f"--mirror {mirror}: dev.en.gz is not there" in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("pair", ["de-en", "ja-de", "en-en"])
def test_kftt_is_japanese_english_only(tmp_path, capsys, pair):
    assert main(["prepare", "--corpus", "kftt", "--pair", pair, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("scanmt prepare: error: ") and "--pair" in err and len(err.splitlines()) == 1, err


def test_prepare_help_names_the_corpora_and_the_filter(capsys):
    with pytest.raises(SystemExit):
        main(["prepare", "--help"])
    out = capsys.readouterr().out
    assert "--corpus kftt --pair ja-en" in out and "$SCANMT_KFTT" in out and "--max-train-words" in out
    assert "{multi30k,kftt}" in out


# ------------------------------------------------------------------ --max-train-words on the user's own files


@pytest.fixture
def raw(tmp_path):
    de = [f"Ein Mann {i} geht in den Park ." for i in range(10)]
    en = [f"A man {i} walks to the park ." for i in range(10)]
    de[3] = "Ein " * 12 + "."
    en[5] = ""
    return tmp_path, de, en


def test_an_empty_training_line_stays_an_error_without_the_filter(raw, capsys):
    tmp, de, en = raw
    files = (_write(tmp / "a.de", de), _write(tmp / "a.en", en))
    argv = ["prepare", "--train", *files, "--valid", *files, "--pair", "de-en", "--out", str(tmp / "o"),
            "--vocab-size", "40"]
    assert main(argv) == 2
    assert f"{files[1]}:6: target file has an empty line" in capsys.readouterr().err


def test_max_train_words_drops_long_and_empty_training_pairs(raw):
    tmp, de, en = raw
    train = (_write(tmp / "a.de", de), _write(tmp / "a.en", en))
    valid = (_write(tmp / "v.de", de[:2]), _write(tmp / "v.en", en[:2]))
    r = prepare(PrepareRequest(pair="de-en", out=str(tmp / "o"), train=train, valid=valid, vocab_size=40,
                               max_train_words=10))
    assert r.sizes == {"train": 8, "valid": 2} and (r.train_read, r.max_train_words) == (10, 10)
    kept = (tmp / "o" / "train.raw.de").read_text(encoding="utf-8").splitlines()
    assert kept == [x for i, x in enumerate(de) if i not in (3, 5)]


def test_max_train_words_leaving_nothing_is_an_error(raw):
    tmp, de, en = raw
    train = (_write(tmp / "a.de", de), _write(tmp / "a.en", en))
    valid = (_write(tmp / "v.de", de[:2]), _write(tmp / "v.en", en[:2]))
    with pytest.raises(DataError, match="no training pair has 1 to 1 words on both sides"):
        prepare(PrepareRequest(pair="de-en", out=str(tmp / "o"), train=train, valid=valid, vocab_size=40,
                               max_train_words=1))


def test_the_filter_drops_empty_training_lines_only(raw):
    """Validation and test lines are never filtered: an empty one is still an error, naming its file."""
    tmp, de, en = raw
    train = (_write(tmp / "a.de", de), _write(tmp / "a.en", en))
    with pytest.raises(DataError, match=r"a\.en:6: target file has an empty line"):
        prepare(PrepareRequest(pair="de-en", out=str(tmp / "o"), train=train, valid=train, vocab_size=40,
                               max_train_words=10))


def test_settings_of_earlier_preparations_still_match(tmp_path):
    """Without the filter and with Moses on both sides, meta.json gains no key: earlier folders are reused."""
    de = _write(tmp_path / "a.de", [f"Ein Mann {i} geht ." for i in range(10)])
    en = _write(tmp_path / "a.en", [f"A man {i} walks ." for i in range(10)])
    request = PrepareRequest(pair="de-en", out=str(tmp_path / "o"), train=(de, en), valid=(de, en), vocab_size=40)
    prepare(request)
    meta = json.loads((tmp_path / "o" / "meta.json").read_text())
    assert "max_train_words" not in meta and "tokenizers" not in meta and "train_filter" not in meta
    before = (tmp_path / "o" / "meta.json").stat().st_mtime_ns
    prepare(request)
    assert (tmp_path / "o" / "meta.json").stat().st_mtime_ns == before


@pytest.mark.parametrize("corpus, given, expected", [
    ("kftt", {}, {"vocab_size": 16000, "max_train_words": 40}),
    ("kftt", {"vocab_size": 32000, "max_train_words": 50}, {"vocab_size": 32000, "max_train_words": 50}),
    ("multi30k", {}, {"vocab_size": 8000, "max_train_words": None}),
    (None, {}, {"vocab_size": 8000, "max_train_words": None}),
])
def test_default_settings_per_corpus(tmp_path, monkeypatch, corpus, given, expected):
    """KFTT: the paper's 1-40 word cleaning and the measured 16k subwords; the others keep their old defaults."""
    api_prepare = importlib.import_module("scanmt.api.prepare")  # the module (scanmt.api.prepare is the function)

    seen = {}

    def fake(splits, src, tgt, out, **kwargs):
        seen.update(kwargs)
        return {"vocab": 1, "vocab_size": kwargs["vocab_size"], "sizes": {}}

    monkeypatch.setattr(api_prepare, "prepare_splits", fake)
    mirror = tiny_mirror(tmp_path / "m", 2) if corpus == "kftt" else None
    if corpus == "multi30k":
        monkeypatch.setattr(api_prepare, "multi30k_splits", lambda *a: {})
    pair = "ja-en" if corpus == "kftt" else "de-en"
    files = {} if corpus else {"train": ("a", "b"), "valid": ("a", "b")}
    prepare(PrepareRequest(pair=pair, out=str(tmp_path / "o"), corpus=corpus, mirror=str(mirror) if mirror else None,
                           **files, **given))
    assert {k: seen[k] for k in expected} == expected


@pytest.mark.parametrize("pair", ["ja-en", "en-ja"])
def test_the_translation_pipeline_reads_and_writes_japanese_words(kftt_small, pair):
    """translate / stress / plot-attention read raw Japanese through the registry (MeCab words, then subwords)
    and write Japanese output joined without spaces."""
    from scanmt.data.pipeline import TextPipeline
    from scanmt.data.subword import merge_pieces

    _, out = kftt_small
    src, tgt = pair.split("-")
    pipe = TextPipeline.from_data_dir(out, src, tgt)
    if src == "ja":
        assert merge_pieces(pipe.source_pieces("京都は日本の都市です。")) == "京都 は 日本 の 都市 です 。"
    else:
        pieces = pipe.target_pieces_all(["京都は日本の都市です。"])[0]
        assert pipe.detokenize_target(pieces) == "京都は日本の都市です。"
