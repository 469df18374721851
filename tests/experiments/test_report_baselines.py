"""Per-system baselines (``systems[i].baseline``): an ablation arm is compared with the softmax of its own recipe.

The grid file's key, the mapping :func:`scanmt.experiments.baselines.resolve_baselines` builds from a grid record,
and the report's three paired comparisons under it: Δ BLEU with sacrebleu's bootstrap (the expected differences
computed with sacrebleu directly), Δ DROP against the noise (by hand from the fake runs' DROP), and the stress
test's Δ REP (by hand from the per-input counts).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scanmt.errors import ConfigError
from scanmt.experiments.baselines import as_baselines, resolve_baselines, single_baseline
from scanmt.experiments.grid import GridError, load_grid
from scanmt.cli.main import main
from scanmt.experiments.report.collection import SystemResults, Texts, collect, grid_records
from scanmt.experiments.report.significance import significance
from scanmt.experiments.report.stress import paired_section
from tests.experiments.test_report_significance import REFS, WORSE, WORST, tok_bleu, write_hyps
from tests.experiments.test_results_json import fake_experiment, report

GRID = """
name: abl
systems:
  - name: softmax
    set: [model.attention.transform=softmax]
  - name: csparsemax
    set: [model.attention.transform=csparsemax]
  - name: softmax-x
    set: [model.attention.transform=softmax, train.label_smoothing=0.0]
  - name: csparsemax-x
    set: [model.attention.transform=csparsemax, train.label_smoothing=0.0]
    baseline: softmax-x
"""


def write_grid(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "g.yaml"
    p.write_text(text, encoding="utf-8")
    return p


def test_the_grid_file_carries_a_systems_own_baseline(tmp_path):
    grid = load_grid(write_grid(tmp_path, GRID))
    assert [s.baseline for s in grid.systems] == [None, None, None, "softmax-x"]
    assert grid.as_dict()["systems"][3]["baseline"] == "softmax-x"
    rec = {"name": "abl", **grid.as_dict()}
    assert resolve_baselines(rec, grid.names) == {"softmax": "softmax", "csparsemax": "softmax",
                                                  "softmax-x": "softmax", "csparsemax-x": "softmax-x"}
    # --baseline compares every system with one, whatever the grid says
    assert set(resolve_baselines(rec, grid.names, "softmax-x").values()) == {"softmax-x"}
    with pytest.raises(ConfigError, match="--baseline 'nope' is not a system of grid abl"):
        resolve_baselines(rec, grid.names, "nope")


@pytest.mark.parametrize("baseline, message", [
    ("csparsemax-x", "baseline names the system itself"),
    ("softmax-y", "baseline 'softmax-y' is not a system of this grid"),
    ("a b", "use letters, digits"),
])
def test_a_bad_system_baseline_is_refused_with_the_system_named(tmp_path, baseline, message):
    with pytest.raises(GridError, match=f"system 'csparsemax-x'.*{message}"):
        load_grid(write_grid(tmp_path, GRID.replace("baseline: softmax-x", f"baseline: {baseline}")))


def test_the_mapping_helpers():
    names = ["a", "b", "c"]
    assert as_baselines(names, "a") == {"a": "a", "b": "a", "c": "a"}
    assert as_baselines(names, {"a": "a", "c": "b", "z": "a"}) == {"a": "a", "c": "b"}
    assert as_baselines(names, None) == {}
    assert single_baseline({"a": "a", "b": "a"}) == "a"
    assert single_baseline({"a": "a", "b": "a", "c": "b"}) is None


# per system, per seed: (bleu, rep, drop, meteor); DROP differs so that each Δ DROP names its baseline
SEEDS = {
    "softmax": {1: (30.0, 4.0, 10.0, 50.0), 2: (32.0, 6.0, 12.0, 52.0)},
    "csparsemax": {1: (31.0, 3.0, 9.0, 51.0), 2: (31.0, 3.0, 9.5, 51.0)},
    "softmax-x": {1: (29.0, 5.0, 20.0, 49.0), 2: (29.0, 5.0, 22.0, 49.0)},
    "csparsemax-x": {1: (30.0, 4.0, 15.0, 50.0), 2: (30.0, 4.0, 16.0, 50.0)},
}


def ablation(tmp_path: Path) -> Path:
    """The fake experiment of ``test_results_json`` with the grid above: csparsemax-x against softmax-x."""
    out = tmp_path / "exp"
    fake_experiment(out, SEEDS)
    rec_path = out / "grids" / "table1.json"
    rec = json.loads(rec_path.read_text(encoding="utf-8"))
    rec["systems"][3]["baseline"] = "softmax-x"
    rec_path.write_text(json.dumps(rec), encoding="utf-8")
    data = out / "shared" / "data"
    (data / "test.raw.en").write_text("\n".join(REFS) + "\n", encoding="utf-8")
    (data / "test.raw.de").write_text("\n".join(f"satz {i} ." for i in range(len(REFS))) + "\n", encoding="utf-8")
    for seed in (1, 2):
        write_hyps(out, "softmax", seed, WORSE)
        write_hyps(out, "csparsemax", seed, REFS)
        write_hyps(out, "softmax-x", seed, WORST)
        write_hyps(out, "csparsemax-x", seed, WORSE)
    return out


def test_each_system_is_paired_with_its_own_baseline(tmp_path):
    out = ablation(tmp_path)
    rec = grid_records(out)[0]
    systems = collect(out, rec)
    baselines = resolve_baselines(rec, [s.name for s in systems])
    got = significance(out, rec, Texts(["x"] * len(REFS), REFS, REFS, "en", [1] * len(REFS)), systems, baselines, samples=100)
    assert list(got) == ["csparsemax", "softmax-x", "csparsemax-x"]
    against_own = tok_bleu(WORSE) - tok_bleu(WORST)
    assert [round(t.delta, 9) for t in got["csparsemax-x"]] == [round(against_own, 9)] * 2 and against_own > 5
    assert [round(t.delta, 9) for t in got["softmax-x"]] == [round(tok_bleu(WORST) - tok_bleu(WORSE), 9)] * 2
    assert all(t.delta > 10 for t in got["csparsemax"])  # REFS against the grid's softmax


def test_the_report_names_each_rows_baseline_and_compares_drop_with_it(tmp_path):
    out, docs = ablation(tmp_path), tmp_path / "docs"
    got = report(out, docs)
    md = (docs / "experiments-table1.md").read_text(encoding="utf-8")
    assert "| Δ BLEU (p) vs its baseline, by seed | compared with |" in md
    row = next(line for line in md.splitlines() if line.startswith("| csparsemax-x |"))
    assert "| softmax-x |" in row  # the compared-with cell
    assert next(line for line in md.splitlines() if line.startswith("| softmax |")).count("| baseline |  |") == 1
    # DROP: csparsemax-x (15, 16) against softmax-x (20, 22), not against softmax (10, 12)
    noise = got["csparsemax-x"]["drop_noise"]
    assert noise["baseline"] == "softmax-x" and noise["delta"] == pytest.approx(15.5 - 21.0)
    assert got["csparsemax"]["drop_noise"]["baseline"] == "softmax"
    assert got["csparsemax"]["drop_noise"]["delta"] == pytest.approx(9.25 - 11.0)
    assert got["softmax"]["drop_noise"]["delta"] is None


def test_one_grid_baseline_keeps_the_single_column(tmp_path):
    out, docs = ablation(tmp_path), tmp_path / "docs"
    rec_path = out / "grids" / "table1.json"
    rec = json.loads(rec_path.read_text(encoding="utf-8"))
    rec["systems"][3]["baseline"] = None
    rec_path.write_text(json.dumps(rec), encoding="utf-8")
    report(out, docs)
    md = (docs / "experiments-table1.md").read_text(encoding="utf-8")
    assert "| Δ BLEU (p) vs softmax, by seed | seeds |" in md and "compared with" not in md


def per_input(sigma: list[int]) -> dict:
    n = len(sigma)
    return {"rep_sigma": sigma, "ref_words": [10] * n, "dropped": [0] * n, "source_words": [10] * n}


def stressed(name: str, sigma: list[int]) -> SystemResults:
    runs = [{"seed": seed, "stress": {"per_input": {"2": per_input(sigma)}}} for seed in (1, 2)]
    return SystemResults(name, name.upper(), runs)


def test_the_stress_tests_pair_each_system_with_its_baseline():
    # (12 inputs: a paired bootstrap over fewer than 10 gives no p-value)
    systems = [stressed("softmax", [0] * 12), stressed("softmax-x", [2] * 12), stressed("calm-x", [0] * 12)]
    text = "\n".join(paired_section(systems, {"softmax": "softmax", "softmax-x": "softmax", "calm-x": "softmax-x"}))
    assert "### Stress test: REP and DROP against each system's baseline, paired" in text
    calm = next(line for line in text.splitlines() if line.startswith("| CALM-X | 2 |"))
    # REP = 100 * sum(sigma) / sum(ref words): 0 against 100 * 24 / 120 = 20 for SOFTMAX-X
    assert "1: -20.00 (" in calm and calm.endswith("| SOFTMAX-X |")
    soft_x = next(line for line in text.splitlines() if line.startswith("| SOFTMAX-X | 2 |"))
    assert "1: +20.00 (1.000) / 2: +20.00 (1.000); sign-flip 1.000 |" in soft_x and soft_x.endswith("| SOFTMAX |")
    one = "\n".join(paired_section(systems, "softmax"))
    assert "against SOFTMAX, paired" in one and "compared with" not in one


def test_the_stress_table_shows_rep_and_drop_at_equal_length_when_outputs_were_counted():
    """softmax: a short output (5 of 10 words, σ 0, 4 of 10 source words dropped) and a long one (10 of 10, σ 2,
    none dropped); long: both outputs long, σ 3 each, 1 word dropped of the first input's 10. softmax's REP 10,
    long's 30, softmax's at long's lengths (its long group only) 20: half of Δ REP. softmax's DROP 20, long's 5,
    softmax's at long's lengths 0: 133 % of Δ DROP (writing as long as long would drop even less).
    The inputs five times over (a paired bootstrap over fewer than 10 gives no p-value), or once (``n``)."""
    def with_lengths(name, sigma, hyp_words, dropped, n=5):
        counts = {"rep_sigma": sigma * n, "ref_words": [10, 10] * n, "hyp_words": hyp_words * n,
                  "dropped": dropped * n, "source_words": [10, 10] * n}
        return SystemResults(name, name, [{"seed": 1, "stress": {"per_input": {"2": counts}}}])

    text = paired_section([with_lengths("softmax", [0, 2], [5, 10], [4, 0]), with_lengths("long", [3, 3], [10, 10], [1, 0])],
                          "softmax")
    assert text[4].endswith("| REP of the baseline at the system's lengths (share of Δ REP) | DROP of the baseline at "
                            "the system's lengths (share of Δ DROP) |")
    row = next(line for line in text if line.startswith("| long | 2 |"))
    assert row.startswith("| long | 2 | 1: +20.00 (") and "| 1: -15.00 (" in row
    assert row.endswith("| 1 | 20.00 (50 %) | 0.00 (133 %) |")
    # Δ REP +5 from one input of two: no bootstrap over 2 inputs, so its share (here 200 %) would be a ratio of noise
    text = paired_section([with_lengths("softmax", [0, 2], [5, 10], [4, 0], n=1),
                           with_lengths("near", [1, 2], [10, 10], [4, 0], n=1)], "softmax")
    row = next(line for line in text if line.startswith("| near | 2 |"))
    assert row.startswith("| near | 2 | 1: +5.00 (n/a: fewer than 10 inputs) |")
    assert row.endswith("| 1 | 20.00 (–) | 0.00 |")  # Δ DROP 0: no share


def test_the_grid_file_carries_a_reference_arm(tmp_path):
    grid = load_grid(write_grid(tmp_path, GRID + "reference_arm: csparsemax\n"))
    assert grid.reference_arm == "csparsemax" and grid.as_dict()["reference_arm"] == "csparsemax"
    assert load_grid(write_grid(tmp_path, GRID)).reference_arm is None


@pytest.mark.parametrize("ref, grid_text, message", [
    ("nope", GRID, "reference_arm 'nope' is not a system of this grid"),
    ("softmax", GRID, "reference_arm 'softmax' is the grid's baseline"),
    ("csparsemax", GRID.replace("    baseline: softmax-x\n", ""), "no other system names a baseline of its own"),
])
def test_a_bad_reference_arm_is_refused(tmp_path, ref, grid_text, message):
    with pytest.raises(GridError, match=message):
        load_grid(write_grid(tmp_path, grid_text + f"reference_arm: {ref}\n"))


def test_the_shipped_recipe_ablation_sets_each_arm_against_cpu_smalls_csparsemax():
    grid = load_grid(Path(__file__).resolve().parents[2] / "experiments" / "recipe-ablation.yaml")
    assert grid.reference_arm == "csparsemax" and grid.baseline_name == "softmax"
    arms = {s.name: s.baseline for s in grid.systems if s.baseline}
    assert len(arms) == 5 and all(a.startswith("csparsemax-") and b == "softmax-" + a[len("csparsemax-"):]
                                  for a, b in arms.items())


def quad_system(name: str, sigma: list[int], dropped: list[int], seeds=(1, 2)) -> SystemResults:
    """The inputs three times over (a paired bootstrap over fewer than 10 gives no p-value)."""
    sigma, dropped = sigma * 3, dropped * 3
    n = len(sigma)
    counts = {"rep_sigma": sigma, "ref_words": [10] * n, "dropped": dropped, "source_words": [5] * n}
    return SystemResults(name, name.upper(), [{"seed": s, "stress": {"per_input": {"3": counts}}} for s in seeds])


def test_the_report_sets_each_arm_against_the_reference():
    """cpu-small: csparsemax repeats 1 fewer per input than softmax (Δ REP -10); arm x: 3 fewer (Δ -30), so ΔΔ -20;
    arm y has one seed of its four runs only. softmax-x and softmax-y (baseline softmax) are no arms."""
    systems = [quad_system("softmax", [3, 3, 3, 3], [1, 1, 1, 1]), quad_system("csparsemax", [2, 2, 2, 2], [1, 1, 1, 1]),
               quad_system("softmax-x", [4, 4, 4, 4], [1, 1, 1, 1]), quad_system("csparsemax-x", [1, 1, 1, 1], [0, 1, 0, 1]),
               quad_system("softmax-y", [3, 3, 3, 3], [1, 1, 1, 1], seeds=(1,)),
               quad_system("csparsemax-y", [2, 2, 2, 2], [1, 1, 1, 1])]
    baselines = {"softmax": "softmax", "csparsemax": "softmax", "softmax-x": "softmax", "csparsemax-x": "softmax-x",
                 "softmax-y": "softmax", "csparsemax-y": "softmax-y"}
    from scanmt.experiments.report.stress import contrast_section

    lines = contrast_section(systems, baselines, "csparsemax")
    assert lines[0] == "### Stress test: does an arm change the effect of CSPARSEMAX − SOFTMAX?"
    rows = [line for line in lines if line.startswith("| CSPARSEMAX-")]
    assert len(rows) == 2
    x = rows[0].split(" | ")
    assert x[0] == "| CSPARSEMAX-X − SOFTMAX-X" and x[1] == "3" and x[2:4] == ["-30.00", "-10.00"]
    assert x[4] == "1: -20.00 (0.001 †) / 2: -20.00 (0.001 †); sign-flip 0.500" and x[5] == "-20.00 (0.001 †)"
    assert x[6:8] == ["-10.00", "+0.00"] and x[-1] == "2 |"  # DROP: 2 of 20 source words fewer, reference none
    y = rows[1].split(" | ")
    assert y[2:4] == ["-10.00", "-10.00"]  # seed 1 only: the same effect as the reference's
    assert y[5] == "+0.00 (1.000)" and y[-1] == "1 |"
    # no reference, or a --baseline that compares every system with one: no section
    assert contrast_section(systems, baselines, None) == []
    assert contrast_section(systems, {n: "softmax" for n in baselines}, "csparsemax") == []


def test_the_written_report_has_the_contrast_when_the_grid_names_a_reference(tmp_path):
    out, docs = ablation(tmp_path), tmp_path / "docs"
    rec_path = out / "grids" / "table1.json"
    rec = json.loads(rec_path.read_text(encoding="utf-8"))
    for name in SEEDS:
        for seed in (1, 2):
            metrics_path = out / "runs" / name / f"seed{seed}" / "metrics.json"
            metrics = json.loads(metrics_path.read_text(encoding="utf-8"))
            metrics["stress"] = {"per_input": {"2": per_input([1, 0] * 5 if name.startswith("c") else [1, 1] * 5)}}
            metrics_path.write_text(json.dumps(metrics), encoding="utf-8")
    report(out, docs)
    assert "does an arm change" not in (docs / "experiments-table1.md").read_text(encoding="utf-8")
    assert main(["experiment", "report", str(out), "--out", str(docs), "--figures", "0", "--examples", "0",
                 "--bootstrap-samples", "10", "--reference-arm", "csparsemax"]) == 0
    assert "does an arm change the effect of csparsemax − softmax?" in (docs / "experiments-table1.md").read_text()
    rec["reference_arm"] = "csparsemax"
    rec_path.write_text(json.dumps(rec), encoding="utf-8")
    report(out, docs)
    md = (docs / "experiments-table1.md").read_text(encoding="utf-8")
    assert "### Stress test: does an arm change the effect of csparsemax − softmax?" in md
    row = next(line for line in md.splitlines() if line.startswith("| csparsemax-x − softmax-x | 2 |"))
    assert row.split(" | ")[2:4] == ["-5.00", "-5.00"] and "+0.00 (1.000)" in row
    png = docs / "experiments-table1" / "stress-contrast.png"
    assert "](experiments-table1/stress-contrast.png)" in md and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the grid without a reference: neither the section nor the figure, and the figure of before is removed
    rec["reference_arm"] = None
    rec_path.write_text(json.dumps(rec), encoding="utf-8")
    report(out, docs)
    assert not png.exists() and "stress-contrast" not in (docs / "experiments-table1.md").read_text(encoding="utf-8")


def test_the_reference_arm_comes_from_the_command_line_or_the_grid_record():
    from scanmt.experiments.baselines import resolve_reference_arm

    rec = {"name": "abl", "reference_arm": "csparsemax"}
    names = ["softmax", "csparsemax", "softmax-x", "csparsemax-x"]
    assert resolve_reference_arm(rec, names) == "csparsemax"
    assert resolve_reference_arm(rec, names, "softmax-x") == "softmax-x"
    assert resolve_reference_arm({"name": "abl"}, names) is None  # a record from before the key
    with pytest.raises(ConfigError, match="--reference-arm 'nope' is not a system of grid abl"):
        resolve_reference_arm(rec, names, "nope")
