"""``scanmt experiment archive|restore`` on a made-up experiment folder: what travels, what does not,
and every refusal (the tiny grid test packs and restores a real one and reports it again)."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

from scanmt.cli.main import main
from scanmt.data.vocab import SPECIALS
from scanmt.errors import ConfigError, DataError
from scanmt.experiments import archive
from scanmt.experiments.archive import shared_work as archive_shared
from scanmt.experiments import shared as shared_steps
from scanmt.experiments.shared import SharedPaths
from scanmt.fertility.predictor import FertilityPredictor

VOCAB = [*SPECIALS, "a", "b", "c"]
MODEL = {"emb_size": 4, "hidden_size": 4, "layers": 1, "max_fertility": 3}


def predictor_weights(nudge: float = 0.0) -> dict[str, torch.Tensor]:
    """A small real fertility predictor's weights; ``nudge`` is added to its output bias (another
    processor's last bits, or another training)."""
    torch.manual_seed(0)
    weights = FertilityPredictor(len(VOCAB), 4, 4, 1, 0.0, 3).state_dict()
    weights["out.bias"] = weights["out.bias"] + torch.tensor([nudge, 0.0, 0.0, -nudge])
    return weights


WEIGHTS = predictor_weights()


class FakeTrainer:
    """Stands in for :func:`scanmt.experiments.shared.train_predictor`: writes a predictor of these weights and
    the step's marker."""

    def __init__(self, weights: dict[str, torch.Tensor]) -> None:
        self.weights, self.calls = weights, []

    def __call__(self, paths: SharedPaths, overrides: list[str], say) -> Path:
        self.calls.append(list(overrides))
        paths.predictor_dir.mkdir(parents=True, exist_ok=True)
        torch.save({"config": {"model": MODEL}, "vocab": VOCAB, "model": self.weights,
                    "optimizer": {"state": torch.zeros(9)}, "version": 1}, paths.predictor)
        argv = ["fertility", "--data", str(paths.data), "--train-predictor", str(paths.predictor_dir)]
        argv += ["--set", *overrides, "--resume"] if overrides else []  # `--set A B`, as a request writes it
        paths.marker("predictor").write_text(json.dumps({"params": {"argv": argv}}))
        return paths.predictor


def make_experiment(root: Path) -> Path:
    """``root/exp``: mirrored prepared data, shared work with a predictor, three finished runs, one unfinished."""
    data = root / "data"
    data.mkdir()
    for name, text in (("meta.json", '{"src_lang": "de"}\n'), ("train.bpe.de", "a b\n"),
                       ("valid.bpe.de", "a b c\nc a\n\nb\n"), ("spm.model", "model of /tmp/x\n")):
        (data / name).write_text(text)
    out = root / "exp"
    mirror = out / "shared" / "data"
    mirror.mkdir(parents=True)
    (mirror / ".mirror-of").write_text(f"{data}\n")
    for f in data.iterdir():
        (mirror / f.name).symlink_to(f)
    (mirror / "align" / "word").mkdir(parents=True)
    (mirror / "align" / "train.word.align").write_text("0-0 1-1\n")
    (mirror / "align" / "word" / "priors.gz").write_bytes(b"\x1f\x8bpriors")
    (mirror / "fertility").mkdir()
    (mirror / "fertility" / "train.fert").write_text("1 1\n")
    (out / "shared" / ".done").mkdir()
    (out / "shared" / ".done" / "align.json").write_text('{"params": {}}\n')
    (out / "shared" / ".done" / "fertility-predicted-add1.json").write_text('{"params": {}}\n')
    FakeTrainer(WEIGHTS)(SharedPaths(out), ["train.threads=1", "train.max_steps=30"], print)
    torch.save({"config": {"h": 3}, "model": WEIGHTS, "optimizer": {}, "version": 1},
               out / "shared" / "predictor" / "last.pt")
    (out / "grids").mkdir()
    (out / "grids" / "g.json").write_text('{"name": "g", "seeds": [1, 2]}\n')
    (out / "grids" / "g.yaml").write_text("name: g\n")
    for system, seed, done in (("softmax", 1, True), ("csparsemax", 1, True), ("csparsemax", 2, True),
                               ("softmax", 2, False)):
        run = out / "runs" / system / f"seed{seed}"
        (run / ".stages").mkdir(parents=True)
        (run / "spec.json").write_text('{"split": "test"}\n')
        for split in ("test", "test2017"):
            (run / f"{split}.attn.npz").write_bytes(b"PK" + split.encode())
        (run / ".stages" / "train.done").write_text("{}\n")
        (run / "best.pt").write_bytes(b"x" * 1000)
        (run / "last.pt").write_bytes(b"x" * 1000)
        (run / "log.txt").write_text(f"{system} {seed}\n")
        if done:
            (run / "test.hyp.en").write_text(f"a {system}\n")
            (run / "metrics.json").write_text(json.dumps({"bleu": 40.0 + seed}) + "\n")
            (run / "DONE").write_text("")
    return out


def tree(root: Path) -> dict[str, bytes | str]:
    """Every file below ``root`` (a symbolic link as its target), checkpoints and lock files left out."""
    out: dict[str, bytes | str] = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.suffix == ".pt" or p.name == ".lock":
            continue
        if p.is_symlink():
            out[rel] = "-> " + str(p.readlink())
        elif p.is_file():
            out[rel] = p.read_bytes()
    return out


def test_pack_restore_round_trip(tmp_path):
    out = make_experiment(tmp_path)
    dest = tmp_path / "archive"
    for link in (out / "shared" / "data").iterdir():  # links made long before the restore that remakes them
        if link.is_symlink():
            os.utime(link, (1e9, 1e9), follow_symlinks=False)
    s = archive.pack(out, dest)
    assert s.shared == "packed" and s.added == ["csparsemax/seed1", "csparsemax/seed2", "softmax/seed1"]
    assert s.kept == [] and s.unfinished == ["softmax/seed2"]
    with tarfile.open(dest / "runs" / "softmax" / "seed1.tar.gz") as tar:  # seed 1 keeps the figures' attention
        assert sorted(tar.getnames()) == [".stages/train.done", "DONE", "log.txt", "metrics.json", "spec.json",
                                          "test.attn.npz", "test.hyp.en"]
    with tarfile.open(dest / "runs" / "csparsemax" / "seed2.tar.gz") as tar:
        assert not [n for n in tar.getnames() if n.endswith(".attn.npz")]
    with tarfile.open(dest / archive.SHARED_TAR) as tar:  # the alignments, not the predictor nor its caches
        names = tar.getnames()
        assert "data/align/train.word.align" in names and ".done/align.json" in names
        assert not [n for n in names if n.startswith(("predictor/", "data/fertility/", ".done/predictor",
                                                      ".done/fertility"))], names
        assert tar.getmember("data/train.bpe.de").issym()  # the mirror travels as its links
        assert tar.getmember("data/train.bpe.de").mtime == 0  # a restored link cannot get its time back
    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["shared"]["predictor_set"] == ["train.threads=1", "train.max_steps=30"]
    assert manifest["out"] == str(out.resolve())
    assert set(manifest["runs"]) == {"softmax/seed1", "csparsemax/seed1", "csparsemax/seed2"}
    assert set(manifest["shared"]["data"]["files"]) == {"meta.json", "train.bpe.de", "valid.bpe.de"}  # not spm.model
    assert manifest["format"] == 3 and manifest["shared"]["predictor"]["tokens"] == 6  # valid's 6 source tokens
    probe = np.load(dest / archive.PREDICTOR_FERTILITIES)
    predictor = FertilityPredictor(len(VOCAB), 4, 4, 1, 0.0, 3).eval()
    predictor.load_state_dict(WEIGHTS)
    with torch.no_grad():  # each valid sentence alone, no `add`: the probe is their expected fertilities in order
        alone = [predictor.expected(torch.tensor([[VOCAB.index(t) for t in line]]), torch.tensor([len(line)]))[0]
                 for line in (["a", "b", "c"], ["c", "a"], ["b"])]
    np.testing.assert_allclose(probe, torch.cat(alone).numpy(), rtol=0, atol=1e-6)

    # packing again changes no byte; a run whose metrics changed is packed again
    before = (dest / "runs" / "softmax" / "seed1.tar.gz").read_bytes()
    assert archive.pack(out, dest).kept == ["csparsemax/seed1", "csparsemax/seed2", "softmax/seed1"]
    assert (dest / "runs" / "softmax" / "seed1.tar.gz").read_bytes() == before
    (out / "runs" / "softmax" / "seed1" / "metrics.json").write_text('{"bleu": 41.5}\n')
    assert archive.pack(out, dest).updated == ["softmax/seed1"]

    # a fresh machine: the folder is gone, the archive brings back everything but the checkpoints
    original = tree(out)
    shutil.move(out, tmp_path / "old")
    trainer = FakeTrainer(WEIGHTS)  # deterministic: retrained from the same alignments, the same weights
    s = archive.restore(dest, out, train_predictor=trainer)
    assert s.shared == "restored, fertility predictor retrained: the same weights" and trainer.calls == [
        ["train.threads=1", "train.max_steps=30"]]
    assert s.added == ["csparsemax/seed1", "csparsemax/seed2", "softmax/seed1"]
    restored = tree(out)
    behind = {k for k in original if k.startswith(("runs/softmax/seed2/", "shared/data/fertility/"))
              or k == "shared/.done/fertility-predicted-add1.json"
              or (k.endswith(".attn.npz") and not k.endswith("seed1/test.attn.npz"))}
    assert len(behind) == 11 and {k: v for k, v in original.items() if k not in behind} == restored
    assert not (out / "runs" / "softmax" / "seed1" / "best.pt").exists()
    assert archive.shared_identity(out / "shared") == archive.shared_identity(tmp_path / "old" / "shared")
    # the restored folder packs to the same bytes (whole-second file times travel with the files)
    archive.pack(out, tmp_path / "again")
    for key in ("softmax/seed1", "csparsemax/seed2"):
        tar = Path("runs") / f"{key}.tar.gz"
        assert (tmp_path / "again" / tar).read_bytes() == (dest / tar).read_bytes()
    assert (tmp_path / "again" / archive.SHARED_TAR).read_bytes() == (dest / archive.SHARED_TAR).read_bytes()
    # restoring again keeps what is there
    assert archive.restore(dest, out).kept == ["csparsemax/seed1", "csparsemax/seed2", "softmax/seed1"]


def test_only_the_figure_pairs_attention_is_packed(tmp_path):
    """A grid that names its figure pair keeps seed 1's attention of those two systems only (a dense test
    attention is most of a run's archive); a second grid's pair counts too, and one grid without a pair keeps
    every system's, since its report picks the pair among the systems that finished."""
    out = make_experiment(tmp_path)
    sparse = out / "runs" / "sparsemax" / "seed1"
    shutil.copytree(out / "runs" / "csparsemax" / "seed1", sparse)
    (out / "grids" / "g.json").write_text('{"name": "g", "seeds": [1, 2], "figure": ["softmax", "csparsemax"]}\n')
    assert archive.figure_systems(out) == {"softmax", "csparsemax"}

    def packed_attention(dest: Path) -> dict[str, list[str]]:
        archive.pack(out, dest)
        found = {}
        for tar_path in sorted((dest / "runs").rglob("*.tar.gz")):
            with tarfile.open(tar_path) as tar:
                found[tar_path.relative_to(dest / "runs").as_posix()] = sorted(
                    n for n in tar.getnames() if n.endswith(".attn.npz"))
        return found

    assert packed_attention(tmp_path / "a") == {
        "csparsemax/seed1.tar.gz": ["test.attn.npz"], "csparsemax/seed2.tar.gz": [],
        "softmax/seed1.tar.gz": ["test.attn.npz"], "sparsemax/seed1.tar.gz": []}
    (out / "grids" / "h.json").write_text('{"name": "h", "figure": ["sparsemax", "softmax"]}\n')
    assert archive.figure_systems(out) == {"softmax", "csparsemax", "sparsemax"}
    assert packed_attention(tmp_path / "b")["sparsemax/seed1.tar.gz"] == ["test.attn.npz"]
    (out / "grids" / "h.json").write_text('{"name": "h"}\n')
    assert archive.figure_systems(out) is None
    assert packed_attention(tmp_path / "c")["sparsemax/seed1.tar.gz"] == ["test.attn.npz"]


def test_refusals(tmp_path):
    out = make_experiment(tmp_path)
    dest = tmp_path / "archive"
    archive.pack(out, dest)

    with pytest.raises(ConfigError, match="restore it with --out"):
        archive.restore(dest, tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere").exists()  # refused before anything was made
    with pytest.raises(DataError, match="not a scanmt experiment folder"):
        archive.pack(tmp_path / "data", tmp_path / "a2")
    with pytest.raises(DataError, match="no manifest.json"):
        archive.restore(tmp_path / "data", out)

    # another machine aligned afresh: its runs are not comparable with the archived ones
    (out / "shared" / "data" / "align" / "train.word.align").write_text("0-1 1-0\n")
    with pytest.raises(DataError, match="differs from the shared work archived"):
        archive.pack(out, dest)
    with pytest.raises(DataError, match="differs from the shared work archived"):
        archive.restore(dest, out)
    # a predictor retrained to other fertilities is refused; one that differs in the last bits is the same
    (out / "shared" / "data" / "align" / "train.word.align").write_text("0-0 1-1\n")
    FakeTrainer(predictor_weights(nudge=0.5))(SharedPaths(out), [], print)
    with pytest.raises(DataError, match=r"expected fertilities on the valid split differ by up to 0\.\d+ "
                                        r"\(tolerance 0\.001\)"):
        archive.pack(out, dest)
    FakeTrainer(predictor_weights(nudge=1e-6))(SharedPaths(out), [], print)
    assert archive.pack(out, dest).shared.startswith(
        "same (fertility predictor: other weights, the same fertilities: largest difference ")

    # the prepared data changed or is gone
    shutil.rmtree(out)
    (tmp_path / "data" / "train.bpe.de").write_text("a c\n")
    with pytest.raises(DataError, match=r"train\.bpe\.de differs from the file its runs read"):
        archive.restore(dest, out)
    shutil.rmtree(tmp_path / "data")
    with pytest.raises(DataError, match="which is missing: prepare it there"):
        archive.restore(dest, out)


def test_a_predictor_that_retrains_to_other_weights_is_refused(tmp_path):
    out = make_experiment(tmp_path)
    dest = tmp_path / "archive"
    archive.pack(out, dest)
    shutil.rmtree(out)
    with pytest.raises(DataError, match="or the fertility predictor retrained from them, differ from those of the "
                                        "archived runs"):
        archive.restore(dest, out, train_predictor=FakeTrainer(predictor_weights(nudge=0.5)))
    assert not (out / "shared").exists() and not (out / "runs").exists()  # nothing restored


def test_a_predictor_retrained_to_the_last_bits_restores(tmp_path):
    """Retrained on another processor the predictor's weights differ in their last bits: the same fertilities."""
    out = make_experiment(tmp_path)
    dest = tmp_path / "archive"
    archive.pack(out, dest)
    shutil.rmtree(out)
    s = archive.restore(dest, out, train_predictor=FakeTrainer(predictor_weights(nudge=1e-6)))
    assert s.shared.startswith("restored, fertility predictor retrained: other weights, the same fertilities: "
                               "largest difference ") and s.shared.endswith(" over 6 valid tokens")
    gap = float(s.shared.split("largest difference ")[1].split()[0])
    assert 0 < gap < 1e-5
    assert s.added == ["csparsemax/seed1", "csparsemax/seed2", "softmax/seed1"]


def test_a_predictor_trained_after_the_last_pack_is_added_not_refused(tmp_path):
    """A grid queue packs every few minutes; the KFTT grid packed its softmax runs before the predictor's step,
    and every later pack was refused ("one has a fertility predictor and the other none")."""
    out = make_experiment(tmp_path)
    shutil.rmtree(out / "shared" / "predictor")
    (out / "shared" / ".done" / "predictor.json").unlink()
    shutil.rmtree(out / "runs" / "csparsemax")  # the runs that need a predictor come after it
    dest = tmp_path / "archive"
    assert archive.pack(out, dest).shared == "packed"
    assert json.loads((dest / "manifest.json").read_text())["shared"]["predictor"] is None
    FakeTrainer(WEIGHTS)(SharedPaths(out), ["train.threads=1"], print)
    s = archive.pack(out, dest)
    assert s.shared == "same, with the fertility predictor trained since the last pack"
    shared = json.loads((dest / "manifest.json").read_text())["shared"]
    assert shared["predictor"]["tokens"] == 6 and shared["predictor_set"] == ["train.threads=1"]
    assert (dest / archive.PREDICTOR_FERTILITIES).is_file()
    assert archive.pack(out, dest).shared == "same"  # and from then on it is checked like any predictor
    # restored elsewhere, the predictor is retrained and checked against the added record
    shutil.rmtree(out)
    assert archive.restore(dest, out, train_predictor=FakeTrainer(WEIGHTS)).shared == (
        "restored, fertility predictor retrained: the same weights")


@pytest.mark.parametrize("runs_only", [False, True])
def test_a_predictor_still_training_is_packed_as_none_until_its_step_finishes(tmp_path, runs_only):
    """The KFTT queue's 10-minute packer met the predictor in training (``best.pt`` written at its first
    validation, the step marker not yet) and failed: "no step marker ..., so it cannot be retrained on restore".
    A predictor without its marker is a step still running: packed as none, and taken in once the step ends."""
    out = make_experiment(tmp_path)
    marker = out / "shared" / ".done" / "predictor.json"
    marker.unlink()  # best.pt is there, the step has not finished
    shutil.rmtree(out / "runs" / "csparsemax")  # the runs that need a predictor come after its step
    dest = tmp_path / "archive"
    archive.pack(out, dest, runs_only=runs_only)
    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["shared"]["predictor"] is None and manifest["shared"]["predictor_set"] is None
    if runs_only:  # each run records the shared work it trained on: no predictor
        assert [entry["shared"]["predictor"] for entry in manifest["runs"].values()] == [None]  # softmax/seed1
    assert not (dest / archive.PREDICTOR_FERTILITIES).exists()
    FakeTrainer(WEIGHTS)(SharedPaths(out), ["train.threads=1"], print)  # the step ends: best.pt and its marker
    s = archive.pack(out, dest, runs_only=runs_only)
    shared = json.loads((dest / "manifest.json").read_text())["shared"]
    assert shared["predictor"]["weights"] == archive_shared.predictor_digest(out / "shared" / "predictor" / "best.pt")
    assert shared["predictor_set"] == ["train.threads=1"]
    assert s.shared == ("not packed (runs only), other than at the last pack (aligned afresh): new runs record theirs"
                        if runs_only else "same, with the fertility predictor trained since the last pack")


def test_an_archived_predictor_missing_here_is_still_refused(tmp_path):
    out = make_experiment(tmp_path)
    dest = tmp_path / "archive"
    archive.pack(out, dest)
    shutil.rmtree(out / "shared" / "predictor")
    with pytest.raises(DataError, match="one has a fertility predictor and the other none"):
        archive.pack(out, dest)
    # other alignments with a new predictor are no growth either
    (tmp_path / "b").mkdir()
    out2 = make_experiment(tmp_path / "b")
    dest2 = tmp_path / "archive2"
    shutil.rmtree(out2 / "shared" / "predictor")
    (out2 / "shared" / ".done" / "predictor.json").unlink()
    shutil.rmtree(out2 / "runs" / "csparsemax")
    archive.pack(out2, dest2)
    FakeTrainer(WEIGHTS)(SharedPaths(out2), [], print)
    (out2 / "shared" / "data" / "align" / "train.word.align").write_text("0-1 1-0\n")
    with pytest.raises(DataError, match="the alignments differ"):
        archive.pack(out2, dest2)


def test_a_format_1_manifest_is_read_and_upgraded(tmp_path):
    """Session 19's archives recorded one digest of the alignments and the predictor's weights."""
    out = make_experiment(tmp_path)
    dest = tmp_path / "archive"
    archive.pack(out, dest)
    manifest = json.loads((dest / "manifest.json").read_text())
    (dest / archive.PREDICTOR_FERTILITIES).unlink()
    old = {"identity": archive.shared_identity(out / "shared"), "data": manifest["shared"]["data"],
           "predictor_set": manifest["shared"]["predictor_set"]}
    (dest / "manifest.json").write_text(json.dumps({**manifest, "format": 1, "shared": old}))
    assert archive.pack(out, dest).shared == "same, manifest upgraded to format 3"
    upgraded = json.loads((dest / "manifest.json").read_text())
    assert upgraded["format"] == 3 and upgraded["shared"] == manifest["shared"]
    assert (dest / archive.PREDICTOR_FERTILITIES).exists()
    # format 1 compares weights bitwise: another predictor is refused
    (dest / "manifest.json").write_text(json.dumps({**manifest, "format": 1, "shared": old}))
    FakeTrainer(predictor_weights(nudge=1e-6))(SharedPaths(out), [], print)
    with pytest.raises(DataError, match="the alignments or the fertility predictor's weights differ"):
        archive.pack(out, dest)
    (dest / "manifest.json").write_text(json.dumps({**manifest, "format": 5}))
    with pytest.raises(DataError, match="not a scanmt experiment archive of format 1 or 2 or 3 or 4"):
        archive.pack(out, dest)


def test_unfinished_run_in_the_way_and_a_bad_member(tmp_path):
    out = make_experiment(tmp_path)
    dest = tmp_path / "archive"
    archive.pack(out, dest)
    (out / "runs" / "softmax" / "seed1" / "DONE").unlink()
    with pytest.raises(DataError, match="an unfinished run where"):
        archive.restore(dest, out)
    shutil.rmtree(out / "runs")
    with tarfile.open(dest / "runs" / "softmax" / "seed1.tar.gz", "w:gz") as tar:
        info = tarfile.TarInfo("../escape")
        tar.addfile(info)
    with pytest.raises(DataError, match="unexpected member '../escape'"):
        archive.restore(dest, out)
    assert not (tmp_path / "escape").exists() and not (out / "runs" / "softmax" / "seed1").exists()
    assert not list((out / "runs" / "softmax").glob(".*restoring"))
    (dest / "runs" / "softmax" / "seed1.tar.gz").write_bytes(b"\x1f\x8b\x08cut short")
    with pytest.raises(DataError, match=r"seed1\.tar\.gz: cannot be unpacked"):
        archive.restore(dest, out)
    (dest / "runs" / "softmax" / "seed1.tar.gz").unlink()
    with pytest.raises(DataError, match=r"seed1\.tar\.gz: missing, though manifest\.json lists it"):
        archive.restore(dest, out)


def test_command_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(shared_steps, "train_predictor", FakeTrainer(WEIGHTS))
    out = make_experiment(tmp_path)
    dest = tmp_path / "archive"
    assert main(["experiment", "archive", str(out), "--to", str(dest)]) == 0
    text = capsys.readouterr().out
    assert "shared work packed; runs added 3, packed again 0, unchanged 0; 1 unfinished left out" in text
    assert "  unfinished: softmax/seed2" in text
    shutil.rmtree(out)
    assert main(["experiment", "restore", str(dest), "--out", str(out)]) == 0
    assert ("shared work restored, fertility predictor retrained: the same weights; runs restored 3, already there 0"
            in capsys.readouterr().out)
    assert main(["experiment", "restore", str(dest), "--out", str(tmp_path / "x")]) == 2
    assert "restore it with --out" in capsys.readouterr().err


def test_the_repository_keeps_archived_runs():
    """``runs/`` is ignored (training output), but not the runs of an archive under ``archive/`` (git)."""
    import subprocess

    repo = Path(__file__).resolve().parents[2]
    if not (repo / ".git").exists():
        pytest.skip(f"{repo} is not a git checkout: its .gitignore cannot be asked")
    ask = lambda path: subprocess.run(["git", "check-ignore", "-q", path], cwd=repo).returncode  # noqa: E731
    assert ask("runs/table1/runs/softmax/seed1/best.pt") == 0
    assert ask("archive/table1/runs/softmax/seed1.tar.gz") == 1


def identity(out: Path) -> dict[str, str | None]:
    """The shared work's identity of ``out`` as an archive of runs only records it, computed here independently
    of the archive: the digest of every alignment file, and of the predictor's weights."""
    return {"alignments": archive_shared.alignments_digest(out / "shared"),
            "predictor": archive_shared.predictor_digest(out / "shared" / "predictor" / "best.pt")}


def test_runs_only_pack_restore_realign_and_pack_again(tmp_path, capsys):
    out = make_experiment(tmp_path)
    (tmp_path / "data" / "meta.json").write_text('{"src_lang": "de", "tgt_lang": "en", "splits": ["train", '
                                                 '"valid"]}\n')  # what `prepare` mirrors again on restore
    dest = tmp_path / "archive"
    first = identity(out)
    assert main(["experiment", "archive", str(out), "--to", str(dest), "--runs-only"]) == 0
    assert ("shared work not packed (an archive of runs only), recorded; runs added 3, packed again 0, unchanged 0"
            in capsys.readouterr().out)
    assert sorted(p.name for p in dest.iterdir()) == ["grids", "manifest.json", "runs"]  # no alignments, no probe
    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["runs_only"] is True and manifest["shared"]["data"]["dir"] == str(tmp_path / "data")
    assert {key: entry["shared"] for key, entry in manifest["runs"].items()} == {
        key: first for key in ("softmax/seed1", "csparsemax/seed1", "csparsemax/seed2")}

    # a new machine: the folder is gone; restore prepares the data and puts the runs back, each with its origin
    original = tree(out)
    shutil.move(out, tmp_path / "old")
    assert main(["experiment", "restore", str(dest), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert ("shared work not in the archive (runs only): data prepared, alignments and fertility predictor left to "
            "`experiment run`; runs restored 3, already there 0") in text
    assert "each restored run records the shared work it trained on in RUN/shared-origin.json" in text
    restored = tree(out)
    for key in ("softmax/seed1", "csparsemax/seed1", "csparsemax/seed2"):
        run = out / "runs" / key
        assert json.loads((run / "shared-origin.json").read_text()) == {**first, "archive": str(dest)}
        assert archive_shared.read_origin(run) == {**first, "archive": str(dest)}
        files = {k: v for k, v in restored.items() if k.startswith(f"runs/{key}/") and not k.endswith("origin.json")}
        assert files == {k: v for k, v in original.items() if k.startswith(f"runs/{key}/") and not k.endswith(
            ("best.pt", "last.pt")) and not (k.endswith("attn.npz") and not k.endswith("seed1/test.attn.npz"))}
    assert not (out / "runs" / "softmax" / "seed2").exists()  # unfinished: not archived
    assert (out / "shared" / "data" / "train.bpe.de").resolve() == tmp_path / "data" / "train.bpe.de"
    assert (out / "shared" / ".done" / "prepare.json").exists()  # `experiment run` reuses the step
    assert not (out / "shared" / "data" / "align").exists() and not (out / "shared" / "predictor").exists()

    # `experiment run` aligns afresh and trains another predictor and softmax seed 2: packing again takes them,
    # and keeps what each run trained on
    align = out / "shared" / "data" / "align"
    align.mkdir()
    (align / "train.word.align").write_text("0-1 1-0\n")
    FakeTrainer(predictor_weights(nudge=0.5))(SharedPaths(out), [], print)
    second = identity(out)
    assert second["alignments"] != first["alignments"] and second["predictor"] != first["predictor"]
    run = out / "runs" / "softmax" / "seed2"
    (run / ".stages").mkdir(parents=True)
    (run / "spec.json").write_text('{"split": "test"}\n')
    (run / "metrics.json").write_text('{"bleu": 42.5}\n')
    (run / "DONE").write_text("")
    s = archive.pack(out, dest)  # an archive keeps its kind: no flag needed
    assert s.shared == "not packed (runs only), other than at the last pack (aligned afresh): new runs record theirs"
    assert s.added == ["softmax/seed2"] and s.kept == ["csparsemax/seed1", "csparsemax/seed2", "softmax/seed1"]
    runs = json.loads((dest / "manifest.json").read_text())["runs"]
    assert runs["softmax/seed2"]["shared"] == second and runs["softmax/seed1"]["shared"] == first
    # a run restored here and packed again (its metrics changed) keeps the shared work it trained on
    (out / "runs" / "softmax" / "seed1" / "metrics.json").write_text('{"bleu": 41.5}\n')
    assert archive.pack(out, dest).updated == ["softmax/seed1"]
    assert json.loads((dest / "manifest.json").read_text())["runs"]["softmax/seed1"]["shared"] == first

    # a third machine: every run says which shared work it trained on
    third = tmp_path / "third"
    shutil.move(out, third)
    archive.restore(dest, out)
    assert {key: archive_shared.read_origin(out / "runs" / key) for key in runs} == {
        **{key: {**first, "archive": str(dest)} for key in ("softmax/seed1", "csparsemax/seed1", "csparsemax/seed2")},
        "softmax/seed2": {**second, "archive": str(dest)}}


def test_runs_only_refusals(tmp_path):
    out = make_experiment(tmp_path)
    (tmp_path / "data" / "meta.json").write_text('{"src_lang": "de", "tgt_lang": "en"}\n')
    full, runs_only = tmp_path / "full", tmp_path / "runs-only"
    archive.pack(out, full)
    archive.pack(out, runs_only, runs_only=True)
    with pytest.raises(DataError, match="is an archive with its shared work"):
        archive.pack(out, full, runs_only=True)

    # a run that trained on other shared work cannot join an archive that packs this folder's
    (out / "runs" / "csparsemax" / "seed2" / "shared-origin.json").write_text(
        '{"alignments": "0123", "predictor": null}\n')
    (out / "runs" / "csparsemax" / "seed2" / "metrics.json").write_text('{"bleu": 1.0}\n')
    with pytest.raises(DataError, match="trained on other shared work than .* pack it into an archive of runs only"):
        archive.pack(out, full)
    (out / "runs" / "csparsemax" / "seed2" / "shared-origin.json").write_text("{not json")
    with pytest.raises(DataError, match="shared-origin.json: not a readable record of the shared work"):
        archive.pack(out, runs_only)
    (out / "runs" / "csparsemax" / "seed2" / "shared-origin.json").unlink()

    # other data: refused in both directions
    (tmp_path / "data" / "train.bpe.de").write_text("c c\n")
    with pytest.raises(DataError, match="differs from the data of the runs archived .* it mirrors other prepared data"):
        archive.pack(out, runs_only)
    shutil.rmtree(out)
    with pytest.raises(DataError, match=r"train\.bpe\.de differs from the file its runs read"):
        archive.restore(runs_only, out)
    assert not (out / "runs").exists()

    # a run entry without its shared work: a damaged manifest, refused before anything is written
    (tmp_path / "data" / "train.bpe.de").write_text("a b\n")
    manifest = json.loads((runs_only / "manifest.json").read_text())
    del manifest["runs"]["softmax/seed1"]["shared"]
    (runs_only / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataError, match="run 'softmax/seed1' of an archive of runs only records no shared work"):
        archive.restore(runs_only, out)
    assert not (out / "runs").exists()


def test_an_archive_of_runs_only_has_a_format_of_its_own(tmp_path):
    """Format 4 is an archive of runs only, and only that: code that knows format 3 alone refuses it by its
    number, and a manifest whose format and kind disagree is refused as damaged."""
    out = make_experiment(tmp_path)
    archive.pack(out, tmp_path / "runs-only", runs_only=True)
    archive.pack(out, tmp_path / "full")
    assert json.loads((tmp_path / "runs-only" / "manifest.json").read_text())["format"] == 4
    assert json.loads((tmp_path / "full" / "manifest.json").read_text())["format"] == 3
    for dest, change in ((tmp_path / "runs-only", {"runs_only": False}), (tmp_path / "full", {"runs_only": True}),
                         (tmp_path / "full", {"format": 4})):
        manifest = json.loads((dest / "manifest.json").read_text())
        (dest / "manifest.json").write_text(json.dumps({**manifest, **change}))
        with pytest.raises(DataError, match="where an archive of runs only, and it alone, is format 4"):
            archive.read_manifest(dest)
        (dest / "manifest.json").write_text(json.dumps(manifest))


def test_trim_leaves_out_the_attention_no_report_draws(tmp_path, capsys, monkeypatch):
    """An archive packed while a grid named no figure pair keeps every system's seed-1 attention; once its grid
    record names one, ``experiment trim`` writes the other runs' tarballs again without it, from the archive
    alone: every other member and the metrics digests as they were, a restore that works, a second trim that
    changes nothing, and a later pack that keeps the trimmed runs."""
    monkeypatch.setattr(shared_steps, "train_predictor", FakeTrainer(WEIGHTS))
    out = make_experiment(tmp_path)
    shutil.copytree(out / "runs" / "csparsemax" / "seed1", out / "runs" / "sparsemax" / "seed1")
    dest = tmp_path / "archive"
    archive.pack(out, dest)
    (out / "grids" / "g.json").write_text('{"name": "g", "seeds": [1, 2], "figure": ["softmax", "csparsemax"]}\n')
    assert archive.pack(out, dest).kept == ["csparsemax/seed1", "csparsemax/seed2", "softmax/seed1",
                                            "sparsemax/seed1"]  # (the old archive: its runs packed before)
    before = {p.relative_to(dest).as_posix(): p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    manifest = json.loads(before["manifest.json"])

    def members(tar_path: Path) -> dict[str, tuple[bytes, int]]:
        with tarfile.open(tar_path) as tar:
            return {m.name: (tar.extractfile(m).read(), m.mtime) for m in tar.getmembers()}

    old_sparse = members(dest / "runs" / "sparsemax" / "seed1.tar.gz")
    assert "test.attn.npz" in old_sparse

    assert main(["experiment", "trim", str(dest), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "1 of 4 runs held attention that no report of its grids draws; a dry run, nothing written" in text
    assert "  sparsemax/seed1: test.attn.npz to leave out" in text
    assert {p.relative_to(dest).as_posix(): p.read_bytes() for p in dest.rglob("*") if p.is_file()} == before
    assert main(["experiment", "trim", str(dest)]) == 0
    text = capsys.readouterr().out
    assert "1 of 4 runs held attention that no report of its grids draws; written again" in text
    assert "  sparsemax/seed1: test.attn.npz left out" in text
    new_sparse = members(dest / "runs" / "sparsemax" / "seed1.tar.gz")
    assert new_sparse == {k: v for k, v in old_sparse.items() if k != "test.attn.npz"}
    after = {p.relative_to(dest).as_posix(): p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    changed = sorted(k for k in after if after[k] != before.get(k))
    assert changed == ["manifest.json", "runs/sparsemax/seed1.tar.gz"] and sorted(after) == sorted(before)
    trimmed = json.loads(after["manifest.json"])
    entry = trimmed["runs"]["sparsemax/seed1"]
    assert entry["size"] == len(after["runs/sparsemax/seed1.tar.gz"]) and "trimmed" in entry
    assert "test.attn.npz" not in entry["left_out"]
    assert entry["metrics"] == manifest["runs"]["sparsemax/seed1"]["metrics"]
    assert {k: v for k, v in trimmed["runs"].items() if k != "sparsemax/seed1"} == {
        k: v for k, v in manifest["runs"].items() if k != "sparsemax/seed1"}

    inode = dest.stat().st_ino
    assert main(["experiment", "trim", str(dest)]) == 0
    assert "0 of 4 runs held attention that no report of its grids draws; nothing to do" in capsys.readouterr().out
    assert dest.stat().st_ino == inode  # (not replaced)
    assert {p.relative_to(dest).as_posix(): p.read_bytes() for p in dest.rglob("*") if p.is_file()} == after
    assert archive.pack(out, dest).updated == []  # a pack from the folders keeps the trimmed runs
    assert (dest / "runs" / "sparsemax" / "seed1.tar.gz").read_bytes() == after["runs/sparsemax/seed1.tar.gz"]

    restored = tmp_path / "restored" / "exp"
    shutil.move(out, restored)
    archive.restore(dest, out)
    assert not (out / "runs" / "sparsemax" / "seed1" / "test.attn.npz").exists()
    assert (out / "runs" / "softmax" / "seed1" / "test.attn.npz").read_bytes() == b"PKtest"
    assert (out / "runs" / "sparsemax" / "seed1" / "metrics.json").read_bytes() == (
        restored / "runs" / "sparsemax" / "seed1" / "metrics.json").read_bytes()


def test_trim_refuses_what_is_not_an_archive(tmp_path, capsys):
    (tmp_path / "notes").mkdir()
    assert main(["experiment", "trim", str(tmp_path / "notes")]) == 2
    assert "notes: not an archive of `scanmt experiment archive` (no manifest.json)" in capsys.readouterr().err
    out = make_experiment(tmp_path)
    dest = tmp_path / "archive"
    archive.pack(out, dest)
    tar_path = dest / "runs" / "softmax" / "seed1.tar.gz"
    tar_path.write_bytes(b"not a tarball")
    assert main(["experiment", "trim", str(dest)]) == 2
    assert f"{tar_path}: cannot be read" in capsys.readouterr().err
    assert tar_path.read_bytes() == b"not a tarball" and not list(tmp_path.glob(".archive.*"))
    manifest = json.loads((dest / "manifest.json").read_text())
    manifest["runs"]["../../escape/seed1"] = manifest["runs"].pop("softmax/seed1")
    (dest / "manifest.json").write_text(json.dumps(manifest))
    assert main(["experiment", "trim", str(dest)]) == 2
    assert "run '../../escape/seed1' is not SYSTEM/seedK (a damaged or crafted manifest); nothing was trimmed" in (
        capsys.readouterr().err)
    (dest / "manifest.json").write_text(json.dumps({k: v for k, v in manifest.items() if k != "runs"}))
    assert main(["experiment", "trim", str(dest)]) == 2
    assert "no table of runs (a damaged manifest); nothing was trimmed" in capsys.readouterr().err
