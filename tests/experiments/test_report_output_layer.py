"""The report's "Output layer" table (issue 29, item 5): output support, exact searches and forced ``</s>`` per
system, from each run's ``test.search.json`` (``translate --search-stats``) through ``metrics.json`` ``search``;
"–" for runs translated before the file existed; shown only when a system has a sparse output."""

from __future__ import annotations

import json
import math
from pathlib import Path

from scanmt.experiments import layout, run_metrics
from tests.experiments.test_results_json import SEEDS, close, fake_experiment, report

# per system, per seed: (bleu, rep, drop, meteor)
SPARSE_SEEDS = {
    "softmax": {1: (30.0, 4.0, 10.0, 50.0), 2: (32.0, 6.0, 12.0, 52.0)},
    "softmax-out15": {1: (31.0, 4.0, 10.0, 50.0), 2: (33.0, 6.0, 12.0, 52.0)},
    "entmax15-out15": {1: (29.0, 3.0, 9.0, 49.0), 2: (31.0, 5.0, 11.0, 51.0)},
}
OUTPUTS = {"softmax": "softmax", "softmax-out15": "entmax15", "entmax15-out15": "entmax15"}
# the search files of entmax15-out15 (2 test sentences): support 3 and 5, exact 1/2 and 2/2, forced 0 and 1
SEARCHES = {1: {"output": "entmax15", "beam": 5, "sentences": 2, "mean_support": 3.0, "exact": 1, "forced": 0,
                "exact_share": 0.5},
            2: {"output": "entmax15", "beam": 5, "sentences": 2, "mean_support": 5.0, "exact": 2, "forced": 1,
                "exact_share": 1.0}}


def edit_json(path: Path, **changes) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc.update(changes)
    path.write_text(json.dumps(doc), encoding="utf-8")


def record_outputs(out: Path, outputs: dict[str, str]) -> None:
    """The grid record's ``outputs``, as ``experiment run`` writes it."""
    edit_json(out / "grids" / "table1.json", outputs=outputs)


def write_searches(out: Path, system: str, searches: dict[int, dict]) -> None:
    """Each seed's ``test.search.json``, and its ``metrics.json`` ``search`` as the runner collects it."""
    for seed, doc in searches.items():
        run = out / "runs" / system / f"seed{seed}"
        (run / layout.search_json_name("test")).write_text(json.dumps(doc), encoding="utf-8")
        edit_json(run / "metrics.json", search=run_metrics.search_metrics(run / layout.search_json_name("test")))


def output_layer(docs: Path) -> str:
    text = (docs / "experiments-table1.md").read_text(encoding="utf-8")
    assert "## Output layer" in text
    return text.split("## Output layer")[1].split("\n## ")[0]


def test_the_table_shows_the_searches_of_one_system_and_dashes_for_runs_without_them(tmp_path):
    out, docs = tmp_path / "exp", tmp_path / "docs"
    fake_experiment(out, SPARSE_SEEDS)
    record_outputs(out, OUTPUTS)
    write_searches(out, "entmax15-out15", SEARCHES)  # softmax and softmax-out15: runs from before the files
    got = report(out, docs)
    table = output_layer(docs)
    # support 3, 5: mean 4, std sqrt(2); exact 50 %, 100 %: mean 75, std sqrt(1250) = 35.36; forced 0, 1
    assert "| entmax15-out15 | `entmax15` | 4.00 ± 1.41 | 75.00 ± 35.36 | 0.50 ± 0.71 | 2 |" in table
    assert "| softmax-out15 | `entmax15` | – | – | – | 0 (+2 without search statistics) |" in table
    assert "| softmax | `softmax` | – | – | – | 0 (+2 without search statistics) |" in table
    # the results JSON: a search entry for the system that recorded its searches, none for the others
    search = got["entmax15-out15"]["search"]
    assert search["seeds"] == 2
    assert close(search["output_support"], 4.0, math.sqrt(2.0))
    assert close(search["exact_share"], 0.75, math.sqrt(0.125))
    assert close(search["forced"], 0.5, math.sqrt(0.5))
    assert "search" not in got["softmax-out15"] and "search" not in got["softmax"]
    assert got["test_sets"]["test_2016_flickr"]["entmax15-out15"]["search"] == search


def test_a_seed_without_the_file_is_counted_apart(tmp_path):
    out, docs = tmp_path / "exp", tmp_path / "docs"
    fake_experiment(out, SPARSE_SEEDS)
    record_outputs(out, OUTPUTS)
    write_searches(out, "entmax15-out15", {2: SEARCHES[2]})
    got = report(out, docs)
    assert "| entmax15-out15 | `entmax15` | 5.00 | 100.00 | 1.00 | 1 (+1 without search statistics) |" \
        in output_layer(docs)
    assert got["entmax15-out15"]["search"]["seeds"] == 1 and got["entmax15-out15"]["seeds"] == 2
    assert got["entmax15-out15"]["search"]["output_support"] == {"mean": 5.0, "std": None}


def test_a_softmax_grid_gets_no_table(tmp_path):
    """Table 1's report does not change: no output layer section, even for runs that recorded their searches."""
    out, docs = tmp_path / "exp", tmp_path / "docs"
    fake_experiment(out, SEEDS)
    record_outputs(out, {"softmax": "softmax", "csparsemax": "softmax"})
    write_searches(out, "softmax", {1: {**SEARCHES[1], "output": "softmax", "mean_support": 8000.0}})
    report(out, docs)
    assert "Output layer" not in (docs / "experiments-table1.md").read_text(encoding="utf-8")


def test_without_outputs_in_the_grid_record_the_runs_say_it(tmp_path):
    """A grid record written before ``outputs`` existed: the runs' ``metrics.json`` ``output`` decides."""
    out, docs = tmp_path / "exp", tmp_path / "docs"
    fake_experiment(out, SPARSE_SEEDS)
    for system, by_seed in SPARSE_SEEDS.items():
        for seed in by_seed:
            edit_json(out / "runs" / system / f"seed{seed}" / "metrics.json", output=OUTPUTS[system])
    write_searches(out, "entmax15-out15", SEARCHES)
    report(out, docs)
    assert "| softmax-out15 | `entmax15` | – |" in output_layer(docs)


def test_the_runner_collects_each_splits_search_file_into_metrics(tmp_path):
    """``metrics.json`` of a planned run: ``output``, ``search`` of the main split, ``test_sets`` ``search`` of an
    extra one; a split translated before the files existed gets None."""
    from tests.experiments.test_run_requests import plan

    spec = next(s for s in plan(tmp_path) if s.train is not None)
    run = spec.dir
    run.mkdir(parents=True)
    ev = {"sentences": 2, "tok_bleu": {"score": 30.0, "signature": "s"}, "bleu": {"score": 29.0, "signature": "s"},
          "meteor": {"score": 50.0}, "rep": {"score": 4.0}, "drop": {"score": 10.0}}
    for name in ("eval.json", "eval.test2017.json"):
        (run / name).write_text(json.dumps(ev), encoding="utf-8")
    Path(spec.translate.search_stats).write_text(json.dumps(SEARCHES[1]), encoding="utf-8")
    m = run_metrics.collect_metrics(spec)
    assert m["output"] == "softmax" and m["search"] == SEARCHES[1]
    assert m["test_sets"]["test2017"]["search"] is None  # no test2017.search.json
    Path(spec.extra_splits["test2017"]["translate"].search_stats).write_text(json.dumps(SEARCHES[2]), encoding="utf-8")
    assert run_metrics.collect_metrics(spec)["test_sets"]["test2017"]["search"] == SEARCHES[2]


def test_missing_or_unreadable_search_files_give_none_and_redecode_moves_them(tmp_path):
    assert run_metrics.search_metrics(tmp_path / "test.search.json") is None
    (tmp_path / "test.search.json").write_text('{"mean_support": 3', encoding="utf-8")  # cut short
    assert run_metrics.search_metrics(tmp_path / "test.search.json") is None
    assert any(Path("test2017.search.json").match(pattern) for pattern in layout.DECODE_OUTPUTS)
