"""The tiny grid end to end on a real Multi30k subset: run, kill, resume, skip, report.

One test, in steps that build on each other (about two minutes on one core):

1. ``scanmt experiment run experiments/tiny.yaml --extra-splits`` (the main test split only) in a
   subprocess, killed (SIGKILL, with its worker) as soon as the first run has written a checkpoint;
2. the same command again resumes that run's training and finishes both runs;
3. once more: every run is skipped, every shared step reused;
3b. without ``--extra-splits``: the data has test2017, so the finished runs get only its translate and
   evaluate steps (no training, no new translation of the main split), and ``metrics.json`` its ``test_sets``;
4. ``scanmt experiment report``: the Markdown table has both systems, the attention map is a small PNG,
   test_2017_flickr has its own table and its entry in the JSON;
5. a second grid into the same directory reuses the finished softmax run and tunes CovPenalty's
   alpha and beta on validation, with two workers (the tuned run waits for its model), on both test sets;
6. ``--redecode --systems softmax``: softmax translates and scores both test sets again from its
   trained model, and its earlier outputs, markers and DONE are kept in ``previous-decode-1/``;
7. ``experiment archive``, the folder moved away (a fresh machine), ``experiment restore``: the report is
   the same, byte for byte, without a checkpoint, and the grid has nothing left to do;
8. the same with an archive of runs only: ``run`` aligns afresh, and the report gains a section naming the
   runs that trained on the other shared work.
"""

from __future__ import annotations

import json
import os
import re
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from scanmt.cli.main import main
from scanmt.experiments.spec import DROP_SAMPLES
from scanmt.experiments.planning import machine
from scanmt.io import LOCK_FILE
from scanmt.processes import lock_held
from tests.process_helpers import wait_for

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "experiments" / "tiny.yaml"

# a tiny model that trains in seconds on one thread and still repeats words (for the figure)
SETS = [
    "train.threads=1", "model.emb_size=32", "model.hidden_size=32", "model.dropout=0.1", "train.max_steps=200",
    "train.checkpoint_every=50", "train.valid_every=100", "train.lr=0.005", "train.label_smoothing=0.0",
    "data.batch_tokens=600", "data.valid_limit=50", "decode.beam=3",
]
PREDICTOR_SETS = ["train.max_steps=30", "data.batch_tokens=800"]


def run_argv(grid: Path, data: Path, out: Path, *extra: str) -> list[str]:
    argv = ["experiment", "run", str(grid), "--data", str(data), "--out", str(out), "--preset", "cpu-small"]
    for s in SETS:
        argv += ["--set", s]
    for s in PREDICTOR_SETS:
        argv += ["--predictor-set", s]
    return argv + list(extra)


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def kill_when(proc: subprocess.Popen, ready: Path, timeout: float) -> None:
    """SIGKILL the process group of ``proc`` as soon as ``ready`` exists; wait for the worker (in a group of its
    own, it gets SIGTERM as the grid dies) to save and let go of the run's lock."""
    t0 = time.time()
    while not ready.exists():
        if proc.poll() is not None:
            pytest.fail(f"the grid ended (exit {proc.returncode}) before {ready} appeared")
        if time.time() - t0 > timeout:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"{ready} did not appear within {timeout:.0f} s")
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    wait_for(lambda: not lock_held(ready.parent / LOCK_FILE), 60, "the worker to stop with the grid")


def stamps(run: Path, names: tuple[str, ...]) -> dict[str, int]:
    return {n: (run / n).stat().st_mtime_ns for n in names}


MAIN_FILES = ("best.pt", "last.pt", "test.hyp.en", "test.hyp.tok.en", "test.attn.npz", "eval.json",
              ".stages/train.done", ".stages/translate.done", ".stages/evaluate.done")
T17_FILES = ("test2017.hyp.en", "test2017.hyp.tok.en", "test2017.attn.npz", "eval.test2017.json",
             ".stages/translate.test2017.done", ".stages/evaluate.test2017.done")


def check_added_test2017(runs: tuple[Path, ...], before: dict[Path, dict[str, int]], text: str) -> None:
    """Step 3b: only the test2017 steps ran on the finished runs; their files, markers and numbers."""
    for run in runs:
        assert f"start {run.parent.name}/seed1 (cpu, 1 thread, adding test set(s) test2017)" in text
        assert stamps(run, MAIN_FILES) == before[run], f"{run}: training or the main split was redone"
        for name in T17_FILES:
            assert (run / name).exists(), f"{run / name} missing"
        log = (run / "log.txt").read_text(encoding="utf-8").split("#####")[-1]
        assert "=== train: done before" in log and "=== translate: done before" in log
        assert "=== translate.test2017: scanmt translate" in log and "=== evaluate.test2017: scanmt evaluate" in log
        m = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
        t17 = m["test_sets"]["test2017"]
        assert set(t17) >= {"bleu", "sacrebleu", "meteor", "rep", "drop"} and t17["sentences"] == 100
        assert all(isinstance(t17[k], float) and t17[k] >= 0 for k in ("bleu", "meteor", "rep", "drop"))
        ev = json.loads((run / "eval.test2017.json").read_text(encoding="utf-8"))
        assert t17["bleu"] == ev["tok_bleu"]["score"] and t17["bleu"] != m["bleu"]
        cmd = (run / "command.txt").read_text(encoding="utf-8")
        assert "--input " + str(run.parents[2] / "shared" / "data" / "test2017.raw.de") in cmd
        assert "--json " + str(run / "eval.test2017.json") in cmd
    assert "skip " not in text and "\ntest2017:" in text  # the closing summary has its table


@pytest.mark.slow
def test_tiny_grid_end_to_end(small_data_dir_2017, tmp_path, capsys):
    out = tmp_path / "exp"
    small_data_dir = small_data_dir_2017
    argv = run_argv(TINY, small_data_dir, out, "--extra-splits")
    softmax = out / "runs" / "softmax" / "seed1"
    csparsemax = out / "runs" / "csparsemax" / "seed1"

    # 1. start the grid and kill it (and its worker) once softmax has a checkpoint
    with open(tmp_path / "first.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "scanmt", *argv], stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        kill_when(proc, softmax / "last.pt", timeout=150)
    assert (out / "shared" / ".done" / "predictor.json").exists()  # shared work finished before the runs
    assert not (softmax / "DONE").exists() and not (softmax / ".stages" / "train.done").exists()
    # 1b. what `experiment status` makes of the killed grid: nobody holds it, softmax resumes from last.pt
    assert main(["experiment", "status", str(out)]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith(f"{out}: no grid is running\n") and "\ntiny: 2 runs, " in shown
    assert "softmax/seed1     stopped  " in shown and "rerun: resuming training from last.pt (update " in shown
    assert "left: 2 run(s)" in shown

    # 2. rerun: softmax resumes its training from last.pt, both runs finish
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "[shared] align: done before, reused" in text and "[shared] predictor: done before, reused" in text
    assert "start softmax/seed1 (cpu, 1 thread, resuming training from last.pt)" in text
    assert "resumed from step" in (softmax / "log.txt").read_text(encoding="utf-8")
    for run in (softmax, csparsemax):
        assert (run / "DONE").exists()
        m = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
        for key in ("bleu", "sacrebleu", "meteor", "rep", "drop"):
            assert isinstance(m[key], float) and m[key] >= 0, key
        assert m["train"]["steps"] == 200 and m["sentences"] == 100
        assert m["machines"] == [machine(1, "fp32")]  # both attempts (killed, resumed) here, 1 thread, fp32
        # DROP averaged over the grid's default number of alignments of each side, and their spread kept
        assert m["drop_samples"] == DROP_SAMPLES == 3 and m["drop_sd"] >= 0
        assert len(json.loads((run / "eval.json").read_text(encoding="utf-8"))["drop"]["scores"]) == 9
        assert 0 <= m["attention"]["zero_fraction"] <= 1
        for name in ("config.yaml", "best.pt", "last.pt", "metrics.csv", "test.hyp.en", "test.hyp.tok.en",
                     "test.attn.npz", "eval.json", "command.txt"):
            assert (run / name).exists(), f"{run / name} missing"
        cmd = (run / "command.txt").read_text(encoding="utf-8")
        assert "# git commit: " in cmd and "scanmt experiment run " in cmd and "scanmt train --config " in cmd
        assert "--drop-samples 3" in cmd  # the evaluate step's command line says how DROP was measured
        log = (run / "log.txt").read_text(encoding="utf-8")  # what scanmt prints at the end of each step
        assert "\ntraining summary (" in log and "\n  best valid BLEU:  " in log and "\n  last valid ppl:   " in log
        assert f"\ntranslated 100 sentences from {out / 'shared' / 'data' / 'test.raw.de'} -> {run / 'test.hyp.en'}\n" in log
        assert "\n  decoding: beam " in log and f"\n  attention: {run / 'test.attn.npz'}\n" in log
        table = log.split("=== evaluate: ")[1]
        assert "\nmetric " in table and "\nBLEU " in table and f"\nresults written to {run / 'eval.json'}\n" in table
        assert m["test_sets"] == {} and not (run / "eval.test2017.json").exists() and "test2017" not in cmd
    assert json.loads((csparsemax / "metrics.json").read_text())["attention"]["zero_fraction"] > 0  # sparse
    assert "system" in text and "softmax" in text.split("summary:")[1]

    # 3. a third time: nothing left to do, and the grid record keeps naming the invocation that did the work
    record = (out / "grids" / "tiny.json").read_bytes()
    t0 = time.time()
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "skip  softmax/seed1: done before" in text and "skip  csparsemax/seed1: done before" in text
    assert "start " not in text and time.time() - t0 < 30
    assert (out / "grids" / "tiny.json").read_bytes() == record
    assert main(["experiment", "status", str(out), "--brief"]) == 0
    assert capsys.readouterr().out.endswith("tiny: 2 runs, 2 done\n\nevery run is done\n")

    # 3b. the default extra split (test2017, which the data has): only its steps run on the finished runs
    before = {run: stamps(run, MAIN_FILES) for run in (softmax, csparsemax)}
    assert main(run_argv(TINY, small_data_dir, out)) == 0
    check_added_test2017((softmax, csparsemax), before, capsys.readouterr().out)

    # 4. the report
    docs = tmp_path / "docs"
    assert main(["experiment", "report", str(out), "--out", str(docs)]) == 0
    capsys.readouterr()
    md = (docs / "experiments-tiny.md").read_text(encoding="utf-8")
    rows = [ln for ln in md.splitlines() if ln.startswith("| softmax |") or ln.startswith("| csparsemax (c = 0.2) |")]
    assert len(rows) >= 2 and "baseline" in rows[0] and "[commands](#cmd-csparsemax)" in md
    assert "| system | BLEU | METEOR | REP | DROP |" in md and "**" in md
    health = md.split("## Attention during training\n")[1].split("\n## ")[0]  # read from each run's metrics.csv
    row = next(ln for ln in health.splitlines() if ln.startswith("| csparsemax (c = 0.2) |")).split(" | ")
    assert row[1] == "1" and all(c.strip() != "–" for c in row[3:5]), row
    pngs = sorted((docs / "experiments-tiny").glob("*.png"))
    assert pngs, "no attention map: softmax repeated no word?"
    for p in pngs:
        w, h = png_size(p)
        assert w > 100 and h > 50 and p.stat().st_size <= 150_000
        assert f"(experiments-tiny/{p.name})" in md
    assert "None: every requested run finished." in md
    assert "Machines the runs ran on (processor, CPUs, torch, training threads and precision, where recorded): " in md
    # speed settings apart from the overrides: a grid's runs may differ in them (the machine list says how)
    assert "Speed settings of the latest grid command: `train.threads=1` (they do not make" in md
    assert "Overrides for every system (grid `set:`, then `--set`; later ones win): `model.emb_size=64`" in md
    assert "`train.threads=1`" not in md.split("Overrides for every system")[1].split("\n")[0]
    assert f"`{machine(1, 'fp32')}`: softmax/seed1, csparsemax/seed1." in md
    assert machine(1, "fp32").endswith(", 1 thread(s), fp32") and machine().endswith(f"torch {torch.__version__}")
    assert "## Results on `test_2016_flickr`" in md and "## Results on `test_2017_flickr`" in md
    t17 = md.split("## Results on `test_2017_flickr`")[1].split("\n## ")[0]
    assert "`test2017` (`test_2017_flickr`, 100 sentences)" in t17
    assert "| system | BLEU | METEOR | REP | DROP | sacreBLEU | Δ BLEU (p) vs softmax, by seed | seeds |" in t17
    t17_rows = [ln for ln in t17.splitlines() if ln.startswith("| softmax |") or ln.startswith("| csparsemax (c")]
    assert len(t17_rows) == 2 and "baseline" in t17_rows[0] and t17_rows[1].endswith(" | 1 |")
    soft_bleu = json.loads((softmax / "metrics.json").read_text())["test_sets"]["test2017"]["bleu"]
    assert f"{soft_bleu:.2f}" in t17_rows[0]
    js = json.loads((docs / "experiments-tiny.json").read_text(encoding="utf-8"))
    assert js["test_set"] == "test_2016_flickr" and list(js["test_sets"]) == ["test_2016_flickr", "test_2017_flickr"]
    assert js["test_sets"]["test_2017_flickr"]["softmax"]["bleu"] == {"mean": soft_bleu, "std": None}
    assert js["test_sets"]["test_2017_flickr"]["csparsemax"]["seeds"] == 1

    # 5. another grid into the same directory: softmax reused, CovPenalty tuned on validation
    raw = yaml.safe_load(TINY.read_text(encoding="utf-8"))
    soft = next(s for s in raw["systems"] if s["name"] == "softmax")
    raw["name"] = "tuned"
    raw["figure"] = []
    raw["systems"] = [soft, {"name": "softmax-covpenalty", "label": "softmax + CovPenalty", "set": soft["set"],
                             "reuse_model": "softmax", "tune_penalties": True}]
    grid2 = tmp_path / "tuned.yaml"
    grid2.write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert main(run_argv(grid2, small_data_dir, out, "--workers", "2")) == 0
    text = capsys.readouterr().out
    assert "skip  softmax/seed1: done before" in text and "done  softmax-covpenalty/seed1" in text
    tuned = out / "runs" / "softmax-covpenalty" / "seed1"
    m = json.loads((tuned / "metrics.json").read_text(encoding="utf-8"))
    assert m["model_from"] == str(softmax) and not (tuned / "best.pt").exists()
    assert set(m["penalties"]) >= {"length_alpha", "coverage_beta"}
    assert "--penalties" in (tuned / "command.txt").read_text(encoding="utf-8")
    assert set(m["test_sets"]) == {"test2017"} and (tuned / "test2017.hyp.en").exists()
    assert "test2017.raw.de" in (tuned / "command.txt").read_text(encoding="utf-8")
    assert main(["experiment", "report", str(out), "--out", str(docs), "--grid", "tuned", "--figures", "0"]) == 0
    md2 = (docs / "experiments-tuned.md").read_text(encoding="utf-8")
    assert "| softmax + CovPenalty |" in md2 and (docs / "experiments-tiny.md").exists()

    # 6. decode softmax's model again (as after a fix to decoding); nothing of the earlier decode is lost
    trained = stamps(softmax, ("best.pt", "last.pt", ".stages/train.done"))
    old_hyp, old_metrics = (softmax / "test.hyp.en").read_text(), (softmax / "metrics.json").read_text()
    attempts = len(json.loads((softmax / "spec.json").read_text())["history"])
    assert main(run_argv(TINY, small_data_dir, out, "--redecode", "--systems", "softmax", "--dry-run")) == 0
    assert "softmax/seed1                    redecode trains" in capsys.readouterr().out
    assert (softmax / "DONE").exists() and not (softmax / "previous-decode-1").exists()  # the dry run moved nothing
    assert main(run_argv(TINY, small_data_dir, out, "--redecode", "--systems", "softmax")) == 0
    text = capsys.readouterr().out
    prev = softmax / "previous-decode-1"
    assert f"redecode: 1 run(s) will translate and score again\n  softmax/seed1: earlier outputs moved to {prev}" in text
    assert "start softmax/seed1 (cpu, 1 thread, resuming after its finished steps)" in text
    assert "start csparsemax" not in text and "csparsemax/seed1: earlier outputs" not in text
    assert (prev / "test.hyp.en").read_text() == old_hyp and (prev / "metrics.json").read_text() == old_metrics
    for name in ("DONE", "eval.json", "eval.test2017.json", "test2017.attn.npz", "stage-translate.done",
                 "stage-evaluate.test2017.done"):
        assert (prev / name).exists(), name
    assert stamps(softmax, ("best.pt", "last.pt", ".stages/train.done")) == trained
    assert (softmax / "DONE").exists() and (softmax / "test.hyp.en").read_text() == old_hyp  # same code and model
    assert set(json.loads((softmax / "metrics.json").read_text())["test_sets"]) == {"test2017"}
    log = (softmax / "log.txt").read_text(encoding="utf-8").split("#####")[-1]
    assert "=== train: done before" in log and "=== translate: scanmt translate" in log
    assert "=== evaluate.test2017: scanmt evaluate" in log
    assert len(json.loads((softmax / "spec.json").read_text())["history"]) == attempts + 1
    assert "--redecode" in (softmax / "command.txt").read_text(encoding="utf-8")

    # 7. archive, lose the folder, restore: nothing to run, the same report
    assert main(["experiment", "report", str(out), "--out", str(docs)]) == 0
    md = (docs / "experiments-tiny.md").read_text(encoding="utf-8")
    kept = tmp_path / "archive"
    assert main(["experiment", "archive", str(out), "--to", str(kept)]) == 0
    assert "runs added 3, packed again 0, unchanged 0; 0 unfinished left out" in capsys.readouterr().out
    left_out = json.loads((kept / "manifest.json").read_text())["runs"]["softmax/seed1"]["left_out"]
    assert "attention_sources" in left_out["test.attn.npz"]  # its source tokens, the test set's, made again
    os.rename(out, tmp_path / "lost")
    assert main(["experiment", "restore", str(kept), "--out", str(out)]) == 0
    assert ("shared work restored, fertility predictor retrained: the same weights; runs restored 3, already there 0"
            in capsys.readouterr().out)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.pt")) == ["shared/predictor/best.pt",
                                                                          "shared/predictor/last.pt"]  # retrained
    assert main(["experiment", "report", str(out), "--out", str(docs)]) == 0
    undated = lambda text: re.sub(r" on \d{4}-\d\d-\d\d \d\d:\d\d from ", " from ", text)  # noqa: E731
    assert undated((docs / "experiments-tiny.md").read_text(encoding="utf-8")) == undated(md) and " from " in md
    assert main(run_argv(TINY, small_data_dir, out)) == 0
    text = capsys.readouterr().out
    assert "skip  softmax/seed1: done before" in text and "skip  csparsemax/seed1: done before" in text
    assert "[shared] align: done before, reused" in text and "start " not in text
    # --redecode cannot decode a restored run again (no model): it says so and moves none of its outputs
    assert main(run_argv(TINY, small_data_dir, out, "--redecode")) == 0
    text = capsys.readouterr().out
    assert "redecode: 0 run(s) will translate and score again" in text
    assert (f"redecode: 2 run(s) kept as they are, their model gone (a restored archive keeps no checkpoints; train "
            f"them again in a new --out to decode them): softmax/seed1 ({softmax / 'best.pt'}), csparsemax/seed1 "
            in text)
    assert "start " not in text and not (softmax / "previous-decode-2").exists() and (softmax / "DONE").exists()
    assert main(["experiment", "report", str(out), "--out", str(docs)]) == 0
    assert undated((docs / "experiments-tiny.md").read_text(encoding="utf-8")) == undated(md)

    # 8. an archive of runs only (no alignments): lost again, the runs come back without the shared work, `run`
    # aligns afresh and trains nothing, and the report is the same with a last section naming each restored run
    runs_only = tmp_path / "archive-runs-only"
    assert main(["experiment", "archive", str(out), "--to", str(runs_only), "--runs-only"]) == 0
    assert not (runs_only / "shared.tar.gz").exists()
    os.rename(out, tmp_path / "lost-again")
    assert main(["experiment", "restore", str(runs_only), "--out", str(out)]) == 0
    assert "runs restored 3, already there 0" in capsys.readouterr().out
    assert main(["experiment", "status", str(out), "--grid", "tiny"]) == 0
    text = capsys.readouterr().out
    origin = json.loads((softmax / "shared-origin.json").read_text())["alignments"][:12]
    assert text.count(f"; restored from {runs_only}, trained on alignments {origin}") == 2, text
    assert not (out / "shared" / "data" / "align").exists()
    assert main(run_argv(TINY, small_data_dir, out)) == 0
    text = capsys.readouterr().out
    assert "[shared] align: done before" not in text and "start " not in text
    assert "skip  softmax/seed1: done before" in text and (out / "shared" / "data" / "align").is_dir()
    assert main(["experiment", "report", str(out), "--out", str(docs)]) == 0
    again, section, restored = (docs / "experiments-tiny.md").read_text(encoding="utf-8").partition(
        "## Runs restored from an archive of runs only")
    assert undated(again) == undated(md) + "\n" and section
    rows = [line for line in restored.splitlines() if line.startswith("| ") and "`" in line]
    assert len(rows) == 2 and all(row.endswith("| no |") for row in rows), restored  # aligned afresh
    js = json.loads((docs / "experiments-tiny.json").read_text(encoding="utf-8"))
    trained = json.loads((softmax / "shared-origin.json").read_text())
    assert js["softmax"]["restored"] == {"1": {"alignments": trained["alignments"], "predictor": trained["predictor"],
                                               "same_as_folder": False}}
    assert js["test_sets"]["test_2017_flickr"]["csparsemax"]["restored"]["1"]["same_as_folder"] is False


def test_report_aggregation_and_sentence_choice():
    """Mean ± sample std over seeds, best-of-column per direction, and the Figure-2 sentence choice."""
    from scanmt.experiments.report.collection import SystemResults, Texts
    from scanmt.experiments.report.figures import choose_sentences
    from scanmt.experiments.report.markdown import fmt, md_escape
    from scanmt.experiments.report.tables import best_means

    assert fmt([]) == "–" and fmt([30.0]) == "30.00" and fmt([29.0, 31.0]) == "30.00 ± 1.41"
    a = SystemResults("a", "a", runs=[{"seed": 1, "bleu": 30.0, "meteor": 1.0, "rep": 2.0, "drop": 5.0, "sacrebleu": 1.0},
                                      {"seed": 2, "bleu": 32.0, "meteor": 1.0, "rep": 4.0, "drop": 5.0, "sacrebleu": 1.0}])
    b = SystemResults("b", "b", runs=[{"seed": 1, "bleu": 30.5, "meteor": 2.0, "rep": 1.0, "drop": 6.0, "sacrebleu": 2.0}])
    assert best_means([a, b]) == {"bleu": "31.00", "meteor": "2.00", "rep": "1.00", "drop": "5.00", "sacrebleu": "2.00"}
    texts = Texts(src=["x y", "x y z", "a b c d e f", "x"], ref=[""] * 4,
                  ref_tok=["the dog runs", "a cat", "a man", "hi"], tgt_lang="en", src_words=[2, 3, 6, 1])
    base = ["the dog dog runs", "a cat cat cat", "a man man", "hi"]
    other = ["the dog runs", "a cat cat cat", "a man", "hi"]
    # sentences 0 and 1 repeat; 0 is fixed by the other system, so it comes first; 2 has too long a source
    assert choose_sentences(base, other, texts, 5, max_src_words=3) == [0, 1]
    assert choose_sentences(base, other, texts, 5, max_src_words=3, src_tokens=[9, 2, 2, 2], max_src_tokens=4) == [1]
    assert md_escape("a | b *c* <s>") == "a \\| b \\*c\\* &lt;s&gt;"
