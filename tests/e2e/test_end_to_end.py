"""Train a few hundred steps on a real Multi30k subset through the CLI, then translate."""

import csv

import numpy as np
import pytest

from scanmt.cli.main import main
from scanmt.data.attention_file import AttentionFile
from scanmt.io import read_lines
from tests.conftest import tiny_config


@pytest.mark.slow
def test_train_then_translate_via_cli(small_data_dir, tmp_path, capsys):
    cfg = tiny_config(
        small_data_dir, train__max_steps=300, train__epochs=10, train__logger="csv", train__log_every=25, train__valid_every=150,
        model__hidden_size=64, model__emb_size=64,
    )
    cfg_path = tmp_path / "cfg.yaml"
    cfg.save_yaml(cfg_path)
    run = tmp_path / "run"
    assert main(["train", "--config", str(cfg_path), "--out", str(run)]) == 0
    assert "training summary" in capsys.readouterr().out

    rows = [r for r in csv.DictReader(open(run / "metrics.csv")) if r["name"] == "train/ppl"]
    ppl = [float(r["value"]) for r in rows]
    assert len(ppl) == 12
    assert ppl[-1] < 0.5 * ppl[0], f"training perplexity did not fall: {ppl}"

    src = small_data_dir / "test.raw.de"
    out = tmp_path / "hyp.en"
    attn = tmp_path / "attn.npz"
    assert main(["translate", "--model", str(run / "best.pt"), "--input", str(src), "--output", str(out),
                 "--beam", "3", "--attention-out", str(attn)]) == 0
    hyps = read_lines(out, allow_empty=True)
    assert len(hyps) == len(read_lines(src))
    f = AttentionFile(attn)
    assert len(f) == len(hyps)
    s = f[0]
    assert s.attention.shape == (len(s.hyp), len(s.src))
    np.testing.assert_allclose(s.attention.sum(1), 1.0, rtol=1e-5)
    assert "sentences/s" in capsys.readouterr().out


def test_cli_errors_are_one_line(tmp_path, capsys):
    (tmp_path / "a.de").write_text("eins\nzwei\n")
    (tmp_path / "a.en").write_text("one\n")
    rc = main(["prepare", "--pair", "de-en", "--train", str(tmp_path / "a.de"), str(tmp_path / "a.en"),
               "--valid", str(tmp_path / "a.de"), str(tmp_path / "a.en"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.count("\n") == 0 and "a.de has 2 lines but" in err and "a.en has 1" in err
    assert not (tmp_path / "out").exists()
