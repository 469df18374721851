"""``experiment report --grid A B --name STEM``: one report of several grids of one folder (the KFTT experiment's LSTM
and Transformer grids, issue 53): one Markdown page with each grid's page in turn, one JSON with every system, and
every grid's figures in one folder, named by grid.

The grids are the fake experiment of ``test_results_json``, twice in one folder, with seed-1 outputs, attention
files and stress tests added so that each grid's page draws its figures.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from scanmt.cli.main import main
from scanmt.data.attention_file import SentenceAttention, save_attention
from tests.experiments.test_results_json import SEEDS, fake_experiment

#: the second grid's systems, per seed: (bleu, rep, drop, meteor)
TRANSFORMER = {"transformer-softmax": {1: (35.0, 2.0, 8.0, 55.0), 2: (36.0, 3.0, 9.0, 56.0)},
               "transformer-csparsemax": {1: (35.5, 1.0, 7.0, 55.5)}}
#: seed-1 outputs of the two test sentences ("a dog ." and "two cats ."): the baseline repeats a word in the first
REPEATS, CLEAN = ["a dog dog .", "two cats ."], ["a dog .", "two cats ."]


def draws_figures(out: Path, baseline: str, other: str) -> None:
    """Seed-1 outputs and attention files of ``baseline`` (repeating a word) and ``other``, and a stress test in
    every finished run of both, so that the grid's page has attention maps and a stress figure."""
    for system, lines in ((baseline, REPEATS), (other, CLEAN)):
        run = out / "runs" / system / "seed1"
        (run / "test.hyp.en").write_text("\n".join(lines) + "\n", encoding="utf-8")
        sources = [["ein", "Hund", ".", "</s>"], ["zwei", "Katzen", ".", "</s>"]]
        sentences = [SentenceAttention(np.full((len(h.split()) + 1, len(s)), 1.0 / len(s)), s, h.split() + ["</s>"])
                     for s, h in zip(sources, lines)]
        save_attention(run / "test.attn.npz", sentences, {"transform": "softmax"})
        for metrics_file in (out / "runs" / system).glob("seed*/metrics.json"):
            metrics = json.loads(metrics_file.read_text(encoding="utf-8"))
            metrics["stress"] = {"scores": {str(k): {"bleu": 30.0 - k, "rep": 2.0 * k, "drop": 5.0 + k,
                                                     "dropped_sentences": 0.0, "length_ratio": 1.0}
                                            for k in (2, 4)}}
            metrics_file.write_text(json.dumps(metrics), encoding="utf-8")


def two_grids(out: Path) -> Path:
    """OUT with grid ``table1`` (softmax, csparsemax) and grid ``tfm`` (two Transformer systems), both drawing
    figures; returns ``out``."""
    fake_experiment(out, SEEDS)
    fake_experiment(out, TRANSFORMER, grid="tfm")
    draws_figures(out, "softmax", "csparsemax")
    draws_figures(out, "transformer-softmax", "transformer-csparsemax")
    return out


def report(out: Path, docs: Path, *grids_and_name: str) -> int:
    return main(["experiment", "report", str(out), "--out", str(docs), "--bootstrap-samples", "10", *grids_and_name])
