"""``scanmt stress`` and ``api.stress`` end to end on a tiny model (K 1 2), and their one-line errors."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from scanmt import api
from scanmt.api.stress import METRICS
from scanmt.cli.main import main
from scanmt.errors import ConfigError, DataError
from tests.stress.conftest import N_LINES


def _request(tmp: Path, ckpt: Path, out: Path, **kw) -> api.StressRequest:
    return api.StressRequest(model=(str(ckpt), str(ckpt)), names=("a", "b"), src=tmp / "test.raw.de",
                             ref=tmp / "test.raw.en", out=out, k=(1, 2), beam=1, **kw)


def test_api_writes_every_model_and_k(stress_setup, tmp_path):
    tmp, ckpt = stress_setup
    request = _request(tmp, ckpt, tmp_path / "out", align_model=tmp / "align")
    result = api.stress(request)
    out = tmp_path / "out"
    doc = json.loads((out / "stress.json").read_text(encoding="utf-8"))
    assert doc["k"] == [1, 2] and doc["names"] == ["a", "b"] and doc["inputs"] == {"1": N_LINES, "2": N_LINES // 2}
    assert doc["command"] == request.command_line() and doc["models"]["a"] == str(ckpt.resolve())
    for name in ("a", "b"):
        for k in ("1", "2"):
            scores = doc["scores"][name][k]
            boundary = {"boundary_stop", "boundary_eos", "boundary_close"}  # none at K = 1: no sentence boundary
            assert all(isinstance(scores[key], float) == (k == "2" or key not in boundary) for key, _, _ in METRICS)
            assert all(scores[key] is None for key in boundary) if k == "1" else 0 <= scores["boundary_stop"] <= 100
            assert 0 <= scores["dropped_sentences"] <= 100 and scores["sentences"] == N_LINES // int(k) * int(k)
            hyp = (out / f"{name}.k{k}.hyp.en").read_text(encoding="utf-8").splitlines()
            assert len(hyp) == N_LINES // int(k)
    assert (out / "stress.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    joined = (out / "k2.src.de").read_text(encoding="utf-8").splitlines()
    first = (tmp / "test.raw.de").read_text(encoding="utf-8").splitlines()[:2]
    assert joined[0] == " ".join(first) and len(joined) == 4
    text = result.summary(request)
    assert "BLEU" in text and "dropS%" in text and "n/a" not in text.split("paired bootstrap")[0]
    assert result.scores["a"][1]["bleu"] == doc["scores"]["a"]["1"]["bleu"]
    # the per-input counts behind REP and DROP add up to the corpus scores
    for k in ("1", "2"):
        counts, scores = doc["per_input"]["a"][k], doc["scores"]["a"][k]
        assert len(counts["rep_sigma"]) == len(counts["dropped"]) == N_LINES // int(k)
        assert 100 * sum(counts["rep_sigma"]) / sum(counts["ref_words"]) == pytest.approx(scores["rep"])
        assert 100 * sum(counts["dropped"]) / sum(counts["source_words"]) == pytest.approx(scores["drop"])
    # P(</s>) after the first sentence of each K = 2 input, teacher-forced, behind the boundary metrics
    p_eos = doc["per_input"]["a"]["2"]["boundary_eos"]
    assert len(p_eos) == N_LINES // 2 and "boundary_eos" not in doc["per_input"]["a"]["1"]
    measured = sorted(p for p in p_eos if p is not None)
    assert len(measured) >= 3 and all(0.0 <= p <= 1.0 for p in measured)
    assert doc["scores"]["a"]["2"]["boundary_eos"] == pytest.approx(measured[len(measured) // 2] if len(measured) % 2
                                                                    else sum(measured[len(measured) // 2 - 1:][:2]) / 2)
    assert doc["scores"]["a"]["2"]["boundary_stop"] == pytest.approx(
        100 * sum(p >= 0.5 for p in measured) / len(measured))
    assert doc["per_input"]["b"]["2"]["boundary_eos"] == p_eos  # the same model
    # and P(the full stop closing the first sentence), one step earlier, where the first sentence ends with one
    p_close = doc["per_input"]["a"]["2"]["boundary_close"]
    closed = sorted(p for p in p_close if p is not None)
    assert len(p_close) == N_LINES // 2 and all(c is None for c, e in zip(p_close, p_eos) if e is None)
    assert len(closed) >= 3 and all(0.0 <= p <= 1.0 for p in closed)
    assert doc["scores"]["a"]["2"]["boundary_close"] == pytest.approx(statistics.median(closed))
    assert 0 <= doc["scores"]["a"]["2"]["boundary_close_argmax"] <= 100
    # b is the same model as a: the same rates; 9 and 4 joined inputs are too few for the paired test
    assert "paired bootstrap over the joined inputs against a" in text
    assert "b K=1: REP +0.00 (p n/a: fewer than 10 inputs)" in text
    assert "b K=2: REP +0.00 (p n/a: fewer than 10 inputs)" in text
    # the same outputs, so the same lengths: a's REP at b's lengths is a's own
    assert f"a's REP at its lengths {doc['scores']['a']['2']['rep']:.2f}" in text.split("b K=2:")[1].splitlines()[0]


def test_cli_without_aligner_says_drop_is_not_measured(stress_setup, tmp_path, capsys):
    tmp, ckpt = stress_setup
    argv = ["stress", "--model", str(ckpt), "--src", str(tmp / "test.raw.de"), "--ref", str(tmp / "test.raw.en"),
            "--k", "1", "2", "--beam", "1", "--out", str(tmp_path / "o")]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "n/a" in printed and "give --align-model" in printed and "run" in printed  # the default name: run folder
    doc = json.loads((tmp_path / "o" / "stress.json").read_text(encoding="utf-8"))
    assert doc["scores"]["run"]["2"]["drop"] is None and doc["scores"]["run"]["2"]["bleu"] >= 0
    assert main(argv) == 0  # its own folder: written again


def _cli_error(capsys, *argv: str) -> str:
    assert main(["stress", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("scanmt stress: error: ")
    return err


def test_bad_inputs_get_one_line_errors(stress_setup, tmp_path, capsys):
    tmp, ckpt = stress_setup
    base = ["--model", str(ckpt), "--src", str(tmp / "test.raw.de")]
    ok = [*base, "--ref", str(tmp / "test.raw.en")]
    assert "--k must be whole numbers >= 1, got 0" in _cli_error(capsys, *ok, "--k", "1", "0", "--out", str(tmp_path / "a"))
    with pytest.raises(ConfigError, match=r"--k must be whole numbers >= 1, got 0"):
        api.StressRequest(model=(str(ckpt),), src=tmp / "test.raw.de", ref=tmp / "test.raw.en", out=tmp_path / "a", k=(0,))
    short = tmp_path / "short.en"
    short.write_text("one line\n", encoding="utf-8")
    err = _cli_error(capsys, *base, "--ref", str(short), "--out", str(tmp_path / "b"))
    assert f"has {N_LINES} lines but {short} has 1" in err
    a_file = tmp_path / "file"
    a_file.write_text("x\n")
    assert "is a file, not a folder" in _cli_error(capsys, *ok, "--out", str(a_file))
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("x\n")
    assert "not empty and does not hold a scanmt stress output" in _cli_error(capsys, *ok, "--out", str(other))
    two = ["--model", str(ckpt), str(ckpt), *ok[2:]]
    assert "1 name(s) for 2 model(s)" in _cli_error(capsys, *two, "--names", "x", "--out", str(tmp_path / "c"))
    assert f"two models are named {ckpt.parent.parent.name}-run" in _cli_error(capsys, *two, "--out",
                                                                                str(tmp_path / "c"))
    assert f"--k 10: more than the {N_LINES} lines" in _cli_error(capsys, *ok, "--k", "10", "--out", str(tmp_path / "c"))
    assert "give each K once" in _cli_error(capsys, *ok, "--k", "2", "2", "--out", str(tmp_path / "c"))
    assert "no such checkpoint" in _cli_error(capsys, *ok[2:], "--model", str(tmp_path / "no.pt"),
                                              "--out", str(tmp_path / "c"))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists() and not (tmp_path / "c").exists()
    with pytest.raises(DataError, match="is a file, not a folder"):
        api.stress(_request(tmp, ckpt, a_file))


def test_default_names_take_the_folder_above_where_run_folders_share_a_name():
    from scanmt.api.stress import default_names

    grid = ["out/runs/softmax/seed1/best.pt", "out/runs/csparsemax/seed1/best.pt", "out/runs/csparsemax/seed2/last.pt"]
    assert default_names(grid) == ["softmax-seed1", "csparsemax-seed1", "seed2"]
    assert default_names(["runs/softmax/best.pt", "avg5.pt", "best.pt"]) == ["softmax", "avg5", "best"]
    assert api.StressRequest(model=tuple(grid[:2]), src=Path("s"), ref=Path("r"), out=Path("o")).model_names() == \
        ["softmax-seed1", "csparsemax-seed1"]


def test_boundary_only_measures_an_older_stress_output_again(stress_setup, tmp_path, capsys):
    """A stress output from before P(full stop) existed (its boundary_close keys removed) gets them back, the same
    as a fresh stress test measures, and nothing else in it changes; the P(</s>) it had is measured the same."""
    tmp, ckpt = stress_setup
    out = tmp_path / "o"
    argv = ["stress", "--model", str(ckpt), "--src", str(tmp / "test.raw.de"), "--ref", str(tmp / "test.raw.en"),
            "--k", "1", "2", "--beam", "1", "--out", str(out)]
    assert main(argv) == 0
    fresh = json.loads((out / "stress.json").read_text(encoding="utf-8"))
    old = json.loads(json.dumps(fresh))
    for name in old["names"]:
        for k in ("1", "2"):
            for key in ("boundary_close", "boundary_close_argmax"):
                del old["scores"][name][k][key]
            old["per_input"][name][k].pop("boundary_close", None)
    (out / "stress.json").write_text(json.dumps(old), encoding="utf-8")
    hyp = (out / "run.k2.hyp.en").read_bytes()
    capsys.readouterr()
    assert main(["stress", "--boundary-only", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    close = fresh["scores"]["run"]["2"]["boundary_close"]
    eos = fresh["scores"]["run"]["2"]["boundary_eos"]
    assert "run K=2: stop@1% " in printed and f"P</s>@1 {eos:.2f} -> {eos:.2f}" in printed
    assert f"P.@1 n/a -> {close:.3f}" in printed and "largest change against the stored values 0" in printed
    assert "grid run" not in printed  # (not a grid run's stress folder: no metrics.json to follow)
    now = json.loads((out / "stress.json").read_text(encoding="utf-8"))
    assert now["notes"][-1].startswith("boundary scores measured again by scanmt stress --boundary-only")
    assert {k: v for k, v in now.items() if k != "notes"} == {k: v for k, v in fresh.items() if k != "notes"}
    assert (out / "run.k2.hyp.en").read_bytes() == hyp and (out / "stress.png").read_bytes()[:4] == b"\x89PNG"
    # the API, on the same folder: the before and after of every boundary score
    result = api.remeasure_boundary(out)
    assert result.before["run"][2] == result.after["run"][2] and result.after["run"][2]["boundary_close"] == close
    assert result.largest_eos_change == 0.0 and result.after["run"][1]["boundary_eos"] is None


def test_boundary_only_errors(stress_setup, tmp_path, capsys):
    tmp, ckpt = stress_setup
    out = tmp_path / "o"
    assert main(["stress", "--model", str(ckpt), "--src", str(tmp / "test.raw.de"), "--ref", str(tmp / "test.raw.en"),
                 "--k", "2", "--beam", "1", "--out", str(out)]) == 0
    capsys.readouterr()
    assert "leave out --model, --k" in _cli_error(capsys, "--boundary-only", "--out", str(out), "--model", str(ckpt),
                                                  "--k", "3")
    assert "--model, --src, --ref required (only --boundary-only" in _cli_error(capsys, "--out", str(out))
    with pytest.raises(ConfigError, match=r"run by remeasure_boundary\(request.out\), not stress\(\)"):
        api.stress(api.StressRequest(out=out, boundary_only=True))
    assert "no such file; --out must be the folder of an earlier scanmt stress" in _cli_error(
        capsys, "--boundary-only", "--out", str(tmp_path / "none"))
    doc = json.loads((out / "stress.json").read_text(encoding="utf-8"))
    kept = (out / "stress.json").read_bytes()
    joined = out / "k2.ref.en"
    joined.write_text(joined.read_text(encoding="utf-8").replace("a", "the", 1), encoding="utf-8")
    err = _cli_error(capsys, "--boundary-only", "--out", str(out))
    assert "k2.ref.en: not" in err and "joined 2 at a time; the test set changed" in err
    assert (out / "stress.json").read_bytes() == kept  # a refused command writes nothing
    doc["models"]["run"] = str(tmp_path / "gone.pt")
    (out / "stress.json").write_text(json.dumps(doc), encoding="utf-8")
    assert f"records the model {tmp_path / 'gone.pt'}, which is not there any more" in _cli_error(
        capsys, "--boundary-only", "--out", str(out))
    (out / "stress.json").write_text(json.dumps({"names": ["run"]}), encoding="utf-8")
    assert "not a scanmt stress output (KeyError: 'k')" in _cli_error(capsys, "--boundary-only", "--out", str(out))
    assert json.loads((out / "stress.json").read_text(encoding="utf-8")) == {"names": ["run"]}
