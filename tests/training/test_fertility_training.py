"""Every constrained transform x fertility strategy trains on a small real subset and translates."""

import pytest
import torch

from scanmt.cli.main import main
from scanmt.config import PredictorConfig
from scanmt.data.attention_file import AttentionFile
from scanmt.decoding.translator import Translator
from scanmt.errors import ConfigError
from scanmt.training.fertility_trainer import train_predictor
from scanmt.training.trainer import Trainer
from tests.conftest import tiny_config


@pytest.fixture(scope="module")
def predictor(aligned_data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("predictor")
    cfg = PredictorConfig.from_dict({
        "data": {"dir": str(aligned_data_dir), "batch_tokens": 800},
        "model": {"emb_size": 32, "hidden_size": 32},
        "train": {"max_steps": 40, "epochs": 2, "logger": "none", "log_every": 10, "checkpoint_every": 20},
    })
    res = train_predictor(cfg, out)
    hist = res.progress.history
    assert hist and 0 <= hist[-1]["valid/accuracy"] <= 100 and hist[-1]["valid/mae"] >= 0
    return res.checkpoint


@pytest.mark.slow
@pytest.mark.parametrize("transform", ["csoftmax", "csparsemax"])
@pytest.mark.parametrize("strategy", ["constant", "guided", "predicted", "actual"])
def test_constrained_training_per_strategy(aligned_data_dir, predictor, tmp_path, transform, strategy):
    fert = {"strategy": strategy, "value": 2.0, "predictor": str(predictor)}
    cfg = tiny_config(aligned_data_dir, train__max_steps=6, model__attention__transform=transform,
                      model__attention__exhaustion=0.2, model__attention__fertility=fert)
    t = Trainer(cfg, tmp_path / "run")
    assert t.model.sink and t.model.constrained
    first = t.data.train.make_batch([0, 1])
    assert first.fertility is not None and torch.all(first.fertility[0, : first.src_len[0]] > 0)
    p = t.train()
    assert p.step == 6 and p.history
    tr = Translator.from_checkpoint(tmp_path / "run" / "best.pt")
    lines = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee."]
    if strategy == "actual":
        with pytest.raises(ConfigError, match="--fertility FILE"):
            tr.translate_lines(lines, beam=2)
        fert_values = [[1.0] * len(p) for p in tr.pipeline.source_pieces_all(lines)]
        out = tr.translate_lines(lines, beam=2, fertility=fert_values)
    else:
        out = tr.translate_lines(lines, beam=2)
    for i, o in enumerate(out):
        beta = o.hypothesis.attention.sum(0)[:-1]
        assert beta.shape[0] == len(o.src_pieces)
        assert o.fertility is not None and len(o.fertility) == len(o.src_pieces)
        assert all(f > 0 for f in o.fertility)
        if strategy == "constant":
            assert o.fertility == [2.0] * len(o.src_pieces)
        elif strategy == "actual":
            assert o.fertility == fert_values[i]
        assert torch.all(beta <= torch.tensor(o.fertility) + 1e-5)


def test_config_errors_for_fertility(aligned_data_dir, tmp_path):
    with pytest.raises(ConfigError, match="csparsemax needs fertility bounds"):  # when the config is built
        Trainer(tiny_config(aligned_data_dir, model__attention__transform="csparsemax"), tmp_path / "a")
    with pytest.raises(ConfigError, match="only applies to constrained transforms"):
        Trainer(tiny_config(aligned_data_dir, model__attention__fertility={"strategy": "constant"}), tmp_path / "b")
    bad = tiny_config(aligned_data_dir, model__attention__transform="csoftmax",
                      model__attention__fertility={"strategy": "predicted"})
    with pytest.raises(ConfigError, match="needs a trained fertility predictor"):
        Trainer(bad, tmp_path / "c")


def test_translate_cli_fertility_file_errors(aligned_data_dir, tmp_path, capsys):
    cfg = tiny_config(aligned_data_dir, train__max_steps=2, model__attention__transform="csparsemax",
                      model__attention__fertility={"strategy": "constant", "value": 2.0})
    Trainer(cfg, tmp_path / "run").train()
    src = tmp_path / "in.de"
    src.write_text("Ein Hund .\nZwei Katzen schlafen .\n")
    fert = tmp_path / "f.txt"
    fert.write_text("1 1 1\n1 0 1\n")
    rc = main(["translate", "--model", str(tmp_path / "run" / "best.pt"), "--input", str(src),
               "--output", str(tmp_path / "out.en"), "--fertility", str(fert)])
    err = capsys.readouterr().err
    assert rc == 2 and "f.txt:" in err
    assert not (tmp_path / "out.en").exists()
    # a valid file: the attention file stores the bounds used, inf for the sink
    lens = [len(p) for p in Translator.from_checkpoint(tmp_path / "run" / "best.pt").pipeline.source_pieces_all(
        src.read_text().splitlines())]
    bounds = [[1.0 + (j % 3) for j in range(n)] for n in lens]
    fert.write_text("".join(" ".join(f"{f:g}" for f in b) + "\n" for b in bounds))
    rc = main(["translate", "--model", str(tmp_path / "run" / "best.pt"), "--input", str(src),
               "--output", str(tmp_path / "out.en"), "--fertility", str(fert),
               "--attention-out", str(tmp_path / "a.npz"), "--beam", "2"])
    assert rc == 0, capsys.readouterr().err
    sents = list(AttentionFile(tmp_path / "a.npz"))
    assert [s.fertility.tolist() for s in sents] == [b + [float("inf")] for b in bounds]
    for s in sents:
        assert s.src[-1] == "<sink>"
        assert (s.attention.sum(0)[:-1] <= s.fertility[:-1] + 1e-5).all()


def test_eval_predictor_cli(aligned_data_dir, predictor, tmp_path, capsys):
    """`scanmt fertility --eval-predictor`: accuracy and MAE against the majority class, on valid."""
    import json

    out = tmp_path / "eval.json"
    assert main(["fertility", "--data", str(aligned_data_dir), "--eval-predictor", str(predictor),
                 "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "fertility predictor (subword targets) on valid" in printed and "majority class" in printed
    (r,) = json.loads(out.read_text(encoding="utf-8"))["results"]
    assert r["level"] == "subword" and r["split"] == "valid" and r["pieces"] > 0
    assert 0 <= r["accuracy"] <= 100 and r["mae"] >= 0
    # the majority baseline's accuracy is the share of its class among the valid targets
    assert r["majority_accuracy"] == pytest.approx(r["target_classes"][str(r["majority_class"])])
    assert sum(r["target_classes"].values()) == pytest.approx(100.0)
    assert r["bound_mean"] >= 1.0  # expected fertility >= 0, plus add 1
    assert r["words"] is None  # the fixture has no word alignment
    assert main(["fertility", "--data", str(aligned_data_dir), "--eval-predictor", str(predictor),
                 "--train-predictor", str(tmp_path / "x")]) == 2
    assert "either --train-predictor or --eval-predictor, not both" in capsys.readouterr().err
