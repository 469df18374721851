"""The report's "DROP: aligner noise against model differences" (issue 30, item 4) and the results JSON's
``drop_noise``: DROP's spread over seeds split between the aligner (each run's K×K pairing scores,
``metrics.json`` ``drop_scores``) and the model, and the difference to the baseline tested against each.

The runs' pairing scores are built as ``x_ij = d + a_i + b_j + e_ij`` with a = (−u, 0, u), b = (−v, 0, v) and
e = w [[1, −1, 0], [−1, 1, 0], [0, 0, 0]] (rows and columns of e sum to 0), so by hand, for K = 3:
row means d + a_i, column means d + b_j, MS_ref = 3 (2u²) / 2 = 3u², MS_out = 3v², MS_int = 4w² / 4 = w²,
hence the aligner's variance of the run's DROP (3u² + 3v² − w²) / 9 and of one alignment (3u² + 3v² + w²) / 3.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from pathlib import Path

import pytest

from scanmt.experiments import run_metrics
from scanmt.experiments.report.drop_noise import ONE_ALIGNMENT, TITLE, run_aligner
from tests.experiments.test_results_json import fake_experiment, report

K = 3


def pairings(d: float, u: float, v: float, w: float = 0.0) -> list[float]:
    """The K×K scores ``d + a_i + b_j + e_ij`` of the module docstring, row by row (mean d)."""
    a, b = (-u, 0.0, u), (-v, 0.0, v)
    e = ((w, -w, 0.0), (-w, w, 0.0), (0.0, 0.0, 0.0))
    return [d + a[i] + b[j] + e[i][j] for i in range(K) for j in range(K)]


def var_of_run(u: float, v: float, w: float = 0.0) -> float:
    return (3 * u * u + 3 * v * v - w * w) / 9


def var_one(u: float, v: float, w: float = 0.0) -> float:
    return (3 * u * u + 3 * v * v + w * w) / 3


# per system, per seed: (run DROP d, u, v, w)
RUNS = {
    "softmax": {1: (10.0, 0.3, 0.4, 0.0), 2: (11.0, 0.0, 0.0, 0.0), 3: (12.0, 0.6, 0.0, 0.3)},
    "csparsemax": {1: (9.0, 0.3, 0.3, 0.0), 2: (9.2, 0.3, 0.3, 0.0), 3: (9.4, 0.3, 0.3, 0.0)},
    "sparsemax": {1: (10.8, 0.3, 0.4, 0.0), 2: (11.2, 0.3, 0.4, 0.0), 3: (11.6, 0.3, 0.4, 0.0)},
}


def grid(out: Path, runs: dict, *, samples: int = K, scores: bool = True) -> None:
    """A fake grid (:func:`fake_experiment`) whose runs have the DROPs and pairing scores of ``runs``."""
    fake_experiment(out, {name: {seed: (30.0, 5.0, d, 50.0) for seed, (d, *_) in by_seed.items()}
                          for name, by_seed in runs.items()})
    for name, by_seed in runs.items():
        for seed, (d, u, v, w) in by_seed.items():
            path = out / "runs" / name / f"seed{seed}" / "metrics.json"
            m = json.loads(path.read_text(encoding="utf-8"))
            m["drop_samples"] = samples
            if scores:
                m["drop_scores"] = pairings(d, u, v, w)
            path.write_text(json.dumps(m), encoding="utf-8")


def section(docs: Path) -> str:
    text = (docs / "experiments-table1.md").read_text(encoding="utf-8")
    return text.split(TITLE)[1].split("\n## ")[0]


def test_the_estimates_of_one_run_by_hand_and_their_edge_cases():
    got = run_aligner(pairings(12.0, 0.6, 0.0, 0.3), K)
    # by hand: MS_ref = 3 * 0.36 = 1.08, MS_out = 0, MS_int = 0.09
    assert got.var_of_run == pytest.approx((1.08 - 0.09) / 9) and got.var_one == pytest.approx((1.08 + 0.09) / 3)
    assert run_aligner([12.0], 1) is None  # K = 1: nothing to split
    assert run_aligner(None, 3) is None  # metrics.json from before drop_scores
    assert run_aligner([1.0, 2.0, 3.0], 3) is None  # not K² scores


def test_the_estimates_are_unbiased_for_a_nonadditive_drop():
    """Simulated alignments: DROP f(R, H) of a source-reference and a source-output alignment, with an interaction.
    The mean estimates must match the variances measured directly over many realignments."""
    rng = random.Random(7)
    f = lambda r, h: r + 2 * h + 3 * r * h  # noqa: E731
    means, ones, est_run, est_one = [], [], [], []
    for _ in range(20000):
        refs, outs = [rng.random() for _ in range(K)], [rng.random() for _ in range(K)]
        x = [f(r, h) for r in refs for h in outs]
        means.append(statistics.fmean(x))
        ones.append(x[0])  # one alignment of each side
        a = run_aligner(x, K)
        est_run.append(a.var_of_run)
        est_one.append(a.var_one)
    assert statistics.fmean(est_run) == pytest.approx(statistics.variance(means), rel=0.04)
    assert statistics.fmean(est_one) == pytest.approx(statistics.variance(ones), rel=0.04)


def test_three_seeds_with_three_alignments_each(tmp_path):
    out, docs = tmp_path / "exp", tmp_path / "docs"
    grid(out, RUNS)
    got = report(out, docs)
    # softmax: runs 10, 11, 12 -> seed sd 1; V = mean(0.25/3, 0, 0.99/9) = 0.0644...; one = mean(0.25, 0, 0.39)
    v_soft = (var_of_run(0.3, 0.4) + 0 + var_of_run(0.6, 0.0, 0.3)) / 3
    s = got["softmax"]["drop_noise"]
    assert v_soft == pytest.approx(0.193333333 / 3)
    assert s["seeds"] == 3 and s["samples"] == [3] and s["aligner_runs"] == 3 and s["baseline"] == "softmax"
    assert s["mean"] == pytest.approx(11.0) and s["seed_sd"] == pytest.approx(1.0)
    assert s["aligner_sd"] == pytest.approx(math.sqrt((0.25 + 0.0 + 0.39) / 3))
    assert s["aligner_se"] == pytest.approx(math.sqrt(v_soft))
    assert s["model_sd"] == pytest.approx(math.sqrt(1.0 - v_soft))
    assert s["delta"] is None and s["beyond_aligner"] is None and s["beyond_seeds"] is None  # the baseline
    # csparsemax: 9.0, 9.2, 9.4 -> sd 0.2; V = 0.18 / 3 = 0.06 > 0.2² -> model sd clipped to 0
    c = got["csparsemax"]["drop_noise"]
    assert c["seed_sd"] == pytest.approx(0.2) and c["aligner_se"] == pytest.approx(math.sqrt(0.06))
    assert c["aligner_sd"] == pytest.approx(math.sqrt(0.18)) and c["model_sd"] == 0.0
    # delta -1.8; aligner SE sqrt(0.06/3 + V_soft/3) = 0.2037; seed SE sqrt(0.04/3 + 1/3) = 0.5888: both exceeded
    assert c["delta"] == pytest.approx(-1.8)
    assert c["delta_aligner_se"] == pytest.approx(math.sqrt(0.06 / 3 + v_soft / 3))
    assert c["delta_seed_se"] == pytest.approx(math.sqrt(0.04 / 3 + 1.0 / 3))
    assert c["beyond_aligner"] is True and c["beyond_seeds"] is True
    # sparsemax: 10.8, 11.2, 11.6 -> delta +0.2 below 2 * 0.2219 (aligner) and 2 * 0.6218 (seeds)
    p = got["sparsemax"]["drop_noise"]
    assert p["delta"] == pytest.approx(0.2) and p["model_sd"] == pytest.approx(math.sqrt(0.16 - 0.25 / 3))
    assert p["delta_aligner_se"] == pytest.approx(math.sqrt(0.25 / 9 + v_soft / 3))
    assert p["beyond_aligner"] is False and p["beyond_seeds"] is False
    md = section(docs)
    assert "Model sd = sqrt(max(0, s² − V))" in md and "### `test_2016_flickr`" in md
    assert "| softmax | 3 | 3 | 11.00 ± 1.00 | 0.462 | 0.254 | 0.967 | baseline |  |  |" in md
    assert "| csparsemax | 3 | 3 | 9.20 ± 0.20 | 0.424 | 0.245 | 0.000 | -1.80 | yes (2 SE 0.407) | yes (2 SE 1.178) |" in md
    assert "| sparsemax | 3 | 3 | 11.20 ± 0.40 | 0.500 | 0.289 | 0.277 | +0.20 | no (2 SE 0.444) | no (2 SE 1.244) |" in md


def test_one_alignment_per_run_gives_the_one_line_note(tmp_path):
    out, docs = tmp_path / "exp", tmp_path / "docs"
    grid(out, RUNS, samples=1, scores=False)
    got = report(out, docs)
    assert section(docs).strip() == ONE_ALIGNMENT
    c = got["csparsemax"]["drop_noise"]
    assert c["samples"] == [1] and c["aligner_runs"] == 0
    assert c["aligner_sd"] is None and c["aligner_se"] is None and c["model_sd"] is None
    assert c["delta"] == pytest.approx(-1.8) and c["beyond_aligner"] is None and c["beyond_seeds"] is True


def test_one_seed_gives_nulls_for_the_seeds_numbers(tmp_path):
    out, docs = tmp_path / "exp", tmp_path / "docs"
    grid(out, {name: {1: by_seed[1]} for name, by_seed in RUNS.items()})
    got = report(out, docs)
    c = got["csparsemax"]["drop_noise"]
    assert c["seeds"] == 1 and c["seed_sd"] is None and c["model_sd"] is None
    assert c["delta_seed_se"] is None and c["beyond_seeds"] is None
    # the aligner alone: V = 0.06 against the baseline's 0.25 / 3, one run each; |−1| > 2 * 0.379
    assert c["delta"] == pytest.approx(-1.0)
    assert c["delta_aligner_se"] == pytest.approx(math.sqrt(0.06 + 0.25 / 3)) and c["beyond_aligner"] is True
    assert "| csparsemax | 1 | 3 | 9.00 | 0.424 | 0.245 | – | -1.00 | yes (2 SE 0.757) | – |" in section(docs)


def test_runs_without_scores_are_left_out_of_the_aligner_columns(tmp_path):
    """metrics.json from before ``drop_scores`` was kept: one softmax run, and every run of sparsemax."""
    out, docs = tmp_path / "exp", tmp_path / "docs"
    grid(out, RUNS)
    for name, seeds in (("softmax", [2]), ("sparsemax", [1, 2, 3])):
        for seed in seeds:
            path = out / "runs" / name / f"seed{seed}" / "metrics.json"
            m = json.loads(path.read_text(encoding="utf-8"))
            del m["drop_scores"]
            path.write_text(json.dumps(m), encoding="utf-8")
    got = report(out, docs)
    s = got["softmax"]["drop_noise"]
    v_soft = (var_of_run(0.3, 0.4) + var_of_run(0.6, 0.0, 0.3)) / 2  # seeds 1 and 3 only
    assert s["aligner_runs"] == 2 and s["aligner_se"] == pytest.approx(math.sqrt(v_soft))
    assert got["csparsemax"]["drop_noise"]["delta_aligner_se"] == pytest.approx(math.sqrt(0.06 / 3 + v_soft / 3))
    p = got["sparsemax"]["drop_noise"]
    assert p["aligner_runs"] == 0 and p["aligner_se"] is None and p["beyond_aligner"] is None
    assert p["beyond_seeds"] is False
    md = section(docs)
    assert "| softmax | 3 (1 without scores) | 3 | 11.00 ± 1.00 |" in md
    assert "| sparsemax | 3 (3 without scores) | 3 | 11.20 ± 0.40 | – | – | – | +0.20 | – | no (2 SE 1.244) |" in md


def test_an_extra_test_set_gets_its_own_table(tmp_path):
    out, docs = tmp_path / "exp", tmp_path / "docs"
    grid(out, RUNS)
    for name, by_seed in RUNS.items():
        for seed, (d, u, v, w) in by_seed.items():
            path = out / "runs" / name / f"seed{seed}" / "metrics.json"
            m = json.loads(path.read_text(encoding="utf-8"))
            m["test_sets"] = {"test2017": {"bleu": 25.0, "rep": 5.0, "drop": d + 1, "meteor": 45.0,
                                           "drop_samples": K, "drop_scores": pairings(d + 1, u, v, w)}}
            path.write_text(json.dumps(m), encoding="utf-8")
    got = report(out, docs)
    c = got["test_sets"]["test_2017_flickr"]["csparsemax"]["drop_noise"]
    assert c["mean"] == pytest.approx(10.2) and c["delta"] == pytest.approx(-1.8)
    assert c["aligner_se"] == pytest.approx(math.sqrt(0.06))
    md = section(docs)
    assert "### `test_2017_flickr`" in md
    assert md.split("### `test_2017_flickr`")[1].count("| csparsemax | 3 | 3 | 10.20 ± 0.20 |") == 1


def test_the_runner_keeps_the_pairing_scores_in_metrics(tmp_path):
    """``metrics.json`` ``drop_scores`` of the main split and each extra one; None for an old ``eval.json``."""
    from tests.experiments.test_run_requests import plan

    spec = next(s for s in plan(tmp_path) if s.train is not None)
    spec.dir.mkdir(parents=True)
    ev = {"sentences": 2, "tok_bleu": {"score": 30.0, "signature": "s"}, "bleu": {"score": 29.0, "signature": "s"},
          "meteor": {"score": 50.0}, "rep": {"score": 4.0}}
    scores = pairings(10.0, 0.3, 0.4)
    (spec.dir / "eval.json").write_text(json.dumps(
        {**ev, "drop": {"score": 10.0, "samples": K, "score_sd": 0.3, "scores": scores}}), encoding="utf-8")
    (spec.dir / "eval.test2017.json").write_text(json.dumps({**ev, "drop": {"score": 11.0}}), encoding="utf-8")
    m = run_metrics.collect_metrics(spec)
    assert (m["drop_samples"], m["drop_sd"], m["drop_scores"]) == (K, 0.3, scores)
    old = m["test_sets"]["test2017"]
    assert (old["drop"], old["drop_samples"], old["drop_sd"], old["drop_scores"]) == (11.0, 1, None, None)
