"""The scripts in ``scripts/``: the long-running queues are read by bash step by step, so a syntax error in a
late step would only show hours into a grid; every shell script must parse and every Python one compile."""

from __future__ import annotations

import os
import py_compile
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


@pytest.mark.parametrize("script", sorted(SCRIPTS.glob("*.sh")), ids=lambda p: p.name)
def test_shell_script_parses(script: Path) -> None:
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("script", sorted(SCRIPTS.glob("*.py")), ids=lambda p: p.name)
def test_python_script_compiles(script: Path, tmp_path: Path) -> None:
    py_compile.compile(str(script), cfile=str(tmp_path / "out.pyc"), doraise=True)


def test_continue_kftt_refuses_an_unfinished_run(tmp_path: Path) -> None:
    """Continuing a grid run that has not finished names the run and stops before anything trains (a seed asked
    for by name: by default only finished seeds are continued)."""
    grid = tmp_path / "kftt"
    for system in ("softmax", "csparsemax"):
        (grid / "runs" / system / "seed1").mkdir(parents=True)
    env = dict(os.environ, GRID=str(grid), PYTHON="/bin/false", SEED="1")
    done = subprocess.run(["bash", str(SCRIPTS / "continue-kftt.sh")], capture_output=True, text=True, env=env)
    assert done.returncode == 1
    assert "softmax failed" in done.stderr and "csparsemax failed" in done.stderr
    for system in ("softmax", "csparsemax"):
        out = (tmp_path / "kftt-longer" / f"{system}.out").read_text()
        assert f"{grid}/runs/{system}/seed1 has not finished" in out
        assert not (tmp_path / "kftt-longer" / system).exists()


def test_continue_kftt_continues_the_lowest_seed_with_a_checkpoint(tmp_path: Path) -> None:
    """Runs restored from an archive have finished but kept no checkpoint: the script continues the lowest seed
    that both systems finished on this machine, and names the missing checkpoint when there is none."""
    grid = tmp_path / "kftt"
    for system in ("softmax", "csparsemax"):
        for seed in (1, 2, 3):
            run = grid / "runs" / system / f"seed{seed}"
            run.mkdir(parents=True)
            (run / "DONE").write_text("")
            for name in ("config.yaml", "best.pt", "metrics.csv", "log.txt"):
                (run / name).write_text(name)
    env = dict(os.environ, GRID=str(grid), PYTHON="/bin/false")
    done = subprocess.run(["bash", str(SCRIPTS / "continue-kftt.sh")], capture_output=True, text=True, env=env)
    # no seed with a checkpoint: one line says so, nothing is copied or trained, and a queue goes on without "failed"
    assert done.returncode == 0 and done.stdout.startswith("continue-kftt: skipped: no seed of both"), done.stdout
    assert not (tmp_path / "kftt-longer").exists()
    done = subprocess.run(["bash", str(SCRIPTS / "continue-kftt.sh")], capture_output=True, text=True,
                          env=dict(env, SEED="1"))  # a seed asked for by name must have its checkpoint
    assert done.returncode == 1 and "continue softmax and csparsemax seed 1 to" in done.stdout
    out = (tmp_path / "kftt-longer" / "softmax.out").read_text()
    assert f"{grid}/runs/softmax/seed1 has no last.pt (restored from an archive" in out
    for system in ("softmax", "csparsemax"):
        for seed in (2, 3):
            (grid / "runs" / system / f"seed{seed}" / "last.pt").write_text("checkpoint")
    (grid / "runs" / "csparsemax" / "seed2" / "last.pt").unlink()  # seed 2: one system only
    done = subprocess.run(["bash", str(SCRIPTS / "continue-kftt.sh")], capture_output=True, text=True, env=env)
    assert "continue softmax and csparsemax seed 3 to" in done.stdout  # (then train, /bin/false, fails)
    for system in ("softmax", "csparsemax"):
        copy = tmp_path / "kftt-longer" / system
        assert (copy / "SEED").read_text() == "3\n" and (copy / "last.pt").read_text() == "checkpoint"
    done = subprocess.run(["bash", str(SCRIPTS / "continue-kftt.sh")], capture_output=True, text=True,
                          env=dict(env, SEED="2"))
    assert f"{tmp_path}/kftt-longer/softmax continues seed 3, not 2" in (tmp_path / "kftt-longer" / "softmax.out").read_text()


def _script(name: str):
    """The module of ``scripts/NAME.py``, imported from its file."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sink_bias_moves_the_attention_the_bounds_allow_off_the_sink(monkeypatch) -> None:
    """scripts/sink_bias.py: csparsemax with the sink's score far above the words' puts all attention there;
    lowered by B = 50 the sink keeps only what the bounds force on it (the words' fertility left, 0.7, is less
    than 1)."""
    import torch

    from scanmt.model.bounds import BoundedTransform

    module = _script("sink_bias")
    monkeypatch.setattr(BoundedTransform, "recurrence", BoundedTransform.recurrence)  # undone after the test
    attention = BoundedTransform("csparsemax")
    z = torch.tensor([[0.0, 0.5, 5.0]], dtype=torch.float64)  # two words, the sink last
    mask = torch.ones(1, 3, dtype=torch.bool)
    fertility = torch.tensor([[0.3, 0.4, float("inf")]], dtype=torch.float64)
    before = attention.step(z, mask, fertility, torch.zeros_like(z))
    assert torch.allclose(before, torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64))
    module.lower_the_sink(50.0)
    after = attention.step(z, mask, fertility, torch.zeros_like(z))
    assert torch.allclose(after, torch.tensor([[0.3, 0.4, 0.3]], dtype=torch.float64))
    steps = attention.recurrence(z.expand(2, 3).unsqueeze(0), mask, fertility, torch.zeros_like(z))[0]
    assert torch.allclose(steps[0, 1], torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64))  # bounds spent: forced


def test_rescale_bounds_changes_the_caps_and_keeps_the_models_exhaustion_bonus(monkeypatch) -> None:
    """scripts/rescale_bounds.py on csparsemax with exhaustion 0.2, three positions over two words and the sink:
    scale 1 is the model's own recurrence; ``--bonus rescaled`` is the recurrence with the rescaled bounds
    (what a --fertility file of them does); the default keeps the bonus of the model's own bounds and caps by
    the rescaled ones: with bounds x 1000 no cap binds, and each position is sparsemax of the scores plus
    0.2 x the own bounds' remainder (the NumPy oracle of tests/ops, independent of the ops)."""
    import torch

    from scanmt.model.bounds import BoundedTransform
    from tests.ops import oracle

    module = _script("rescale_bounds")
    monkeypatch.setattr(BoundedTransform, "recurrence", BoundedTransform.recurrence)  # undone after the test
    own = BoundedTransform.recurrence
    attention = BoundedTransform("csparsemax", exhaustion=0.2)
    z = torch.tensor([[[2.0, 0.0, -1.0], [2.0, 0.5, -1.0], [2.0, 0.5, -0.5]]], dtype=torch.float64)  # [1, T, S]
    mask = torch.ones(1, 3, dtype=torch.bool)
    f = torch.tensor([[0.6, 1.2, float("inf")]], dtype=torch.float64)
    start = torch.zeros(1, 3, dtype=torch.float64)
    reference, reference_sum = own(attention, z, mask, f, start)

    module.rescale_the_bounds(1.0, 0.0, 0.1)
    p, s = attention.recurrence(z, mask, f, start)
    assert torch.allclose(p, reference) and torch.allclose(s, reference_sum)
    assert reference[0, 1, 0] == pytest.approx(0.0)  # word 1's bound 0.6 binds after the first position

    monkeypatch.setattr(BoundedTransform, "recurrence", own)
    module.rescale_the_bounds(1000.0, 0.0, 0.1, bonus="rescaled")
    p, _ = attention.recurrence(z, mask, f, start)
    assert torch.allclose(p, own(attention, z, mask, f * 1000, start)[0])

    monkeypatch.setattr(BoundedTransform, "recurrence", own)
    module.rescale_the_bounds(1000.0, 0.0, 0.1)
    p, _ = attention.recurrence(z, mask, f, start)

    total = torch.zeros(3, dtype=torch.float64)
    for t in range(3):
        bonus = 0.2 * torch.where(torch.isfinite(f[0]), (f[0] - total).clamp_min(0), torch.zeros(3, dtype=f.dtype))
        expected = torch.from_numpy(oracle.sparsemax((z[0, t] + bonus).numpy()))
        assert torch.allclose(p[0, t], expected), (t, p[0, t], expected)
        total = total + expected
    assert total[0] > 0.6  # word 1 went past its own bound: the cap was lifted, not the bonus
    assert not torch.allclose(p, own(attention, z, mask, f * 1000, start)[0])  # and the bonus was not scaled

    bounds = torch.tensor([2.0, 0.0, float("inf")], dtype=torch.float64)  # a word, padding, the sink
    assert module.rescaled(bounds, 1.0, -1.9, 0.4).tolist() == [0.4, 0.0, float("inf")]


def test_rescale_bounds_head_stats_counts_each_heads_rows() -> None:
    """scripts/rescale_bounds.py --head-stats: per head (dimension -3 of ``[N, h, T, S]``; one head for the
    LSTM's ``[N, T, S]``), the one-hot share, support and largest weight of its rows, padding rows left out."""
    import torch

    stats = _script("rescale_bounds").HeadStats()
    p = torch.zeros(2, 2, 1, 3)  # [N, h, T, S]
    p[0, 0, 0] = torch.tensor([1.0, 0.0, 0.0])  # head 0: one-hot, support 1
    p[0, 1, 0] = torch.tensor([0.5, 0.3, 0.2])  # head 1: support 3
    p[1, 0, 0] = torch.tensor([0.6, 0.4, 0.0])  # head 0: support 2; sentence 1's head 1 row is padding (zeros)
    stats.add(p)
    stats.add(p[:1])  # a second call adds to the first
    summary = stats.summary()
    assert summary["rows"] == [3, 2]
    assert summary["one_hot_share"] == pytest.approx([2 / 3, 0.0])
    assert summary["mean_support"] == pytest.approx([4 / 3, 3.0])
    assert summary["mean_largest"] == pytest.approx([2.6 / 3, 0.5])

    lstm = _script("rescale_bounds").HeadStats()
    lstm.add(torch.tensor([[[0.2, 0.8, 0.0]], [[0.0, 0.0, 0.0]]]))  # [N, T, S]: one head, one padding row
    assert lstm.summary() == {"rows": [1], "one_hot_share": [0.0], "mean_support": [2.0],
                              "mean_largest": [pytest.approx(0.8)]}


def test_drop_by_pos_splits_drop_by_word_class_over_every_pairing() -> None:
    """scripts/drop_by_pos.py: UniDic parts of speech map to classes (the first match wins: a proper noun is not
    a noun); each class's reference-aligned and dropped words are the mean over the K x K pairings of alignment
    samples, an output equal to its reference taking that pairing's reference links; the table sums content and
    function words and gives the second system's drops against the first's."""
    module = _script("drop_by_pos")
    assert [module.word_class(p) for p in ("名詞-固有名詞", "名詞-普通名詞", "名詞-数詞", "助詞-格助詞", "補助記号-句点",
                                            "接続詞", "形状詞-一般", "代名詞", "連体詞")] == [
        "proper noun", "noun", "numeral", "particle", "punctuation", "other", "adjective", "noun", "other"]
    classes = [["proper noun", "particle", "verb"], ["noun", "punctuation"]]
    ref_samples = [[{(0, 0), (1, 1), (2, 2)}, {(0, 0), (1, 0)}],  # sample 1: every word aligned
                   [{(0, 0), (2, 2)}, {(0, 0)}]]  # sample 2: the particle and the full stop unaligned
    hyp_samples = [[{(0, 0)}, set()],  # sentence 2's output equals its reference: it takes the reference's links
                   [{(0, 0), (1, 1)}, set()]]
    counts = module.counts_by_class(classes, ref_samples, hyp_samples, same=[False, True])
    # pairings (ref 1, hyp 1): particle, verb dropped; (1, 2): verb; (2, 1): verb; (2, 2): verb
    def brief(c):
        return {k: c[k] for k in ("words", "aligned", "dropped")}

    assert brief(counts["verb"]) == {"words": 1, "aligned": 1.0, "dropped": 1.0}
    assert brief(counts["particle"]) == {"words": 1, "aligned": 0.5, "dropped": 0.25}
    assert brief(counts["punctuation"]) == {"words": 1, "aligned": 0.5, "dropped": 0.0}
    assert brief(counts["noun"]) == {"words": 1, "aligned": 1.0, "dropped": 0.0}
    assert brief(counts["adverb"]) == {"words": 0, "aligned": 0.0, "dropped": 0.0}
    assert counts["particle"]["sentence_words"] == [1, 0] and counts["particle"]["sentence_dropped"] == [0.25, 0.0]
    other = module.counts_by_class(classes, ref_samples, [[set(), set()]], same=[False, False])
    text = module.table(["a", "b"], [counts, other])
    no_test = module.format_p(None)  # two sentences are too few for the bootstrap
    assert f"| verb | 1 | 100.0 % | 1.0 (100.00) | 1.0 (100.00) | 1.00× ({no_test}) |" in text
    assert f"| content words | 3 | 100.0 % | 1.0 (33.33) | 3.0 (100.00) | 3.00× ({no_test}) |" in text
    assert f"| function words | 2 | 50.0 % | 0.2 (12.50) | 1.0 (50.00) | 4.00× ({no_test}) |" in text
    assert "| adverb |" not in text  # no word of the class

    budgets = module.word_budgets(["▁京都", "▁は", "▁袋", "井", "▁宿"], [2.5, 1.2, 1.5, 1.75, 1.0])
    assert budgets == [2.5, 1.2, 3.25, 1.0]
    assert [module.budget_class(b) for b in budgets] == ["budget 2-3", "budget < 1.5", "budget 3-5", "budget < 1.5"]
    by_budget = module.counts_by_class([["budget 2-3", "budget < 1.5", "budget 3-5"], ["budget < 1.5", "budget 2-3"]],
                                       ref_samples, hyp_samples, [False, True], tuple(n for n, _ in module.BUDGETS))
    text = module.table(["a"], [by_budget])
    assert "content words" not in text and "| all | 5 |" in text


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not yet reaped, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _wait_for(path: Path) -> None:
    """Wait up to 10 s for ``path``, the marker a started process writes."""
    for _ in range(100):
        if path.exists():
            return
        time.sleep(0.1)


def _kill_groups(*procs: subprocess.Popen) -> None:
    """Kill each process started with ``start_new_session``, with all it started (its process group)."""
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def _grid_kftt(tmp_path: Path, fake_python: Path, **env_vars: str) -> subprocess.CompletedProcess:
    """grid-kftt.sh with ``fake_python``, its folders in ``tmp_path``, no GRID_* setting of the caller's, and
    ``env_vars``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRID_")}
    env.update(GRID_ROOT=str(tmp_path / "runs"), GRID_ARCHIVE=str(tmp_path / "archive"), PYTHON=str(fake_python),
               GRID_ARCHIVE_SRC=str(tmp_path / "src"), **env_vars)
    return subprocess.run(["bash", str(SCRIPTS / "grid-kftt.sh")], env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.skipif(sys.platform != "linux", reason="flock(1) and flock(2) locks: Linux only")
def test_grid_kftt_runs_its_grids_in_order_and_never_beside_another_queue(tmp_path: Path) -> None:
    """grid-kftt.sh, with a fake Python that records its arguments: it refuses to start while another queue holds
    ``ROOT/kftt-queue.lock`` or a grid holds ``ROOT/kftt/.lock``, and otherwise runs the grids in the documented
    order (the bar's pair first) and packs the archive as it exits."""
    import fcntl

    calls = tmp_path / "calls"
    fake = tmp_path / "python"
    fake.write_text(f'#!/usr/bin/env bash\necho "$*" >> {calls}\n', encoding="utf-8")
    fake.chmod(0o755)
    root = tmp_path / "runs"
    (root / "kftt" / "grids").mkdir(parents=True)
    for held, says in [(root / "kftt-queue.lock", "another queue is running"), (root / "kftt" / ".lock", "a grid is running")]:
        with open(held, "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            done = _grid_kftt(tmp_path, fake)
        assert done.returncode == 1 and says in done.stderr, done.stderr
        assert not calls.exists()  # nothing ran
    done = _grid_kftt(tmp_path, fake)  # both locks free now
    assert done.returncode == 0, done.stderr
    lines = calls.read_text(encoding="utf-8").splitlines()
    runs = [line for line in lines if line.startswith("-m scanmt experiment run ")]
    grids = [(r.split()[4], r.split("--seeds ")[1].split()[0], "--systems softmax csparsemax" in r) for r in runs]
    # the LSTM pair's seeds 1-3, the Transformer pair's seeds 1-3, then the other LSTM systems at one seed: with
    # no softmax model on this machine, at seed 1 and without softmax-covpenalty, which decodes softmax's model
    assert grids == [("experiments/kftt.yaml", "3", True), ("experiments/kftt-transformer.yaml", "3", False),
                     ("experiments/kftt.yaml", "1", False)]
    assert runs[2].split("--systems ")[1].split(" --")[0] == "softmax-covvector sparsemax csoftmax"
    assert "softmax-covpenalty is left out" in done.stderr
    assert all("--stress-k 1 2 3" in line for line in runs[:2]) and "--stress-k" not in runs[2]
    assert lines[-1].startswith("-m scanmt experiment archive ") and lines[-1].endswith(
        f"--to {tmp_path}/archive/kftt --runs-only")  # no alignments: data, 20 MB, out of git
    assert "continue-kftt: skipped: no seed" in done.stdout  # no finished run to continue: the queue goes on
    assert "continue-kftt failed" not in done.stdout

    # softmax seeds 1-2 restored (trained, no checkpoint), seed 3 trained here, seed 4 still training: the other
    # systems run at seed 3, all six of them (softmax and csparsemax are done there)
    for seed, files in [(1, [".stages/train.done"]), (2, [".stages/train.done"]),
                        (3, [".stages/train.done", "best.pt"]), (4, ["best.pt"])]:
        for name in files:
            (root / "kftt" / "runs" / "softmax" / f"seed{seed}" / name).parent.mkdir(parents=True, exist_ok=True)
            (root / "kftt" / "runs" / "softmax" / f"seed{seed}" / name).touch()
    calls.unlink()
    done = _grid_kftt(tmp_path, fake)
    assert done.returncode == 0, done.stderr
    last = [line for line in calls.read_text(encoding="utf-8").splitlines()
            if line.startswith("-m scanmt experiment run ")][-1]
    assert "--seeds 3 --first-seed 3" in last and "--systems" not in last and "left out" not in done.stderr


def _probing_python(tmp_path: Path) -> tuple[Path, Path]:
    """A fake Python for grid-kftt.sh in ``tmp_path``, with the folder of a grid: the bf16 probe (``python -c``)
    prints what $PROBE says, and every other call is recorded in the file returned beside it."""
    fake, calls = tmp_path / "python", tmp_path / "calls"
    fake.write_text(f'#!/usr/bin/env bash\nif [[ $1 == -c ]]; then [[ -n $PROBE ]] && echo "$PROBE"; exit 0; fi\n'
                    f'echo "$*" >> {calls}\n', encoding="utf-8")
    fake.chmod(0o755)
    (tmp_path / "runs" / "kftt" / "grids").mkdir(parents=True)
    return fake, calls


@pytest.mark.skipif(sys.platform != "linux", reason="flock(1) and flock(2) locks: Linux only")
def test_grid_kftt_trains_the_transformer_pair_in_the_precision_measured_faster(tmp_path: Path) -> None:
    """The LSTM grid trains in fp32 wherever it runs; the Transformer pair in what the bf16 probe measures faster
    (``auto``), in fp32 when the probe gives no answer, and in GRID_TRANSFORMER_PRECISION when that is set."""
    fake, calls = _probing_python(tmp_path)
    cases = [({"PROBE": "bf16 2.31"}, "bf16",
              "the Transformer pair trains in bf16 (bf16 measured at 2.31x fp32's speed here)"),
             ({"PROBE": "fp32 0.70"}, "fp32",
              "the Transformer pair trains in fp32 (bf16 measured at 0.70x fp32's speed here)"),
             ({"PROBE": ""}, "fp32", "the bf16 probe gave no answer (nothing); the Transformer pair trains in fp32"),
             ({"PROBE": "fp32 0.70", "GRID_TRANSFORMER_PRECISION": "bf16"}, "bf16", None)]
    for env_vars, expected, says in cases:
        calls.unlink(missing_ok=True)
        done = _grid_kftt(tmp_path, fake, **env_vars)
        assert done.returncode == 0, done.stderr
        runs = [line for line in calls.read_text(encoding="utf-8").splitlines()
                if line.startswith("-m scanmt experiment run ")]
        precisions = [(r.split()[4], r.split("train.precision=")[1].split()[0]) for r in runs]
        assert precisions == [("experiments/kftt.yaml", "fp32"), ("experiments/kftt-transformer.yaml", expected),
                              ("experiments/kftt.yaml", "fp32")], (env_vars, precisions)
        if says is None:
            assert "probe" not in done.stderr and "trains in" not in done.stderr  # not measured
        else:
            assert says in done.stderr, done.stderr


@pytest.mark.skipif(sys.platform != "linux", reason="flock(1) and flock(2) locks: Linux only")
def test_grid_kftt_trains_the_lstm_grid_two_runs_at_a_time_and_the_transformer_one_run_on_every_cpu(
        tmp_path: Path) -> None:
    """The LSTM grids run two workers of one thread (GRID_WORKERS, GRID_THREADS; the other LSTM systems three
    workers); the Transformer pair one worker whose run has every CPU (``nproc``), so that a run ends within a
    session; GRID_TRANSFORMER_WORKERS and GRID_TRANSFORMER_THREADS set it otherwise."""
    fake, calls = _probing_python(tmp_path)
    cpus = str(len(os.sched_getaffinity(0)))  # the CPUs this process may run on, as nproc counts them
    cases = [({"PROBE": "bf16 2.00"}, [("2", "1"), ("1", cpus), ("3", "1")]),
             ({"PROBE": "bf16 2.00", "GRID_TRANSFORMER_WORKERS": "2", "GRID_TRANSFORMER_THREADS": "1", "GRID_THREADS": "2"},
              [("2", "2"), ("2", "1"), ("3", "2")])]
    for env_vars, expected in cases:
        calls.unlink(missing_ok=True)
        done = _grid_kftt(tmp_path, fake, **env_vars)
        assert done.returncode == 0, done.stderr
        runs = [line.split() for line in calls.read_text(encoding="utf-8").splitlines()
                if line.startswith("-m scanmt experiment run ")]
        # the last --workers wins (argparse), the one train.threads= of each run
        got = [([a[i + 1] for i, w in enumerate(a) if w == "--workers"][-1],
                [w.split("=")[1] for w in a if w.startswith("train.threads=")]) for a in runs]
        assert [(w, t) for w, (t,) in got] == expected, (env_vars, got)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="stop-grid.sh reads /proc (Linux only)")
def test_stop_grid_stops_the_queue_first_then_the_grid_which_saves(tmp_path: Path) -> None:
    """stop-grid.sh stops the queue shell that runs the grid, its packer subshell and that subshell's sleep, then
    sends SIGTERM to the process named by GRID/.lock and waits for it, and lists what the unfinished runs saved;
    another queue's shell is left alone."""
    grid = tmp_path / "grid"
    (grid / "grids").mkdir(parents=True)
    run = grid / "runs" / "softmax" / "seed1"
    run.mkdir(parents=True)
    (run / "last.pt").write_bytes(b"x")
    (run / "log.txt").write_text("12:00:00 WARNING interrupted (SIGTERM) at step 815: saved last.pt, no update lost\n")
    done_run = grid / "runs" / "softmax" / "seed2"
    done_run.mkdir()
    (done_run / "DONE").write_text("")
    # the grid process: holds GRID/.lock, saves on SIGTERM after a moment, as `scanmt experiment run` does
    fake_experiment = tmp_path / "fake_experiment_run.py"
    fake_experiment.write_text(
        "import os, signal, sys, time\n"
        "grid = sys.argv[1]\n"
        "def stop(signum, frame):\n"
        "    time.sleep(0.5)\n"
        "    open(os.path.join(grid, 'saved'), 'w').write('saved')\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "open(os.path.join(grid, '.lock'), 'w').write(f'{os.getpid()}\\npython experiment run\\n')\n"
        "while True:\n"
        "    time.sleep(0.1)\n")
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    queue = scripts / "grid-fake.sh"
    queue.write_text(f"(while sleep 600; do :; done) &\n{sys.executable} {fake_experiment} {grid}\necho next step > {grid}/next\n")
    other = scripts / "grid-other.sh"
    other.write_text("sleep 600\n")
    queue_proc = subprocess.Popen(["bash", str(queue)], start_new_session=True)
    other_proc = subprocess.Popen(["bash", str(other)], start_new_session=True)
    try:
        _wait_for(grid / ".lock")
        grid_pid = int((grid / ".lock").read_text().split()[0])
        def children(pid: int, name: str) -> list[int]:
            return [int(p) for p in subprocess.run(["pgrep", "-P", str(pid), "-x", name], capture_output=True,
                                                   text=True).stdout.split()]

        packer = children(queue_proc.pid, "bash")
        assert len(packer) == 1
        for _ in range(50):
            sleeps = children(packer[0], "sleep")
            if sleeps:
                break
            time.sleep(0.1)
        assert len(sleeps) == 1
        done = subprocess.run(["bash", str(SCRIPTS / "stop-grid.sh"), str(grid)], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        assert f"stopping the queue shell {queue_proc.pid}" in done.stdout
        assert f"SIGTERM to the grid process {grid_pid}" in done.stdout
        assert (grid / "saved").read_text() == "saved"  # it waited for the grid to save
        assert queue_proc.wait(timeout=10) == -signal.SIGTERM
        assert not (grid / "next").exists()  # no next step started
        for _ in range(50):
            if not _alive(packer[0]) and not _alive(sleeps[0]):
                break
            time.sleep(0.1)
        assert not _alive(packer[0]) and not _alive(sleeps[0])  # a sleep left behind would outlive the queue
        assert other_proc.poll() is None  # not this grid's queue
        assert "softmax/seed1: last.pt written" in done.stdout and "at step 815" in done.stdout
        assert "seed2" not in done.stdout  # finished runs are not listed
    finally:
        _kill_groups(queue_proc, other_proc)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="stop-grid.sh reads /proc (Linux only)")
def test_stop_grid_with_a_queue_pattern_stops_a_trainer_run_outside_the_grid(tmp_path: Path) -> None:
    """A queue between two grids runs a script (as grid-kftt.sh runs continue-kftt.sh) whose subshell runs
    `python -m scanmt train`, which holds no GRID/.lock: with the queue's pattern, stop-grid.sh stops the queue
    shell, then the script and its subshell (so that no step after the trainer runs), then sends the trainer
    SIGTERM and waits until it has saved."""
    grid = tmp_path / "grid"
    (grid / "grids").mkdir(parents=True)
    fake = tmp_path / "fake" / "scanmt"  # `python -m scanmt` finds this package first
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "__main__.py").write_text(
        "import os, signal, sys, time\n"
        "out = sys.argv[sys.argv.index('--out') + 1]\n"
        "def stop(signum, frame):\n"
        "    time.sleep(0.5)\n"
        "    open(os.path.join(out, 'last.pt'), 'w').write('saved')\n"
        "    sys.exit(128 + signum)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "open(os.path.join(out, 'started'), 'w').write(str(os.getpid()))\n"
        "while True:\n"
        "    time.sleep(0.1)\n")
    longer = tmp_path / "longer"
    longer.mkdir()
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    inner = scripts / "continue-fake.sh"
    inner.write_text("set -euo pipefail\n"
                     f"go() {{ PYTHONPATH={fake.parent} {sys.executable} -m scanmt train --out {longer}; "
                     f"touch {longer}/trained; }}\n"
                     f"go > {longer}/out 2>&1 &\nA=$!\nwait $A || exit 1\ntouch {longer}/evaluated\n")
    queue = scripts / "grid-fake.sh"
    queue.write_text(f"bash {inner}\necho next step > {grid}/next\n")
    queue_proc = subprocess.Popen(["bash", str(queue)], start_new_session=True)
    try:
        _wait_for(longer / "started")
        trainer = int((longer / "started").read_text())
        done = subprocess.run(["bash", str(SCRIPTS / "stop-grid.sh"), str(grid), "scripts/grid-fake.sh"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "no grid process holds" in done.stdout
        assert f"stopping the queue shell {queue_proc.pid}" in done.stdout
        assert "continue-fake.sh" in done.stdout  # the script between the queue and the trainer
        assert f"SIGTERM to {trainer} " in done.stdout and "-m scanmt train" in done.stdout
        assert (longer / "last.pt").read_text() == "saved"  # it waited for the trainer to save
        assert not _alive(trainer)
        assert queue_proc.wait(timeout=10) == -signal.SIGTERM
        time.sleep(0.5)
        for step in ("trained", "evaluated"):  # no step after the trainer ran
            assert not (longer / step).exists(), step
        assert not (grid / "next").exists()
    finally:
        _kill_groups(queue_proc)


def test_stop_grid_reads_the_command_line_of_a_process_that_has_gone_quietly() -> None:
    """The queue pattern matches the queue shell and its packer subshell, and stopping the first stops the second,
    so the second's /proc entry may be gone when its turn comes (session 81: "/proc/5741/cmdline: No such file or
    directory" twice on stderr). Reading a vanished process gives an empty command line and no message."""
    line = next(x for x in (SCRIPTS / "stop-grid.sh").read_text().splitlines() if x.startswith("cmdline()"))
    gone = 4194305  # above the largest pid_max Linux allows, so no such process
    done = subprocess.run(["bash", "-c", f'{line}\necho "[$(cmdline {gone})]"'], capture_output=True, text=True)
    assert (done.stdout, done.stderr) == ("[]\n", "")


def test_stop_grid_refuses_a_folder_that_is_not_a_grid(tmp_path: Path) -> None:
    done = subprocess.run(["bash", str(SCRIPTS / "stop-grid.sh"), str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2 and "is not a grid folder" in done.stderr
