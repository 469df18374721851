"""The report's significance column: per seed, Δ BLEU against the baseline run of the same seed, and p.

The fake experiment of ``test_results_json`` gets hypothesis files here; the expected differences are
computed with sacrebleu directly (tokenized, lowercased corpus BLEU), independently of the report.
"""

from __future__ import annotations

from pathlib import Path

import sacrebleu

from scanmt.experiments.report.collection import Texts, collect, grid_records
from scanmt.experiments.report.significance import SeedTest, p_cell as _p_cell, significance
from scanmt.metrics.paired import MIN_INPUTS, NO_TEST
from tests.experiments.test_results_json import SEEDS, fake_experiment, report

REFS = [
    "a dog runs across the green grass .",
    "two men are sitting on a bench in the park .",
    "a woman in a red dress is walking down the street .",
    "children play football on a sandy beach .",
    "a man is riding a bicycle past a small shop .",
    "three girls are dancing on a wooden stage .",
    "an old man reads a newspaper at the table .",
    "a black cat sleeps on a blue blanket .",
    "a young boy jumps into a swimming pool .",
    "two women are talking outside a cafe .",
]  # (10: a paired bootstrap over fewer than MIN_INPUTS sentences gives no p-value)
# already Moses-tokenized and lowercase, so the report's tokenization leaves them unchanged
WORSE = [r.replace("a ", "the ", 1).replace(" .", " now .") for r in REFS]
WORST = [" ".join(r.split()[:4]) + " ." for r in REFS]


def tok_bleu(hyps: list[str]) -> float:
    return sacrebleu.corpus_bleu(hyps, [REFS], tokenize="none", lowercase=True).score


def write_hyps(out: Path, system: str, seed: int, lines: list[str]) -> None:
    (out / "runs" / system / f"seed{seed}" / "test.hyp.en").write_text("\n".join(lines) + "\n", encoding="utf-8")


def experiment(tmp_path: Path, refs: list[str] = REFS) -> Path:
    """softmax seeds 1-3, csparsemax seeds 1-3 (seed 3 without a softmax output to pair with), on the first
    ``len(refs)`` test sentences."""
    k = len(refs)
    out = tmp_path / "exp"
    seeds = {"softmax": SEEDS["softmax"], "csparsemax": {1: (31.5, 3.0, 9.0, 51.0), 2: (31.0, 3.0, 9.0, 51.0),
                                                        3: (30.0, 3.0, 9.0, 51.0)}}
    fake_experiment(out, seeds)
    data = out / "shared" / "data"
    (data / "test.raw.en").write_text("\n".join(refs) + "\n", encoding="utf-8")
    (data / "test.raw.de").write_text("\n".join(f"satz {i} ." for i in range(k)) + "\n", encoding="utf-8")
    write_hyps(out, "softmax", 1, WORSE[:k])
    write_hyps(out, "softmax", 2, WORSE[:k])  # softmax seed 3 has no output file: csparsemax seed 3 is left out
    write_hyps(out, "csparsemax", 1, refs)  # better than its baseline
    write_hyps(out, "csparsemax", 2, WORSE[:k])  # identical to its baseline
    write_hyps(out, "csparsemax", 3, WORST[:k])
    return out


def test_each_seed_is_paired_with_the_baseline_run_of_the_same_seed(tmp_path):
    out = experiment(tmp_path)
    rec = grid_records(out)[0]
    systems = collect(out, rec)
    texts = Texts(["x"] * len(REFS), REFS, REFS, "en", [1] * len(REFS))
    got = significance(out, rec, texts, systems, "softmax", samples=200)
    assert list(got) == ["csparsemax"]
    s1, s2 = got["csparsemax"]  # seed 3: no softmax seed-3 output, left out
    assert (s1.seed, s2.seed) == (1, 2)
    assert abs(s1.delta - (tok_bleu(REFS) - tok_bleu(WORSE))) < 1e-9 and s1.delta > 10
    assert s1.p < 0.05  # every sentence is better: no resample favours the baseline
    assert s2.delta == 0.0 and s2.p == 1.0  # identical outputs are never significant


def test_the_cell_lists_every_seed_and_marks_significance():
    tests = {"c": [SeedTest(1, 0.99, 0.018), SeedTest(2, -0.05, 0.37)]}
    baselines = {"b": "b", "c": "b"}
    assert _p_cell("c", baselines, tests) == "+0.99 (0.018 †) / -0.05 (0.370)"
    assert _p_cell("b", baselines, tests) == "baseline"
    assert _p_cell("c", baselines, {"c": []}) == "n/a"  # no seed could be paired
    assert _p_cell("c", baselines, {}) == "n/a"  # the baseline has no run to pair with
    # fewer than MIN_INPUTS test sentences: no p-value (issue 52, item 9)
    assert _p_cell("c", baselines, {"c": [SeedTest(1, 0.99, None)]}) == f"+0.99 ({NO_TEST})"


def test_a_test_set_of_fewer_than_min_inputs_sentences_gives_no_p_value(tmp_path):
    out = experiment(tmp_path, REFS[: MIN_INPUTS - 1])
    rec = grid_records(out)[0]
    texts = Texts(["x"] * (MIN_INPUTS - 1), REFS[: MIN_INPUTS - 1], REFS[: MIN_INPUTS - 1], "en",
                  [1] * (MIN_INPUTS - 1))
    got = significance(out, rec, texts, collect(out, rec), "softmax", samples=200)
    assert [(t.seed, t.p) for t in got["csparsemax"]] == [(1, None), (2, None)]  # seed 2's equal scores too
    assert got["csparsemax"][0].delta > 10


def test_the_report_shows_the_per_seed_column(tmp_path):
    out, docs = experiment(tmp_path), tmp_path / "docs"
    report(out, docs)
    md = (docs / "experiments-table1.md").read_text(encoding="utf-8")
    assert "| sacreBLEU | Δ BLEU (p) vs softmax, by seed | seeds |" in md
    row = next(ln for ln in md.splitlines() if ln.startswith("| csparsemax |"))
    delta = tok_bleu(REFS) - tok_bleu(WORSE)
    assert f"| +{delta:.2f} (" in row and " / +0.00 (1.000) |" in row, row
