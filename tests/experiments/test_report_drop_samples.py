"""The report says how many alignments each run's DROP averages (``metrics.json`` ``drop_samples``)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.experiments.test_results_json import SEEDS, fake_experiment, report


def set_drop_samples(out: Path, samples: dict[tuple[str, int], int]) -> None:
    for (system, seed), k in samples.items():
        path = out / "runs" / system / f"seed{seed}" / "metrics.json"
        m = json.loads(path.read_text(encoding="utf-8"))
        m["drop_samples"] = k
        path.write_text(json.dumps(m), encoding="utf-8")


def caption(docs: Path) -> str:
    text = (docs / "experiments-table1.md").read_text(encoding="utf-8")
    return next(line for line in text.splitlines() if line.startswith("BLEU: tokenized"))


def runs() -> list[tuple[str, int]]:
    return [(system, seed) for system, by_seed in SEEDS.items() for seed in by_seed]


def test_runs_from_before_the_option_say_one_alignment(tmp_path):
    out, docs = tmp_path / "exp", tmp_path / "docs"
    fake_experiment(out, SEEDS)  # metrics.json without drop_samples, as the grid's older runs
    report(out, docs)
    assert "one alignment per run; the aligner samples at random" in caption(docs)


def test_every_run_with_three_samples(tmp_path):
    out, docs = tmp_path / "exp", tmp_path / "docs"
    fake_experiment(out, SEEDS)
    set_drop_samples(out, {r: 3 for r in runs()})
    report(out, docs)
    assert "each run's DROP is the mean over 3 alignments of each side" in caption(docs)


def test_mixed_runs_give_the_range(tmp_path):
    out, docs = tmp_path / "exp", tmp_path / "docs"
    fake_experiment(out, SEEDS)
    first, *rest = runs()
    set_drop_samples(out, {first: 1, **{r: 4 for r in rest}})
    report(out, docs)
    assert "each run's DROP is the mean over 1 to 4 alignments of each side" in caption(docs)
