"""An archive holds no corpus text (:mod:`scanmt.experiments.archive.corpus`): a corpus the grid prepared
itself, the runs' joined stress inputs and the attention file's source tokens are left out, recorded by digest,
and made again on restore; anything that would come out otherwise is refused."""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest

from scanmt.cli.main import main
from scanmt.data.attention_file import AttentionFile, SentenceAttention, save_attention
from scanmt.errors import ConfigError, DataError
from scanmt.experiments import archive
from scanmt.experiments import shared as shared_steps
from scanmt.experiments.archive import corpus as archive_corpus
from scanmt.experiments.archive.corpus import words_digest
from scanmt.experiments.figure_window import FigureWindow
from scanmt.experiments.shared import SharedPaths
from scanmt.metrics.stress import join_groups
from tests.experiments.test_archive import WEIGHTS, FakeTrainer, tree

CORPUS = {
    "train.raw.de": "Ein Hund läuft.\nZwei Katzen.\n", "train.raw.en": "A dog runs.\nTwo cats.\n",
    "train.tok.de": "Ein Hund läuft .\nZwei Katzen .\n", "train.tok.en": "A dog runs .\nTwo cats .\n",
    "train.bpe.de": "▁Ein ▁Hund ▁läuft .\n▁Zwei ▁Katz en .\n", "train.bpe.en": "▁A ▁dog ▁runs .\n▁Two ▁cats .\n",
    "valid.raw.de": "Ein Hund.\n", "valid.raw.en": "A dog.\n", "valid.tok.de": "Ein Hund .\n",
    "valid.tok.en": "A dog .\n", "valid.bpe.de": "a b c\n", "valid.bpe.en": "▁A ▁dog .\n",
    "test.raw.de": "Ein Mann.\nEine Frau.\nDrei Kinder.\n", "test.raw.en": "A man.\nA woman.\nThree children.\n",
    "test.tok.de": "Ein Mann .\nEine Frau .\nDrei Kinder .\n",
    "test.tok.en": "A man .\nA  woman .\nThree children .\n",  # a double space, as Moses may leave
    "test.bpe.de": "▁Ein ▁Mann .\n▁Eine ▁Frau .\n▁Drei ▁Kind er .\n",
    "test.bpe.en": "▁A ▁man .\n▁A ▁woman .\n▁Three ▁children .\n",
}
PARAMS = {"data": "multi30k", "pair": "de-en", "vocab_size": 8000, "mirror": None}


class FakePrepare:
    """Stands in for ``scanmt prepare``: writes the corpus files (``changes``: other contents for some)."""

    def __init__(self, changes: dict[str, str] | None = None) -> None:
        self.changes, self.calls = changes or {}, []

    def __call__(self, params: dict, into: Path, mirror: str | None) -> None:
        self.calls.append((dict(params), mirror))
        into.mkdir(parents=True)
        for name, text in {**CORPUS, **self.changes}.items():
            (into / name).write_text(text, encoding="utf-8")
        (into / "meta.json").write_text('{"sources": "elsewhere"}\n')


def make_prepared(root: Path, sink: bool = False) -> Path:
    """``root/exp``: a grid that prepared its corpus itself, with a predictor, two finished runs (seed 1 with an
    attention file of the test split) that ran the stress test at K = 1 and 2."""
    out = root / "exp"
    data = out / "shared" / "data"
    (data / "align").mkdir(parents=True)
    for name, text in {**CORPUS, "meta.json": '{"src_lang": "de", "tgt_lang": "en"}\n', "spm.model": "m\n",
                       "vocab.txt": "<pad>\n"}.items():
        (data / name).write_text(text, encoding="utf-8")
    (data / "align" / "train.word.align").write_text("0-0 1-1\n")
    (out / "shared" / ".done").mkdir()
    (out / "shared" / ".done" / "prepare.json").write_text(json.dumps({"params": PARAMS}))
    (out / "shared" / ".done" / "align.json").write_text('{"params": {}}\n')
    FakeTrainer(WEIGHTS)(SharedPaths(out), ["train.epochs=1"], print)
    (out / "grids").mkdir()
    (out / "grids" / "g.json").write_text('{"name": "g"}\n')
    test_src, test_ref = data / "test.raw.de", data / "test.raw.en"
    for seed in (1, 2):
        run = out / "runs" / "softmax" / f"seed{seed}"
        (run / "stress").mkdir(parents=True)
        spec = {"split": "test", "config": {"data": {"dir": str(data), "src_lang": "de"}}}
        (run / "spec.json").write_text(json.dumps(spec))
        (run / "stress" / "stress.json").write_text(json.dumps({"src": str(test_src), "ref": str(test_ref)}))
        for k in (1, 2):
            for side, source in (("src.de", test_src), ("ref.en", test_ref)):
                lines = join_groups(source.read_text(encoding="utf-8").splitlines(), k)
                (run / "stress" / f"k{k}.{side}").write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
            (run / "stress" / f"softmax.k{k}.hyp.en").write_text("output\n")
        lines = CORPUS["test.bpe.de"].splitlines()
        sentences = [SentenceAttention(np.full((2, len(line.split()) + sink), 0.5, np.float32),
                                       line.split() + (["<sink>"] if sink else []), ["▁x", "</s>"],
                                       sink=sink) for line in lines]
        save_attention(run / "test.attn.npz", sentences, {"transform": "softmax"})
        (run / "metrics.json").write_text(json.dumps({"bleu": 30.0 + seed}))
        (run / "DONE").write_text("")
    return out


def attention(path: Path) -> list[tuple[list[str], list[str], list[list[float]]]]:
    f = AttentionFile(path)
    return [(s.src, s.hyp, s.attention.tolist()) for s in f]


@pytest.mark.parametrize("sink", [False, True])
def test_no_corpus_text_travels_and_restore_makes_it_again(tmp_path, sink):
    out = make_prepared(tmp_path, sink)
    dest = tmp_path / "archive"
    assert archive.pack(out, dest).added == ["softmax/seed1", "softmax/seed2"]
    manifest = json.loads((dest / "manifest.json").read_text())
    corpus = manifest["shared"]["corpus"]
    assert corpus["prepare"] == PARAMS and sorted(corpus["files"]) == sorted(CORPUS)
    assert corpus["files"]["test.tok.en"]["words"] == words_digest(out / "shared/data/test.tok.en")
    assert "words" not in corpus["files"]["test.bpe.de"]
    with tarfile.open(dest / archive.SHARED_TAR) as tar:
        names = set(tar.getnames())
    assert not names & {f"data/{name}" for name in CORPUS}
    assert {"data/spm.model", "data/vocab.txt", "data/meta.json", "data/align/train.word.align"} <= names
    with tarfile.open(dest / "runs" / "softmax" / "seed1.tar.gz") as tar:
        names = set(tar.getnames())
        assert not [n for n in names if n.startswith("stress/k")] and "stress/softmax.k2.hyp.en" in names
        tar.extract("test.attn.npz", tmp_path / "packed", filter="tar")
    with np.load(tmp_path / "packed" / "test.attn.npz") as z:  # the attention travels, its source tokens not
        assert "attn_2" in z.files and not [k for k in z.files if k.startswith("src_")]
    left = manifest["runs"]["softmax/seed1"]["left_out"]
    assert sorted(left) == ["stress/k1.ref.en", "stress/k1.src.de", "stress/k2.ref.en", "stress/k2.src.de",
                            "test.attn.npz"]
    assert left["test.attn.npz"]["attention_sources"]["sink"] is sink

    original, maps = tree(out), attention(out / "runs/softmax/seed1/test.attn.npz")
    shutil.move(out, tmp_path / "old")
    prepare = FakePrepare({"test.tok.en": "A man .\nA woman .\nThree children .\n"})  # white space differs
    s = archive.restore(dest, out, train_predictor=FakeTrainer(WEIGHTS), mirror="/corpora", prepare=prepare,
                        say=lambda _: None)
    assert prepare.calls == [(PARAMS, "/corpora")]
    assert s.shared.startswith("restored, corpus prepared again, 18 files the same (1 tokenized files in their "
                               "words, not their white space), fertility predictor retrained")
    assert s.added == ["softmax/seed1", "softmax/seed2"]
    restored = tree(out)
    assert not (out / "shared" / ".corpus.preparing").exists()
    assert restored.pop("shared/data/test.tok.en") == b"A man .\nA woman .\nThree children .\n"
    changed = {"shared/data/test.tok.en", "runs/softmax/seed1/test.attn.npz", "runs/softmax/seed2/test.attn.npz"}
    assert {k for k in original if k not in restored} == {  # (only seed 1's attention is packed)
        "shared/data/test.tok.en", "runs/softmax/seed2/test.attn.npz"}
    assert {k: v for k, v in original.items() if k not in changed} == {
        k: v for k, v in restored.items() if k not in changed}
    assert attention(out / "runs/softmax/seed1/test.attn.npz") == maps
    # the restored folder packs to the same bytes
    archive.pack(out, tmp_path / "again")
    for rel in ("runs/softmax/seed1.tar.gz", "runs/softmax/seed2.tar.gz"):
        assert (tmp_path / "again" / rel).read_bytes() == (dest / rel).read_bytes()


def test_a_corpus_that_comes_out_otherwise_is_refused(tmp_path):
    out = make_prepared(tmp_path)
    dest = tmp_path / "archive"
    archive.pack(out, dest)
    shutil.move(out, tmp_path / "old")
    manifest = json.loads((dest / "manifest.json").read_text())
    manifest["shared"]["corpus"]["versions"] = {"sentencepiece": "0.1"}
    (dest / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=r"test\.bpe\.de, prepared again, differs .* sentencepiece 0\.1"):
        archive.restore(dest, out, train_predictor=FakeTrainer(WEIGHTS), say=lambda _: None,
                        prepare=FakePrepare({"test.bpe.de": "▁Ein ▁Man n .\n▁Eine ▁Frau .\n▁Drei ▁Kind er .\n"}))
    with pytest.raises(DataError, match=r"train\.raw\.en, prepared again, differs"):  # white space counts in raw text
        archive.restore(dest, out, train_predictor=FakeTrainer(WEIGHTS), say=lambda _: None,
                        prepare=FakePrepare({"train.raw.en": "A  dog runs.\nTwo cats.\n"}))
    assert not os.path.lexists(out / "shared") and not os.path.lexists(out / "runs" / "softmax" / "seed1")


def test_copies_that_do_not_follow_from_their_source_travel_whole(tmp_path):
    out = make_prepared(tmp_path)
    run = out / "runs" / "softmax" / "seed1"
    (run / "stress" / "k2.src.de").write_text("edited by hand\n")
    with np.load(run / "test.attn.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["src_1"] = np.array(["other"], dtype=str)
    arrays["attn_1"] = np.zeros((2, 1), np.float32)
    np.savez_compressed(run / "test.attn.npz", **arrays)
    dest = tmp_path / "archive"
    archive.pack(out, dest)
    left = json.loads((dest / "manifest.json").read_text())["runs"]["softmax/seed1"]["left_out"]
    assert sorted(left) == ["stress/k1.ref.en", "stress/k1.src.de", "stress/k2.ref.en"]
    original = tree(run)
    shutil.move(out, tmp_path / "old")
    archive.restore(dest, out, train_predictor=FakeTrainer(WEIGHTS), prepare=FakePrepare(), say=lambda _: None)
    assert tree(out / "runs" / "softmax" / "seed1") == original


def test_a_corpus_prepared_again_otherwise_is_refused_by_pack_and_restore(tmp_path):
    """The archived runs read the recorded corpus: a folder whose corpus changed since is another shared work."""
    out = make_prepared(tmp_path)
    dest = tmp_path / "archive"
    archive.pack(out, dest)
    data = out / "shared" / "data"
    (data / "test.tok.en").write_text("A man .\nA woman .\nThree  children .\n")  # white space: the same words
    assert archive.pack(out, dest).shared == "same"
    shutil.rmtree(out / "runs" / "softmax" / "seed2")
    (data / "test.raw.en").write_text("A man.\nA girl.\nThree children.\n")
    with pytest.raises(DataError, match=r"the prepared corpus's test\.raw\.en differs .* restore into an empty"):
        archive.restore(dest, out, say=lambda _: None)
    assert not os.path.lexists(out / "runs" / "softmax" / "seed2")
    with pytest.raises(DataError, match=r"exp/shared differs .* the prepared corpus's test\.raw\.en differs"):
        archive.pack(out, dest)
    (data / "test.raw.en").unlink()
    with pytest.raises(DataError, match=r"the prepared corpus has no test\.raw\.en"):
        archive.pack(out, dest)


def test_a_stress_input_made_from_outside_the_experiment_travels_whole(tmp_path):
    """Restore makes nothing from a file outside the experiment's shared work (a crafted manifest could name any
    file), so pack leaves out only what restore will make again: a reference of the user's own travels whole."""
    out = make_prepared(tmp_path)
    own = tmp_path / "own.test.en"
    own.write_text(CORPUS["test.raw.en"], encoding="utf-8")
    run = out / "runs" / "softmax" / "seed2"
    stress = run / "stress" / "stress.json"
    stress.write_text(json.dumps({**json.loads(stress.read_text()), "ref": str(own)}))
    dest = tmp_path / "archive"
    archive.pack(out, dest)
    left = json.loads((dest / "manifest.json").read_text())["runs"]["softmax/seed2"]["left_out"]
    assert sorted(left) == ["stress/k1.src.de", "stress/k2.src.de"]
    original = tree(run)
    del original["test.attn.npz"]  # (only seed 1's attention is packed)
    shutil.rmtree(run)
    own.unlink()
    archive.restore(dest, out, say=lambda _: None)
    assert tree(run) == original


def test_a_joined_input_that_comes_out_otherwise_is_refused(tmp_path):
    out = make_prepared(tmp_path)
    dest = tmp_path / "archive"
    archive.pack(out, dest)
    shutil.rmtree(out / "runs" / "softmax" / "seed2")
    manifest = json.loads((dest / "manifest.json").read_text())
    manifest["runs"]["softmax/seed2"]["left_out"]["stress/k1.ref.en"]["sha256"] = "0" * 64
    (dest / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=r"seed2\.tar\.gz: stress/k1\.ref\.en, joined again from .* differs"):
        archive.restore(dest, out, say=lambda _: None)
    assert not os.path.lexists(out / "runs" / "softmax" / "seed2")


def test_a_format_2_archive_is_upgraded_without_its_corpus(tmp_path):
    out = make_prepared(tmp_path)
    dest = tmp_path / "archive"
    archive.pack(out, dest)
    manifest = json.loads((dest / "manifest.json").read_text())
    for entry in manifest["runs"].values():  # as format 2 wrote them: no record of what was left out
        del entry["left_out"]
    del manifest["shared"]["corpus"]
    (dest / "manifest.json").write_text(json.dumps({**manifest, "format": 2}))
    s = archive.pack(out, dest)
    assert s.shared == "same, manifest upgraded to format 3, the corpus text left out"
    assert s.updated == ["softmax/seed1", "softmax/seed2"]  # packed again, without their copies of the test set
    upgraded = json.loads((dest / "manifest.json").read_text())
    assert upgraded["format"] == 3 and sorted(upgraded["shared"]["corpus"]["files"]) == sorted(CORPUS)
    assert len(upgraded["runs"]["softmax/seed2"]["left_out"]) == 4


@pytest.mark.parametrize("name, how, what", [
    ("../../../escaped.txt", {"from": "SHARED/data/test.raw.de", "k": 1, "sha256": "0"}, "name"),
    ("stress/k1.src.de", {"from": "/etc/hostname", "k": 1, "sha256": "0"}, "source outside the experiment"),
    ("stress/k1.src.de", {"from": "SHARED/data/../../../etc/hostname", "k": 1, "sha256": "0"}, "a '..' source"),
    ("test.attn.npz", {"attention_sources": {"from": "relative/test.bpe.de"}}, "a relative source"),
    ("stress/k1.src.de", "not a table", "an entry that is no table"),
])
def test_a_crafted_left_out_record_is_refused_before_anything_is_written(tmp_path, name, how, what):
    out = make_prepared(tmp_path)
    dest = tmp_path / "archive"
    archive.pack(out, dest)
    shutil.move(out, tmp_path / "old")
    manifest = json.loads((dest / "manifest.json").read_text())
    how = json.loads(json.dumps(how).replace("SHARED", str(out / "shared")))
    manifest["runs"]["softmax/seed2"]["left_out"] = {name: how}
    (dest / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=r"run 'softmax/seed2' records the left-out file .*crafted manifest"):
        archive.restore(dest, out, train_predictor=FakeTrainer(WEIGHTS), prepare=FakePrepare(), say=lambda _: None)
    assert not os.path.lexists(out) and not (tmp_path / "escaped.txt").exists(), what


def packed_attention(dest: Path, key: str = "softmax/seed1") -> dict[str, np.ndarray]:
    with tarfile.open(dest / "runs" / f"{key}.tar.gz") as tar:
        fh = tar.extractfile("test.attn.npz")
        with np.load(io.BytesIO(fh.read()), allow_pickle=False) as z:
            return {k: z[k] for k in z.files}


def test_a_figure_window_keeps_the_attention_of_the_sentences_a_report_may_draw(tmp_path, monkeypatch, capsys):
    """``archive --max-figure-tokens 3``: seed 1's attention keeps sentences 1 and 2 (3 subwords) and not 3 (4);
    every sentence keeps its source tokens.  Restored, the file is partial and says why when asked for sentence 3; the
    archive records the window, a later pack keeps it, and another window packs the run again."""
    out = make_prepared(tmp_path)
    dest = tmp_path / "archive"
    s = archive.pack(out, dest, window=FigureWindow(max_tokens=3))
    assert s.attention == {"softmax/seed1": (2, 3)} and s.window == FigureWindow(max_tokens=3)
    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["figure_window"] == {"min_words": 0, "max_words": None, "max_tokens": 3}
    record = manifest["runs"]["softmax/seed1"]["left_out"]["test.attn.npz"]["attention_sources"]
    assert record["window"] == manifest["figure_window"] and record["rows"] == 2 and record["sentences"] == 3
    arrays = packed_attention(dest)
    assert sorted(k for k in arrays if k.startswith("attn_")) == ["attn_0", "attn_1"]
    assert sorted(k for k in arrays if k.startswith("hyp_")) == ["hyp_0", "hyp_1"]  # (a map needs both)
    meta = json.loads(str(arrays["meta"]))
    assert meta["rows"] == [0, 1] and meta["rows_kept"] == ("kept by an archive for the sources of any length "
                                                            "and at most 3 subwords")

    maps = attention(out / "runs/softmax/seed1/test.attn.npz")
    shutil.move(out, tmp_path / "old")
    monkeypatch.setattr(shared_steps, "train_predictor", FakeTrainer(WEIGHTS))
    monkeypatch.setattr(archive_corpus, "prepare_corpus", FakePrepare())
    assert main(["experiment", "restore", str(dest), "--out", str(out)]) == 0
    assert capsys.readouterr().out.endswith("\n  attention restored for the archive's figure window only (the "
                                            "sentences a report's maps may draw): softmax/seed1 2 of 3\n")
    f = AttentionFile(out / "runs/softmax/seed1/test.attn.npz")
    assert f.rows == {0, 1} and [f.has(i) for i in range(3)] == [True, True, False]
    assert [(f[i].src, f[i].hyp, f[i].attention.tolist()) for i in (0, 1)] == maps[:2]
    assert f.source(2) == maps[2][0]
    with pytest.raises(DataError, match=r"holds the attention of 2 of its 3 sentences \(kept by an archive for "
                                         r"the sources of any length and at most 3 subwords\), not of sentence 2"):
        f[2]
    # the restored folder packs to the same bytes (the window already applied)
    archive.pack(out, tmp_path / "again")
    assert (tmp_path / "again/runs/softmax/seed1.tar.gz").read_bytes() == (dest / "runs/softmax/seed1.tar.gz").read_bytes()
    # later packs keep the recorded window; another one packs again the run whose attention travels
    assert archive.pack(out, dest).kept == ["softmax/seed1", "softmax/seed2"]
    s = archive.pack(out, dest, window=FigureWindow(max_tokens=3, min_words=4))
    assert s.updated == ["softmax/seed1"] and s.kept == ["softmax/seed2"] and s.attention == {"softmax/seed1": (0, 3)}
    assert not [k for k in packed_attention(dest) if k.startswith("attn_")]


def test_the_figure_window_counts_words_by_the_source_tokenizer(tmp_path):
    """Words as the report counts them (``Ein Mann.`` is 3 Moses words, 2 space-separated chunks), subwords with
    the sink; a window that admits every sentence lists them all."""
    out = make_prepared(tmp_path, sink=True)
    assert archive.pack(out, tmp_path / "a", window=FigureWindow(min_words=3, max_words=3, max_tokens=4)
                        ).attention == {"softmax/seed1": (2, 3)}  # 3, 3 and 4 subwords, and the sink
    assert archive.pack(out, tmp_path / "b", window=FigureWindow(max_words=2)).attention == {"softmax/seed1": (0, 3)}
    assert archive.pack(out, tmp_path / "c", window=FigureWindow(max_words=3)).attention == {"softmax/seed1": (3, 3)}
    assert json.loads(str(packed_attention(tmp_path / "c")["meta"]))["rows"] == [0, 1, 2]


def test_figure_windows_and_their_refusals(tmp_path, capsys):
    w = FigureWindow(30, 50, 70)
    assert w.admits(30, 70) and w.admits(50, 1) and not w.admits(29, 10) and not w.admits(51, 10)
    assert not w.admits(40, 71)
    assert w.describe() == "sources of 30 to 50 words and at most 70 subwords"
    assert FigureWindow(max_words=25).describe() == "sources of at most 25 words"
    assert FigureWindow.from_record(w.as_record(), "m") == w
    with pytest.raises(ConfigError, match="--min-figure-words 30 is above --max-figure-words 20"):
        FigureWindow(30, 20)
    with pytest.raises(DataError, match=r"m: its figure window .* is not one .*a damaged manifest"):
        FigureWindow.from_record({"min_words": -1, "max_words": None, "max_tokens": None}, "m")
    out = make_prepared(tmp_path)
    assert main(["experiment", "archive", str(out), "--to", str(tmp_path / "a"), "--max-figure-tokens", "3"]) == 0
    assert capsys.readouterr().out.endswith(
        "attention kept for the sources of any length and at most 3 subwords (the figure window): softmax/seed1 2 "
        "of 3\n")
    assert main(["experiment", "archive", str(out), "--to", str(tmp_path / "b"), "--min-figure-words", "9",
                 "--max-figure-words", "3"]) == 2
    assert "--min-figure-words 9 is above --max-figure-words 3" in capsys.readouterr().err
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    manifest["figure_window"] = {"max_words": "many"}
    (tmp_path / "a" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=r"manifest\.json: its figure window .* is not one"):
        archive.pack(out, tmp_path / "a")


def test_a_partial_attention_file_that_lists_other_rows_is_refused(tmp_path):
    """A restore checks that an archived partial file holds the attention of the sentences its meta lists."""
    out = make_prepared(tmp_path)
    dest = tmp_path / "archive"
    archive.pack(out, dest, window=FigureWindow(max_tokens=3))
    tar_path = dest / "runs" / "softmax" / "seed1.tar.gz"
    arrays = packed_attention(dest)
    meta = json.loads(str(arrays["meta"]))
    arrays["meta"] = np.array(json.dumps({**meta, "rows": [0, 2]}))
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    with tarfile.open(tar_path) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
    with tarfile.open(tar_path, "w:gz") as tar:
        for m, data in members:
            data = buf.getvalue() if m.name == "test.attn.npz" else data
            m.size = len(data)
            tar.addfile(m, io.BytesIO(data))
    manifest = json.loads((dest / "manifest.json").read_text())
    manifest["runs"]["softmax/seed1"]["size"] = tar_path.stat().st_size
    (dest / "manifest.json").write_text(json.dumps(manifest))
    shutil.move(out, tmp_path / "old")
    with pytest.raises(DataError, match=r"test\.attn\.npz is not the attention file the archive recorded \(it holds "
                                        r"the attention of other sentences than its meta lists\); nothing was restored"):
        archive.restore(dest, out, train_predictor=FakeTrainer(WEIGHTS), prepare=FakePrepare(), say=lambda _: None)
    assert not (out / "runs" / "softmax" / "seed1").exists()
