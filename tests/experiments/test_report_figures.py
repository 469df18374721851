"""Regenerating a report removes the figures its previous version linked and no longer shows, and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from scanmt.experiments.report.writing import stale_figures
from tests.experiments.test_results_json import SEEDS, fake_experiment, report


def previous_report(docs: Path, links: list[str], files: list[str]) -> Path:
    folder = docs / "experiments-table1"
    folder.mkdir(parents=True)
    for name in files:
        (folder / name).write_bytes(b"\x89PNG old")
    md = docs / "experiments-table1.md"
    md.write_text("\n".join(f"![attention maps]({link})" for link in links) + "\n", encoding="utf-8")
    return md


def test_only_linked_figures_of_the_report_own_folder_are_stale(tmp_path):
    docs = tmp_path / "docs"
    md = previous_report(docs, ["experiments-table1/attention-7.png", "experiments-table1/attention-8.png",
                                "other/attention-3.png", "experiments-table1/attention-5.png"],
                         ["attention-7.png", "attention-8.png", "attention-9.png"])
    keep = [docs / "experiments-table1" / "attention-8.png"]
    # 7: linked before, not kept -> stale; 8: kept; 9: never linked (a user's file); 5: linked but absent;
    # other/attention-3.png: another folder
    assert stale_figures(md, keep) == [docs / "experiments-table1" / "attention-7.png"]
    assert stale_figures(docs / "missing.md", keep) == []


def test_the_report_removes_its_old_figures_and_keeps_a_users_file(tmp_path):
    out, docs = tmp_path / "exp", tmp_path / "docs"
    fake_experiment(out, SEEDS)
    previous_report(docs, ["experiments-table1/attention-7.png"], ["attention-7.png", "mine.png"])
    report(out, docs)  # --figures 0: the new report shows no figure
    folder = docs / "experiments-table1"
    assert not (folder / "attention-7.png").exists()
    assert (folder / "mine.png").read_bytes() == b"\x89PNG old"
    assert "attention-7.png" not in (docs / "experiments-table1.md").read_text(encoding="utf-8")


def test_a_file_where_the_figure_folder_goes_is_refused_before_any_report_is_written(tmp_path, capsys):
    from scanmt.cli.main import main

    out, docs = tmp_path / "exp", tmp_path / "docs"
    fake_experiment(out, SEEDS)
    docs.mkdir()
    (docs / "experiments-table1").write_text("mine\n", encoding="utf-8")
    assert main(["experiment", "report", str(out), "--out", str(docs), "--figures", "0"]) != 0
    assert f"{docs / 'experiments-table1'}: is a file, but the report puts its figures in a folder" in capsys.readouterr().err
    assert (docs / "experiments-table1").read_text(encoding="utf-8") == "mine\n"
    assert not (docs / "experiments-table1.md").exists() and not (docs / "experiments-table1.json").exists()


def test_out_naming_a_file_is_refused_before_the_report_is_computed(tmp_path, capsys, monkeypatch):
    """``experiment report --out FILE`` failed with "File exists" only after computing the whole report
    (issue 52, item 16)."""
    from scanmt.cli.main import main
    from scanmt.experiments.report import writing as report_writing

    def computed(*args, **kwargs):
        raise AssertionError("the report was computed before --out was checked")

    out, docs = tmp_path / "exp", tmp_path / "report.md"
    fake_experiment(out, SEEDS)
    docs.write_text("mine\n", encoding="utf-8")
    monkeypatch.setattr(report_writing, "collect", computed)
    assert main(["experiment", "report", str(out), "--out", str(docs), "--figures", "0"]) == 2
    err = capsys.readouterr().err
    assert err == (f"scanmt experiment: error: --out {docs / 'experiments-table1.md'}: {docs} is a file, "
                   "not a folder\n")
    assert docs.read_text(encoding="utf-8") == "mine\n"


def test_japanese_sources_are_counted_in_words_not_in_space_separated_chunks(tmp_path):
    """Raw Japanese has no spaces: the figures' and examples' word limits counted every sentence as one word,
    so ``--max-figure-words`` never excluded a Japanese source.  ``Texts.src_words`` counts MeCab's words."""
    from scanmt.data.tokenize import tokenize
    from scanmt.experiments.report.collection import load_texts

    data = tmp_path / "exp" / "shared" / "data"
    data.mkdir(parents=True)
    (data / "test.raw.ja").write_text("京都は日本の都市です。\n猫\n", encoding="utf-8")
    (data / "test.raw.en").write_text("Kyoto is a city in Japan.\nA cat\n", encoding="utf-8")
    texts = load_texts(tmp_path / "exp", {"split": "test", "src_lang": "ja", "tgt_lang": "en"})
    assert texts.src_words == [len(tokenize("京都は日本の都市です。", "ja").split()), 1]
    assert texts.src_words[0] >= 6  # 京都 は 日本 の 都市 です 。
    assert [len(line.split()) for line in texts.src] == [1, 1]  # what was counted before


def test_figures_choose_sources_between_the_shortest_and_the_longest_and_short_outputs():
    from scanmt.experiments.report.collection import Texts
    from scanmt.experiments.report.figures import choose_sentences

    texts = Texts(src=["x y", "x y z", "a b c d e f", "x"], ref=[""] * 4,
                  ref_tok=["the dog runs", "a cat", "a man", "hi"], tgt_lang="en", src_words=[2, 3, 6, 1])
    base = ["the dog dog runs", "a cat cat cat", "a man man", "hi"]
    other = ["the dog runs", "a cat cat cat", "a man", "hi"]
    # 0 is too short; 2 is fixed by the other system, so it comes before 1
    assert choose_sentences(base, other, texts, 5, min_src_words=3, max_src_words=6) == [2, 1]
    # 1's outputs have 4 words
    assert choose_sentences(base, other, texts, 5, min_src_words=3, max_src_words=6, max_hyp_words=3) == [2]
    # among the sentences partial attention files hold
    assert choose_sentences(base, other, texts, 5, min_src_words=3, max_src_words=6, among={1, 3}) == [1]


def test_the_report_names_its_figure_options_and_refuses_an_empty_range(tmp_path, capsys):
    from scanmt.cli.main import main

    out, docs = tmp_path / "exp", tmp_path / "docs"
    fake_experiment(out, SEEDS)
    assert main(["experiment", "report", str(out), "--out", str(docs), "--figures", "1", "--examples", "0",
                 "--min-figure-words", "30", "--max-figure-words", "60", "--max-figure-output-words", "70"]) == 0
    md = (docs / "experiments-table1.md").read_text(encoding="utf-8")
    assert ("--figures 1 --examples 0 --min-figure-words 30 --max-figure-words 60 --max-figure-output-words 70"
            in md)
    capsys.readouterr()
    assert main(["experiment", "report", str(out), "--out", str(docs), "--min-figure-words", "30",
                 "--max-figure-words", "20"]) != 0
    assert "--min-figure-words 30 is above --max-figure-words 20" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["experiment", "report", str(out), "--out", str(docs), "--figures", "-1"])
    assert exit_.value.code == 2
    assert "argument --figures: must be at least 0, got -1" in capsys.readouterr().err


def _png_size(path: Path) -> tuple[int, int]:
    import struct

    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", head[16:24])


def _sentence(n_src: int, n_hyp: int, seed: int):
    from types import SimpleNamespace

    import numpy as np

    rng = np.random.default_rng(seed)
    a = rng.random((n_hyp, n_src)) * (rng.random((n_hyp, n_src)) < 0.1)
    a /= np.maximum(a.sum(axis=1, keepdims=True), 1e-9)
    return SimpleNamespace(attention=a, src=[f"s{i}" for i in range(n_src)], hyp=[f"w{i}" for i in range(n_hyp)])


def test_a_long_sentences_maps_stay_legible_and_a_short_ones_stay_small(tmp_path):
    """A KFTT-length pair (70 source subwords, 60 outputs, two panels) is drawn at the legible dpi or more, so
    wider than the 1,400 pixels a short one keeps to; a caption-length pair is drawn at 100 dpi."""
    from scanmt.experiments.report.figures import FIGURE_WIDTH_PIXELS, LEGIBLE_DPI, draw_figure
    from scanmt.viz.attention_map import Panel, figure_pixels

    def panels(n_src, n_hyp):
        return [(name, _sentence(n_src, n_hyp, seed)) for seed, name in enumerate(["softmax", "csparsemax"])]

    def as_panels(ps):
        return [Panel(name=n, attention=s.attention, src=s.src, hyp=s.hyp) for n, s in ps]

    long_pair = panels(70, 60)
    png = tmp_path / "long.png"
    draw_figure(png, long_pair, "test sentence 1")
    w, h = _png_size(png)
    least_w, least_h = figure_pixels(as_panels(long_pair), LEGIBLE_DPI)
    assert w >= least_w and h >= least_h
    assert w > FIGURE_WIDTH_PIXELS

    short_pair = panels(12, 13)
    png = tmp_path / "short.png"
    draw_figure(png, short_pair, "test sentence 2")
    assert _png_size(png) == figure_pixels(as_panels(short_pair), 100)
    assert _png_size(png)[0] <= FIGURE_WIDTH_PIXELS
