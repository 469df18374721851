"""A tiny Transformer trains through the normal path (`scanmt train --set model.arch=transformer`) and translates."""

import json
import runpy
import sys

import numpy as np
import pytest

from scanmt.cli.main import main
from scanmt.data.attention_file import AttentionFile
from scanmt.io import read_lines
from tests.conftest import REPO, tiny_config


@pytest.mark.slow
def test_tiny_transformer_trains_and_translates_via_cli(small_data_dir, tmp_path, capsys, monkeypatch):
    cfg_path = tmp_path / "cfg.yaml"
    tiny_config(small_data_dir, train__max_steps=20).save_yaml(cfg_path)
    run = tmp_path / "run"
    sets = ["model.arch=transformer", "model.transformer.heads=2", "model.transformer.ff_size=64",
            "model.transformer.encoder_layers=1", "model.transformer.decoder_layers=2",
            "model.attention.transform=csparsemax", "model.attention.fertility.strategy=constant",
            "model.transformer.bounded=shared", "model.share_embeddings=true", "model.tie_generator=true",
            "train.logger=csv"]
    argv = ["train", "--config", str(cfg_path), "--out", str(run)]
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == 0
    assert "training summary" in capsys.readouterr().out

    src = tmp_path / "in.de"
    src.write_text("Ein Mann fährt Fahrrad.\nZwei Hunde spielen im Schnee.\n", encoding="utf-8")
    out, attn = tmp_path / "hyp.en", tmp_path / "attn.npz"
    assert main(["translate", "--model", str(run / "best.pt"), "--input", str(src), "--output", str(out),
                 "--beam", "3", "--attention-out", str(attn)]) == 0
    hyps = read_lines(out, allow_empty=True)
    assert len(hyps) == 2
    f = AttentionFile(attn)
    s = f[0]
    assert s.attention.shape == (len(s.hyp), len(s.src)) and s.src[-1] == "<sink>"
    np.testing.assert_allclose(s.attention.sum(1), 1.0, rtol=1e-5)
    # the shared bound: the reported attention's column sums stay under the constant fertility (2)
    assert (s.attention[:, :-1].sum(0) <= 2.0 + 1e-5).all()

    # the coverage penalty's tuning, the attention map and evaluate --attention work on a Transformer too
    best = tmp_path / "penalties.yaml"
    assert main(["tune-penalties", "--model", str(run / "best.pt"), "--data", str(small_data_dir), "--split",
                 "valid", "--limit", "6", "--grid", "0,0.5", "--beam", "2", "--out", str(best)]) == 0
    assert "coverage_beta" in best.read_text(encoding="utf-8")
    png = tmp_path / "map.png"
    assert main(["plot-attention", "--attention", str(attn), "--index", "1", "--out", str(png)]) == 0
    assert png.stat().st_size > 1000
    scores = tmp_path / "attn.json"
    assert main(["evaluate", "--attention", str(attn), "--metrics", "attn-stats", "--json", str(scores)]) == 0
    assert "unattended_share" in scores.read_text(encoding="utf-8")

    # the heads' health in the training log, and every head through scripts/transformer_heads.py
    metrics = (run / "metrics.csv").read_text(encoding="utf-8")
    assert "attn/head_one_hot" in metrics and "attn/head_support" in metrics
    tgt = tmp_path / "ref.en"
    tgt.write_text("A man rides a bike.\nTwo dogs play in the snow.\n", encoding="utf-8")
    heads = tmp_path / "heads.json"
    monkeypatch.setattr(sys, "argv", ["transformer_heads.py", str(run / "best.pt"), str(src), str(tgt),
                                      "--json", str(heads)])
    runpy.run_path(str(REPO / "scripts" / "transformer_heads.py"), run_name="__main__")
    table = json.loads(heads.read_text(encoding="utf-8"))
    assert sorted(table["heads"]) == ["layer1/head1", "layer1/head2", "layer2/head1", "layer2/head2"]
    for h in table["heads"].values():  # csparsemax: supports between 1 and the source length + sink
        assert 1.0 <= h["support"] <= 9 and 0.0 <= h["one-hot"] <= 1.0 and 0.0 < h["max"] <= 1.0
        assert 0.0 <= h["bound"] <= 1.0  # the share of source words at their bound (2) by the sentence's end
    assert "layer2/head2" in capsys.readouterr().out
