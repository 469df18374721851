"""Grid files: structure checks with clear errors, the shipped grids, and config checks before any work."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from scanmt.cli.main import main
from scanmt.errors import ConfigError
from scanmt.experiments import common, layout, planning, spec as run_spec, state as run_state_module
from scanmt.experiments.grid import GridError, load_grid, normalize_overrides, select_systems

REPO = Path(__file__).resolve().parents[2]
GRIDS = REPO / "experiments"


def write(tmp_path: Path, text: str, name: str = "grid.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


GOOD = """
name: g
systems:
  - name: softmax
    set: [model.attention.transform=softmax]
  - name: cov
    set: [model.attention.transform=softmax]
    reuse_model: softmax
    tune_penalties: true
"""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: [unclosed", "invalid YAML"),
        ("- a\n- b\n", "expected a mapping"),
        ("systems: [{name: a}]\n", "missing 'name'"),
        ("name: g\nsystem: []\n", "unknown top-level key 'system'"),
        ("name: g\nsystems: []\n", "'systems' must be a non-empty list"),
        ("name: a/b\nsystems: [{name: s}]\n", "name: 'a/b': use letters, digits"),
        ("name: g\nsystems: [{set: []}]\n", "systems[0]: missing 'name'"),
        ("name: g\nsystems: [{name: s}, {name: s}]\n", "system 's' is listed twice"),
        ("name: g\nsystems: [{name: s, sett: []}]\n", "system 's': unknown key 'sett'"),
        ("name: g\nsystems: [{name: s, tune_penalties: 'yes'}]\n", "system 's': tune_penalties: expected true/false"),
        ("name: g\nsystems: [{name: s, set: [model.emb_size]}]\n", "system 's': set: 'model.emb_size': expected key=value"),
        ("name: g\nsystems: [{name: s, set: ['emb_size=3']}]\n", "is not a dotted config key"),
        ("name: g\nsystems: [{name: s, set: model.emb_size=3}]\n", "expected a list of 'key=value' strings"),
        ("name: g\nsystems: [{name: s, set: [data.dir=/x]}]\n", "data.dir is set by `scanmt experiment run` itself"),
        ("name: g\nset: [train.seed=3]\nsystems: [{name: s}]\n", "train.seed is set by `scanmt experiment run` itself"),
        ("name: g\nsystems: [{name: s, reuse_model: t}]\n", "reuse_model 't' is not a system of this grid"),
        ("name: g\nsystems: [{name: s, reuse_model: s}]\n", "reuse_model names the system itself"),
        ("name: g\nsystems: [{name: a}, {name: b, reuse_model: a}, {name: c, reuse_model: b}]\n",
         "reuse_model 'b' itself reuses 'a'"),
        ("name: g\nbaseline: nope\nsystems: [{name: s}]\n", "baseline 'nope' is not a system of this grid"),
        ("name: g\nfigure: [s]\nsystems: [{name: s}]\n", "figure: expected two system names"),
        ("name: g\nfigure: [s, t]\nsystems: [{name: s}]\n", "figure: 't' is not a system"),
        ("name: g\nalign: {sampler: 1}\nsystems: [{name: s}]\n", "align: unknown option 'sampler'"),
        ("name: g\nalign: {samplers: 1.5}\nsystems: [{name: s}]\n", "align.samplers: expected an integer"),
        ("name: g\nsystems: [{name: s}]\nname: h\n", "found the key 'name' a second time (first at line 1)"),
    ],
)
def test_grid_errors_name_file_system_and_key(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(GridError) as exc:
        load_grid(path)
    assert message in str(exc.value)
    assert str(path) in str(exc.value)


def test_missing_grid_file(tmp_path):
    with pytest.raises(GridError, match="grid file not found"):
        load_grid(tmp_path / "nope.yaml")


def test_good_grid_and_mapping_overrides(tmp_path):
    g = load_grid(write(tmp_path, GOOD))
    assert g.names == ["softmax", "cov"] and g.baseline_name == "softmax"
    assert g.system("cov").reuse_model == "softmax" and g.system("cov").tune_penalties
    assert g.system("softmax").label == "softmax"
    assert [s.name for s in select_systems(g, ["cov"])] == ["softmax", "cov"]  # its model's system comes along
    with pytest.raises(GridError, match="no system named 'x'"):
        select_systems(g, ["x"])
    assert normalize_overrides({"model.attention.transform": "csparsemax", "train.lr": 0.5, "x.y": "a: b"}, "set") == [
        "model.attention.transform=csparsemax", "train.lr=0.5", 'x.y="a: b"']


def test_shipped_grids():
    t1 = load_grid(GRIDS / "table1.yaml")
    assert t1.names == ["softmax", "softmax-covpenalty", "softmax-covvector", "sparsemax", "sparsemax-covpenalty",
                        "sparsemax-covvector", "csoftmax", "csparsemax"]
    assert [s.name for s in t1.systems if s.tune_penalties] == ["softmax-covpenalty", "sparsemax-covpenalty"]
    assert t1.baseline_name == "softmax" and t1.figure == ["softmax", "csparsemax"]
    t2 = load_grid(GRIDS / "table2.yaml")
    assert len(t2.systems) == 5
    # the same system in both grids, so one --out shares its runs
    assert t2.system("csparsemax").set == t1.system("csparsemax").set and t2.set == t1.set
    tiny = load_grid(GRIDS / "tiny.yaml")
    assert tiny.names == ["softmax", "csparsemax"] and tiny.align_args()
    # the ablation reuses Table 1's softmax and csparsemax runs, and each csparsemax variant differs from
    # the softmax of the same variant only in the attention transform's own keys
    ab = load_grid(GRIDS / "recipe-ablation.yaml")
    assert ab.set == t1.set
    assert ab.system("softmax").set == t1.system("softmax").set
    assert ab.system("csparsemax").set == t1.system("csparsemax").set
    sparse_keys = set(t1.system("csparsemax").set)
    for variant in ("paper-recipe", "ls0", "untied", "sgd", "batch"):
        soft, sparse = set(ab.system(f"softmax-{variant}").set), set(ab.system(f"csparsemax-{variant}").set)
        assert soft - {"model.attention.transform=softmax"} == sparse - sparse_keys, variant
        assert sparse_keys <= sparse and "model.attention.transform=softmax" in soft, variant
    # every key the paper recipe sets is varied alone by one of the single-factor arms
    paper = set(ab.system("softmax-paper-recipe").set)
    singles = set().union(*(ab.system(f"softmax-{v}").set for v in ("ls0", "untied", "sgd", "batch")))
    assert paper == singles, paper ^ singles
    # softmax-unscaled is the SGD arm's softmax with cpu-small's optimizer: only the score scaling of it
    sgd, unscaled = set(ab.system("softmax-sgd").set), set(ab.system("softmax-unscaled").set)
    assert sgd - unscaled == {"train.optimizer=sgd", "train.lr=1.0", "train.normalization=sents"}
    assert unscaled <= sgd and "model.attention.scaling=none" in unscaled
    assert not ab.system("softmax-unscaled").baseline  # compared with cpu-small's softmax


def dry_run(grid: Path, out: Path, *extra: str) -> list[str]:
    return ["experiment", "run", str(grid), "--out", str(out), "--dry-run", "--set", "train.threads=1", *extra]


def test_dry_run_checks_every_config_before_any_work(tmp_path, capsys):
    out = tmp_path / "exp"
    assert main(dry_run(GRIDS / "table1.yaml", out, "--seeds", "2")) == 0
    text = capsys.readouterr().out
    assert "8 systems x 2 seeds = 16 runs" in text
    assert "softmax-covpenalty/seed2" in text and "model of softmax, tunes penalties" in text
    assert "scanmt tune-penalties --model" in text and "--penalties" in text
    assert "predictor: yes" in text  # csoftmax and csparsemax use predicted fertility
    assert not out.exists()


def test_first_seed_runs_only_the_seeds_from_it(tmp_path, capsys):
    out = tmp_path / "exp"
    assert main(dry_run(GRIDS / "tiny.yaml", out, "--seeds", "3", "--first-seed", "3")) == 0
    text = capsys.readouterr().out
    assert "2 systems x 1 seeds = 2 runs" in text
    assert "softmax/seed3" in text and "seed1" not in text and "seed2" not in text
    for bad in ("0", "4"):
        assert main(dry_run(GRIDS / "tiny.yaml", out, "--seeds", "3", "--first-seed", bad)) == 2
        assert f"--first-seed {bad}: seeds run from --first-seed to --seeds (3)" in capsys.readouterr().err


def test_a_run_whose_model_trained_elsewhere_is_refused_before_any_work(tmp_path, capsys):
    """softmax-covpenalty decodes softmax's model of its seed; a softmax run restored from an archive has finished
    every step but has no checkpoint, so the grid names the run and what to do instead of failing it hours later."""
    stages = ("train", "tune", "translate", "evaluate", "translate.test2017", "evaluate.test2017")

    def finished(run: Path, *done: str) -> None:
        (run / ".stages").mkdir(parents=True, exist_ok=True)
        for stage in done:
            (run / ".stages" / f"{stage}.done").touch()

    out = tmp_path / "exp"
    softmax = out / "runs" / "softmax" / "seed1"
    finished(softmax, *stages)
    argv = dry_run(GRIDS / "table1.yaml", out, "--systems", "softmax-covpenalty")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert (f"softmax-covpenalty/seed1: its steps tune, translate, translate.test2017 need the model of {softmax} "
            f"({softmax / 'best.pt'}), which is not here") in err
    assert "a run restored from an archive keeps no checkpoint" in err and "--first-seed" in err
    assert "softmax/seed1" not in err.replace("runs/softmax/seed1", "")  # softmax itself has nothing left to do
    # its own run restored too, finished: nothing left that loads the model
    finished(out / "runs" / "softmax-covpenalty" / "seed1", *stages)
    assert main(argv) == 0
    capsys.readouterr()
    # a stress test asked of them now would load the model: refused again, for both
    assert main([*argv, "--stress-k", "2"]) == 2
    err = capsys.readouterr().err
    assert "softmax-covpenalty/seed1: its steps stress need the model of" in err
    assert f"softmax/seed1: its steps stress need its model ({softmax / 'best.pt'})" in err
    # the model trained on this machine: it goes on
    (softmax / "best.pt").touch()
    assert main([*argv, "--stress-k", "2"]) == 0


@pytest.mark.parametrize(
    ("system_set", "message"),
    [
        ("[model.attention.transfom=softmax]", "unknown config key model.attention.transfom"),
        ("[model.attention.transform=softmaxx]", "softmaxx"),
        ("[model.attention.transform=csparsemax]", "csparsemax needs model.attention.fertility.strategy"),
        ("[model.attention.transform=csparsemax, model.attention.fertility.strategy=actual]", "strategy=actual"),
        ("[model.attention.fertility.strategy=constant]", "only applies to constrained transforms"),
        ("[model.emb_size=abc]", "model.emb_size: expected an integer"),
    ],
)
def test_bad_system_config_is_named(tmp_path, capsys, system_set, message):
    grid = write(tmp_path, f"name: g\nsystems:\n  - name: ok\n  - name: bad\n    set: {system_set}\n")
    assert main(dry_run(grid, tmp_path / "exp")) == 2
    err = capsys.readouterr().err
    assert message in err and "system 'bad'" in err and str(grid) in err
    assert err.count("\n") == 1


def test_reuse_model_must_match_outside_decode(tmp_path, capsys):
    grid = write(tmp_path, """
name: g
systems:
  - name: a
  - name: b
    reuse_model: a
    set: [model.emb_size=64, model.hidden_size=64, decode.beam=2]
""")
    # (hidden_size too: a tied generator needs both equal, which the Config checks when it is built)
    assert main(dry_run(grid, tmp_path / "exp")) == 2
    assert "reuse_model 'a' was trained with model.emb_size=256 but this system sets model.emb_size=64" in \
        capsys.readouterr().err


def test_cli_set_cannot_override_runner_keys(tmp_path, capsys):
    assert main(dry_run(GRIDS / "tiny.yaml", tmp_path / "exp", "--set", "data.dir=/elsewhere")) == 2
    assert "--set: 'data.dir=/elsewhere': data.dir is set by `scanmt experiment run` itself" in capsys.readouterr().err


def test_run_made_with_another_config_is_not_mixed_in(tmp_path, capsys):
    out = tmp_path / "exp"
    d = out / "runs" / "softmax" / "seed1"
    d.mkdir(parents=True)
    assert main(dry_run(GRIDS / "tiny.yaml", out)) == 0
    capsys.readouterr()
    (d / "spec.json").write_text(json.dumps({"config": {"model": {"emb_size": 8}}, "model_from": None}))
    assert main(dry_run(GRIDS / "tiny.yaml", out)) == 2
    err = capsys.readouterr().err
    # keys the old record lacks are compared at their defaults (data.batch_tokens: 4000)
    assert f"{d} was made with data.batch_tokens=4000 but the grid now gives data.batch_tokens=3000 (and" in err
    assert "use another --out, or delete them" in err


def test_speed_settings_do_not_make_a_run_stale(tmp_path):
    """train.threads and train.precision are the machine's speed settings (bf16 runs at 0.2x fp32's speed on some
    CPUs): a grid continued elsewhere with other values keeps its finished runs; any other key is a change."""
    from types import SimpleNamespace

    from scanmt.config import Config

    cfg = Config.load(REPO / "configs" / "transformer-small.yaml").to_dict()
    spec = SimpleNamespace(dir=tmp_path, config=cfg, model_from=None, tune_penalties=False)
    old = json.loads(json.dumps(cfg))
    old["train"].update(precision="fp32" if cfg["train"]["precision"] == "bf16" else "bf16", threads=7)
    (tmp_path / "spec.json").write_text(json.dumps({"config": old, "model_from": None}), encoding="utf-8")
    assert planning._stale(spec) is None
    old["train"]["lr"] = cfg["train"]["lr"] * 2
    (tmp_path / "spec.json").write_text(json.dumps({"config": old, "model_from": None}), encoding="utf-8")
    assert f"made with train.lr={old['train']['lr']!r}" in planning._stale(spec)


def test_config_key_added_later_is_not_a_change():
    """A key added to Config after a run was made (here train.precision), at a default that keeps the old
    behaviour, does not stop the grid from reusing or resuming that run; the key at another value does."""
    from scanmt.config import Config

    cfg = Config.load(REPO / "configs" / "cpu-small.yaml").to_dict()
    old = json.loads(json.dumps(cfg))
    del old["train"]["precision"]
    assert planning.config_differences(old, cfg) == [("train.precision", None, "fp32")]
    assert planning.config_differences(planning.with_defaults(old), cfg) == []
    old["train"]["precision"] = "bf16"
    assert planning.config_differences(planning.with_defaults(old), cfg) == [("train.precision", "bf16", "fp32")]
    assert planning.with_defaults({"model": {"nope": 1}}) == {"model": {"nope": 1}}  # no longer loads: as it is


def test_reuse_model_listed_before_its_model(tmp_path, capsys):
    grid = write(tmp_path, "name: g\nsystems:\n  - {name: cov, reuse_model: base, tune_penalties: true}\n  - {name: base}\n")
    assert main(dry_run(grid, tmp_path / "exp")) == 0
    assert "cov/seed1" in capsys.readouterr().out


def test_report_lists_only_the_requested_systems(tmp_path):
    """`--systems` choices are recorded (union over invocations); the report leaves the others out."""
    from argparse import Namespace
    from types import SimpleNamespace

    from scanmt.experiments.grid_record import write_record as _record
    from scanmt.experiments.report.collection import collect

    g = load_grid(write(tmp_path, "name: g\nsystems: [{name: a}, {name: b}, {name: c}]\n"))
    out = tmp_path / "exp"
    ctx = SimpleNamespace(src_lang="de", tgt_lang="en", split="test", preset="p.yaml", command="cmd", commit="abc",
                          extra_splits=(), stress_k=())
    args = Namespace(data="multi30k", set=[])

    def spec(name):
        return SimpleNamespace(system=name, config={"model": {"attention": {"transform": "softmax"},
                                                              "output": "entmax15" if name == "a" else "softmax"}})

    def record():
        return json.loads((out / "grids" / "g.json").read_text(encoding="utf-8"))

    _record(out, g, args, ctx, [1], [spec("b")])
    assert record()["requested"] == ["b"]
    _record(out, g, args, ctx, [1], [spec("a")])
    assert record()["requested"] == ["a", "b"]  # grid order, union of both invocations
    assert record()["outputs"] == {"b": "softmax", "a": "entmax15"}  # each system's model.output, kept like transforms
    got = {s.name: s.unfinished for s in collect(out, record())}
    assert got == {"a": ["seed1 (not started)"], "b": ["seed1 (not started)"]}  # c: not asked for, not shown

    # a record from before `requested` existed: the systems with run directories were the ones asked for
    rec = record()
    del rec["requested"]
    (out / "grids" / "g.json").write_text(json.dumps(rec), encoding="utf-8")
    (out / "runs" / "c" / "seed1").mkdir(parents=True)
    _record(out, g, args, ctx, [1], [spec("a")])
    assert record()["requested"] == ["a", "c"]
    assert [s.name for s in collect(out, record())] == ["a", "c"]
    # and a report of such a record shows every system, as before
    assert [s.name for s in collect(out, rec)] == ["a", "b", "c"]


def test_an_invocation_with_no_work_leaves_the_record_naming_the_commands_that_did_work(tmp_path):
    """The grid script reran a finished Transformer grid every session: each rerun rewrote its record's commit,
    date and worktree preset path, and one with other speed settings became "the latest grid command" of the
    report although it trained nothing."""
    from argparse import Namespace
    from types import SimpleNamespace

    from scanmt.experiments.grid_record import write_record as _record

    g = load_grid(write(tmp_path, "name: g\nsystems: [{name: a}]\n"))
    out = tmp_path / "exp"
    spec = SimpleNamespace(system="a", config={"model": {"attention": {"transform": "softmax"}, "output": "softmax"}})

    def ctx(preset, commit, command):
        return SimpleNamespace(src_lang="de", tgt_lang="en", split="test", preset=preset, command=command,
                               commit=commit, extra_splits=(), stress_k=())

    def record():
        return json.loads((out / "grids" / "g.json").read_text(encoding="utf-8"))

    _record(out, g, Namespace(data="d", set=["train.precision=fp32"]), ctx("/w1/configs/p.yaml", "c1", "run 1"),
            [1, 2, 3], [spec])
    first = record()
    # every run finished: another worktree, commit, command and speed setting change nothing
    _record(out, g, Namespace(data="d", set=["train.precision=bf16"]), ctx("/w2/configs/p.yaml", "c2", "run 2"),
            [1], [spec], work=False)
    assert record() == first
    # with work to do the invocation is recorded, and the seeds of the same preset in another worktree are kept
    _record(out, g, Namespace(data="d", set=["train.precision=bf16"]), ctx("/w2/configs/p.yaml", "c2", "run 2"),
            [1], [spec], work=True)
    assert record()["commit"] == "c2" and record()["commands"] == ["run 1", "run 2"]
    assert record()["seeds"] == [1, 2, 3] and record()["set"] == ["train.precision=bf16"]
    # a grid file that changed (a new title, say) is recorded even with no work
    g2 = load_grid(write(tmp_path, "name: g\ntitle: Another title\nsystems: [{name: a}]\n"))
    _record(out, g2, Namespace(data="d", set=[]), ctx("/w3/configs/p.yaml", "c3", "run 3"), [1], [spec], work=False)
    assert record()["title"] == "Another title" and "Another title" in (out / "grids" / "g.yaml").read_text()


def test_extra_splits_are_checked_before_any_work(tmp_path, capsys):
    out = tmp_path / "exp"
    assert main(dry_run(GRIDS / "tiny.yaml", out, "--extra-splits", "test2017", "test2099")) == 2
    err = capsys.readouterr().err
    assert "--extra-splits test2099: Multi30k de-en has no such split (available: train, valid, test, test2017)" in err
    assert err.count("\n") == 1 and not out.exists()
    assert main(dry_run(GRIDS / "tiny.yaml", out, "--pair", "en-cs", "--extra-splits", "test2017")) == 2
    assert "(available: train, valid, test)" in capsys.readouterr().err  # test_2017_flickr has no Czech
    assert main(dry_run(GRIDS / "tiny.yaml", out, "--extra-splits", "test")) == 2
    assert "that is the main split" in capsys.readouterr().err


def test_extra_splits_default_and_none(tmp_path, capsys):
    out = tmp_path / "exp"
    assert main(dry_run(GRIDS / "tiny.yaml", out)) == 0  # default: test2017, which Multi30k de-en has
    text = capsys.readouterr().out
    assert "split test (extra: test2017)" in text
    assert "--input " + str(out.resolve() / "shared" / "data" / "test2017.raw.de") in text
    assert "--json " + str(out.resolve() / "runs" / "softmax" / "seed1" / "eval.test2017.json") in text
    assert main(dry_run(GRIDS / "tiny.yaml", out, "--extra-splits")) == 0  # the option alone: none
    text = capsys.readouterr().out
    assert "(extra: none)" in text and "test2017" not in text
    assert main(dry_run(GRIDS / "tiny.yaml", out, "--pair", "fr-cs")) == 0  # no test2017 for Czech: none
    assert "(extra: none)" in capsys.readouterr().out


def test_resolve_extra_splits():
    avail = ["train", "valid", "test", "test2017"]
    assert planning.resolve_extra_splits(None, "test", avail, "d") == ("test2017",)
    assert planning.resolve_extra_splits(None, "test2017", avail, "d") == ()
    assert planning.resolve_extra_splits([], "test", avail, "d") == ()
    assert planning.resolve_extra_splits(["test2017", "valid", "test2017"], "test", avail, "d") == ("test2017", "valid")
    with pytest.raises(ConfigError, match=r"--split test2016: d has no such split \(available: train, valid, test, "):
        planning.resolve_extra_splits(None, "test2016", avail, "d")


def test_a_finished_run_without_an_asked_extra_split_resumes(tmp_path):
    """DONE without the split's numbers in metrics.json (made before, or killed before metrics.json): resume."""
    spec = run_spec.RunSpec.from_dict({
        "grid": "g", "system": "s", "label": "s", "seed": 1, "run_dir": str(tmp_path), "preset": "p", "overrides": [],
        "config": {}, "split": "test", "src_lang": "de", "tgt_lang": "en", "tune_penalties": False,
        "model_from": None, "train": {"command": "train", "config": "p", "out": str(tmp_path)}, "tune": None,
        "translate": {"command": "translate", "model": "m", "input": "i", "output": "o"},
        "evaluate": {"command": "evaluate"}, "command": "c", "commit": "x",
        "extra_splits": {"test2017": {"translate": {"command": "translate", "model": "m", "input": "i2", "output": "o2"},
                                      "evaluate": {"command": "evaluate", "hyp": "o2"}}},
    })
    assert [s for s, _ in spec.steps()] == ["train", "tune", "translate", "evaluate", "translate.test2017",
                                             "evaluate.test2017"]
    (tmp_path / "DONE").write_text("x\n")
    common.write_json(tmp_path / "metrics.json", {"bleu": 1.0})
    common.write_json(layout.stage_marker(tmp_path, "train"), {})
    assert run_state_module.run_status(spec) == "resume" and run_state_module.missing_splits(spec) == ["test2017"]
    assert run_state_module.resume_note(spec) == ", adding test set(s) test2017" and not run_state_module.needs_training(spec)
    common.write_json(tmp_path / "metrics.json", {"bleu": 1.0, "test_sets": {"test2017": {"bleu": 2.0}}})
    assert run_state_module.run_status(spec) == "done"
    old = spec.to_dict()
    del old["extra_splits"]  # a spec.json from before extra splits: none
    assert run_spec.RunSpec.from_dict(old).extra_splits == {} and run_state_module.run_status(run_spec.RunSpec.from_dict(old)) == "done"


def test_mirror_follows_a_preparation_that_gained_a_split(small_data_dir, tmp_path):
    """`--data PATH` mirrored before PATH had test2017: the next grid run links the new split's files too."""
    import shutil

    from scanmt.experiments import shared

    src = tmp_path / "prepared"
    shutil.copytree(small_data_dir, src, ignore=shutil.ignore_patterns("align", "fertility"))
    paths = shared.SharedPaths(tmp_path / "exp")
    said: list[str] = []
    shared.prepare_data(paths, str(src), None, mirror=None, vocab_size=2000, say=said.append)
    shared.prepare_data(paths, str(src), None, mirror=None, vocab_size=2000, say=said.append)
    assert said[-1] == "[shared] prepare: done before, reused"
    meta = json.loads((src / "meta.json").read_text(encoding="utf-8"))
    meta["splits"].append("test2017")
    (src / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    for lang in ("de", "en"):
        shutil.copy(src / f"test.raw.{lang}", src / f"test2017.raw.{lang}")
    shared.prepare_data(paths, str(src), None, mirror=None, vocab_size=2000, say=said.append)
    assert "[shared] prepare: running" in said[-2:][0] and (paths.data / "test2017.raw.de").is_symlink()


def test_every_distinct_grid_command_is_recorded_and_reported(tmp_path):
    """A grid continued with other options keeps each invocation; the report lists them, oldest first."""
    from argparse import Namespace
    from types import SimpleNamespace

    from scanmt.experiments.grid_record import write_record as _record
    from scanmt.experiments.report.tables import _grid_commands

    g = load_grid(write(tmp_path, "name: g\nsystems: [{name: a}]\n"))
    out = tmp_path / "exp"
    args = Namespace(data="multi30k", set=[])
    spec = SimpleNamespace(system="a", config={"model": {"attention": {"transform": "softmax"}, "output": "softmax"}})

    def run(command):
        ctx = SimpleNamespace(src_lang="de", tgt_lang="en", split="test", preset="p.yaml", command=command,
                              commit="abc", extra_splits=(), stress_k=())
        _record(out, g, args, ctx, [1], [spec])
        return json.loads((out / "grids" / "g.json").read_text(encoding="utf-8"))

    assert run("run --workers 2")["commands"] == ["run --workers 2"]
    assert _grid_commands(run("run --workers 2")) == ["Grid command: `run --workers 2`"]
    rec = run("run --workers 1")
    assert rec["commands"] == ["run --workers 2", "run --workers 1"] and rec["command"] == "run --workers 1"
    assert run("run --workers 2")["commands"] == ["run --workers 1", "run --workers 2"]  # the latest last
    assert _grid_commands(rec)[2:] == ["- `run --workers 2`", "- `run --workers 1`"]
    # a record from before `commands` existed has its last command only
    assert _grid_commands({"command": "old"}) == ["Grid command: `old`"]


def test_the_shared_alignment_gives_eflomal_a_cpu_per_sampler_whatever_the_queue_exported(small_data_dir, tmp_path,
                                                                                           monkeypatch):
    """A queue exports OMP_NUM_THREADS=1 for its training runs; the shared alignment, which runs alone before them,
    starts eflomal with one OpenMP thread per sampler up to the CPUs given, and leaves the variable as it was."""
    import shutil
    import subprocess

    from scanmt.experiments import shared

    src = tmp_path / "prepared"
    shutil.copytree(small_data_dir, src, ignore=shutil.ignore_patterns("align", "fertility"))
    paths = shared.SharedPaths(tmp_path / "exp")
    shared.prepare_data(paths, str(src), None, mirror=None, vocab_size=2000, say=lambda _: None)
    seen: list[str | None] = []
    real_run = subprocess.run

    def run(cmd, *args, **kwargs):
        if "eflomal" in Path(str(cmd[0])).name:
            seen.append((kwargs.get("env") or os.environ).get("OMP_NUM_THREADS"))
        return real_run(cmd, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    said: list[str] = []
    shared.align(paths, {"samplers": 3, "rel_iterations": 0.2}, said.append, cpus=2)
    assert seen and set(seen) == {"2"}, seen  # both levels, each split: 2 threads for 3 samplers on 2 CPUs
    assert os.environ["OMP_NUM_THREADS"] == "1"
    assert said[-1].startswith("[shared] align: finished")
    shared.align(paths, {"samplers": 3, "rel_iterations": 0.2}, said.append, cpus=8)  # the thread count is no parameter
    assert said[-1] == "[shared] align: done before, reused"
