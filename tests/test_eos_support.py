"""scripts/eos_support.py --joined: prints scanmt.decoding.boundary's measure of a run's model (the measure itself
is tested in tests/decoding/test_boundary.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from scanmt.cli.main import main
from scanmt.decoding.boundary import boundary_eos, share_at_least
from scanmt.decoding.translator import Translator
from scanmt.io import read_lines
from scanmt.metrics.stress import join_groups
from tests.conftest import load_module, tiny_config

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "eos_support.py"


def test_joined_prints_the_boundary_measure_of_each_run(small_data_dir, tmp_path, capsys, monkeypatch):
    config, run = tmp_path / "c.yaml", tmp_path / "run"
    tiny_config(small_data_dir, train__max_steps=5, train__checkpoint_every=5,
                model__attention__transform="csparsemax", model__attention__fertility__strategy="constant",
                model__attention__fertility__value=2.0).save_yaml(config)
    assert main(["train", "--config", str(config), "--out", str(run)]) == 0
    capsys.readouterr()
    monkeypatch.setattr(sys, "argv", ["eos_support.py", "--data", str(small_data_dir), "--split", "test",
                                      "--joined", "3", str(run)])
    load_module(SCRIPT).main()
    text = capsys.readouterr().out
    src, ref = read_lines(small_data_dir / "test.raw.de"), read_lines(small_data_dir / "test.raw.en")
    b = boundary_eos(Translator.from_checkpoint(run / "best.pt"), join_groups(src, 3), join_groups(ref, 3),
                     ref[0:99:3])
    assert f"csparsemax, label smoothing 0, optimizer adam), test, K = 3: {len(b.measured)} joined inputs" in text
    got = re.search(r"median ([0-9.]+), mean [0-9.]+; </s> the most probable word there in ([0-9.]+) %, "
                    r"with P >= 0.5 in ([0-9.]+) % and P >= 0.99 in ([0-9.]+) %", text)
    assert got is not None, text
    assert float(got[1]) == pytest.approx(b.median, abs=5e-4)
    assert float(got[2]) == pytest.approx(b.argmax_share, abs=0.05)
    assert float(got[3]) == pytest.approx(b.stop_share, abs=0.05)
    assert float(got[4]) == pytest.approx(share_at_least(b.p_eos, 0.99), abs=0.05)
    assert f"at the joined reference's end: median {b.median_at_end:.3f}" in text
    closed = sum(p is not None for p in b.p_close)
    assert closed > 0 and (f"P(full stop) closing the first sentence, one step earlier ({closed} inputs whose first "
                           f"sentence ends with . ! ?): median {b.median_close:.3f}") in text
    assert f"the most probable word there in {b.close_argmax_share:.1f} %" in text


def test_joined_refuses_one_sentence(small_data_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["eos_support.py", "--data", str(small_data_dir), "--joined", "1", str(tmp_path)])
    with pytest.raises(SystemExit, match="--joined 1: a joined input needs at least 2 sentences"):
        load_module(SCRIPT).main()
