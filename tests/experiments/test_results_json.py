"""``scanmt experiment report`` writes DOCS/experiments-{grid}.json: per system mean/std of BLEU, REP, DROP, METEOR.

A fake experiment directory (grid record, prepared test text, finished runs with ``metrics.json``) is
built by hand, so the expected means and standard deviations are computed here independently.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from scanmt.cli.main import main
from scanmt.errors import ConfigError
from scanmt.experiments.report.results_json import mean_std_entry, results_table, split_display_name

# per system, per seed: (bleu, rep, drop, meteor)
SEEDS = {
    "softmax": {1: (30.0, 4.0, 10.0, 50.0), 2: (32.0, 6.0, 12.0, 52.0), 3: (34.0, 8.0, 14.0, 57.0)},
    "csparsemax": {1: (31.5, 3.0, 9.0, 51.0)},
}
META = {
    "src_lang": "de", "tgt_lang": "en",
    "sources": {"test": {"src": "/data/multi30k/test_2016_flickr.de.gz", "tgt": "/data/multi30k/test_2016_flickr.en.gz"},
                "test2017": {"src": "/data/multi30k/test_2017_flickr.de.gz", "tgt": "/x/test_2017_flickr.en.gz"}},
    "splits": ["train", "valid", "test", "test2017"],
}


def metrics(system: str, seed: int, values: tuple[float, float, float, float], **extra) -> dict:
    bleu, rep, drop, meteor = values
    return {"system": system, "label": system, "seed": seed, "split": "test", "bleu": bleu, "rep": rep,
            "drop": drop, "meteor": meteor, "sacrebleu": bleu - 1.0, "commit": "abc1234", **extra}


def fake_experiment(out: Path, seeds: dict, *, test2017: dict | None = None, unfinished: str | None = None,
                    grid: str = "table1", split: str = "test") -> None:
    """OUT/grids/GRID.json, OUT/shared/data (meta.json, two test sentences), one finished run per system x seed.

    Called again with another ``grid`` (and other systems), it adds a second grid to the same folder."""
    rec = {"name": grid, "systems": [{"name": n, "label": n} for n in seeds], "seeds": [1, 2, 3],
           "split": split, "src_lang": "de", "tgt_lang": "en", "data": "multi30k", "preset": "cpu-small.yaml",
           "command": "scanmt experiment run ...", "transforms": {"softmax": "softmax", "csparsemax": "csparsemax"}}
    (out / "grids").mkdir(parents=True, exist_ok=True)
    (out / "grids" / f"{grid}.json").write_text(json.dumps(rec), encoding="utf-8")
    data = out / "shared" / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "meta.json").write_text(json.dumps(META), encoding="utf-8")
    (data / "test.raw.de").write_text("ein Hund .\nzwei Katzen .\n", encoding="utf-8")
    (data / "test.raw.en").write_text("a dog .\ntwo cats .\n", encoding="utf-8")
    for system, by_seed in seeds.items():
        for seed, values in by_seed.items():
            run = out / "runs" / system / f"seed{seed}"
            run.mkdir(parents=True)
            extra = {}
            if test2017 and seed in test2017.get(system, {}):
                extra["test_sets"] = {"test2017": dict(zip(("bleu", "rep", "drop", "meteor"), test2017[system][seed]))}
            (run / "metrics.json").write_text(json.dumps(metrics(system, seed, values, **extra)), encoding="utf-8")
            (run / "DONE").write_text("done\n", encoding="utf-8")
    if unfinished:
        (out / "runs" / unfinished / "seed9").mkdir(parents=True)  # no DONE: not counted


def report(out: Path, docs: Path) -> dict:
    assert main(["experiment", "report", str(out), "--out", str(docs), "--figures", "0", "--examples", "0",
                 "--bootstrap-samples", "10"]) == 0
    return json.loads((docs / "experiments-table1.json").read_text(encoding="utf-8"))


def close(entry: dict, mean: float, std: float) -> bool:
    return math.isclose(entry["mean"], mean, abs_tol=1e-9) and math.isclose(entry["std"], std, abs_tol=1e-9)


def test_report_writes_the_json_with_hand_computed_means_and_stds(tmp_path):
    out, docs = tmp_path / "exp", tmp_path / "docs"
    fake_experiment(out, SEEDS, unfinished="softmax")
    got = report(out, docs)
    assert list(got) == ["softmax", "csparsemax", "test_set", "test_sets"]
    s = got["softmax"]
    assert s["seeds"] == 3
    # bleu 30, 32, 34: mean 32, sample variance ((-2)^2 + 0 + 2^2) / (3 - 1) = 4 -> std 2
    assert close(s["bleu"], 32.0, 2.0)
    assert close(s["rep"], 6.0, 2.0)
    assert close(s["drop"], 12.0, 2.0)
    # meteor 50, 52, 57: mean 53, deviations -3, -1, 4 -> (9 + 1 + 16) / 2 = 13 -> std sqrt(13)
    assert close(s["meteor"], 53.0, math.sqrt(13.0))
    # one seed: std 0.0 (not null, not the population formula's 0 by accident: n = 1 is special-cased)
    c = dict(got["csparsemax"])
    noise = c.pop("drop_noise")  # its numbers: tests/experiments/test_report_drop_noise.py
    assert c == {"bleu": {"mean": 31.5, "std": None}, "rep": {"mean": 3.0, "std": None},
                 "drop": {"mean": 9.0, "std": None}, "meteor": {"mean": 51.0, "std": None}, "seeds": 1}
    assert noise["baseline"] == "softmax" and noise["delta"] == -3.0 and noise["seed_sd"] is None
    c = got["csparsemax"]
    assert got["test_set"] == "test_2016_flickr"
    assert got["test_sets"] == {"test_2016_flickr": {"softmax": s, "csparsemax": c}}
    # the Markdown report of the same call agrees and links the JSON
    md = (docs / "experiments-table1.md").read_text(encoding="utf-8")
    assert "| softmax | **32.00 ± 2.00** | **53.00 ± 3.61** | 6.00 ± 2.00 | 12.00 ± 2.00 |" in md
    assert "(experiments-table1.json)" in md


def test_a_second_test_set_gets_its_own_entry(tmp_path):
    out, docs = tmp_path / "exp", tmp_path / "docs"
    t17 = {"softmax": {1: (25.0, 5.0, 11.0, 45.0), 2: (27.0, 7.0, 11.0, 47.0)}, "csparsemax": {}}
    fake_experiment(out, SEEDS, test2017=t17, unfinished="softmax")
    got = report(out, docs)
    assert close(got["softmax"]["bleu"], 32.0, 2.0)  # top level: still the main test set
    sets = got["test_sets"]
    assert list(sets) == ["test_2016_flickr", "test_2017_flickr"]
    s17 = sets["test_2017_flickr"]["softmax"]
    assert s17["seeds"] == 2  # seed 3 has no test2017 numbers
    assert close(s17["bleu"], 26.0, math.sqrt(2.0)) and close(s17["drop"], 11.0, 0.0)
    assert sets["test_2017_flickr"]["csparsemax"]["seeds"] == 0
    assert sets["test_2017_flickr"]["csparsemax"]["bleu"] == {"mean": None, "std": None}
    # the Markdown table of test2017 says why a seed is not counted
    t17 = (docs / "experiments-table1.md").read_text(encoding="utf-8").split("## Results on `test_2017_flickr`")[1]
    assert "| 2 (+1 finished without this test set, +1 unfinished) |" in t17
    assert "| 0 (+1 finished without this test set, +2 unfinished) |" in t17  # csparsemax: seeds 2, 3 not started


def test_reserved_system_names_and_split_names():
    with pytest.raises(ConfigError, match="'test_sets' is reserved"):
        results_table({"test_sets": []}, "test", None)
    assert split_display_name(META, "test2017") == "test_2017_flickr"
    assert split_display_name(META, "valid") == "valid"  # not in sources
    assert split_display_name(None, "test") == "test"
    assert split_display_name({"src_lang": "de", "sources": {"test": {"src": "news.txt"}}}, "test") == "test"
    assert mean_std_entry([]) == {"mean": None, "std": None}
    assert mean_std_entry([1.0, 2.0]) == {"mean": 1.5, "std": pytest.approx(math.sqrt(0.5))}


def test_the_report_names_runs_with_empty_translations(tmp_path):
    """A run that translated a non-empty source line as nothing is named in the report, with the fix."""
    out, docs = tmp_path / "exp", tmp_path / "docs"
    fake_experiment(out, SEEDS)
    (out / "runs" / "softmax" / "seed1" / "test.hyp.en").write_text("a dog .\ntwo cats .\n", encoding="utf-8")
    (out / "runs" / "csparsemax" / "seed1" / "test.hyp.en").write_text("a dog .\n\n", encoding="utf-8")
    report(out, docs)
    md = (docs / "experiments-table1.md").read_text(encoding="utf-8")
    assert "> **Empty translations of non-empty sources** (csparsemax seed 1: 1)." in md
    assert "--redecode" in md and "softmax seed 1" not in md



def test_restored_seeds_are_named_in_every_test_set():
    """A seed restored from an archive of runs only carries the shared work it trained on, in each test set's entry
    of its system (the top level too); the other systems have no ``restored`` key."""
    runs = {"softmax": [metrics("softmax", 1, SEEDS["softmax"][1], test_sets={"test2017": {"bleu": 1.0}})],
            "csparsemax": [metrics("csparsemax", 1, SEEDS["csparsemax"][1])]}
    origin = {"1": {"alignments": "ab" * 32, "predictor": None, "same_as_folder": False}}
    got = results_table(runs, "test", META, restored={"softmax": origin})
    assert got["softmax"]["restored"] == origin and "restored" not in got["csparsemax"]
    assert got["test_sets"]["test_2017_flickr"]["softmax"]["restored"] == origin
    assert "restored" not in results_table(runs, "test", META)["softmax"]
