"""The coverage baselines from the command line: scanmt train / translate / tune-penalties."""

import pytest
import yaml

from scanmt.cli.main import main
from scanmt.config import Config
from scanmt.model.checkpoint import load_checkpoint
from tests.conftest import tiny_config

SENTENCES = ["Ein Hund läuft über die Wiese.", "Zwei Männer spielen Fußball.", "Eine Frau liest ein Buch."]


def _train(data_dir, out, **overrides):
    cfg = tiny_config(data_dir, **{"train__max_steps": 6, "data__valid_limit": 8, **overrides})
    cfg_path = out.parent / f"{out.name}.yaml"
    cfg.save_yaml(cfg_path)
    assert main(["train", "--config", str(cfg_path), "--out", str(out)]) == 0
    return out / "last.pt"


@pytest.fixture(scope="module")
def gru_sparsemax(small_data_dir, tmp_path_factory):
    """NN coverage with gating (d = 2) combined with sparsemax."""
    out = tmp_path_factory.mktemp("cov") / "nn_gru"
    return _train(small_data_dir, out, model__coverage__type="nn_gru", model__coverage__dim=2,
                  model__attention__transform="sparsemax")


@pytest.mark.parametrize("cov", ["linguistic", "linguistic_fertility", "nn"])
def test_every_coverage_model_trains_and_translates_from_the_cli(cov, small_data_dir, tmp_path):
    ckpt = _train(small_data_dir, tmp_path / cov, model__coverage__type=cov, train__max_steps=3)
    cfg = Config.from_dict(load_checkpoint(ckpt)["config"])
    assert cfg.model.coverage.type == cov
    src = tmp_path / "in.de"
    src.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    assert main(["translate", "--model", str(ckpt), "--input", str(src), "--output", str(tmp_path / "out.en"),
                 "--beam", "2", "--coverage-beta", "0.2"]) == 0
    assert len((tmp_path / "out.en").read_text(encoding="utf-8").splitlines()) == 3


def test_translate_with_penalty_options(gru_sparsemax, tmp_path, capsys):
    src = tmp_path / "in.de"
    src.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    for mode in ("rescore", "step"):
        out = tmp_path / f"{mode}.en"
        assert main(["translate", "--model", str(gru_sparsemax), "--input", str(src), "--output", str(out),
                     "--beam", "3", "--length-alpha", "0.6", "--coverage-beta", "0.4", "--coverage-eps", "0.2",
                     "--penalty-mode", mode]) == 0
        assert len(out.read_text(encoding="utf-8").splitlines()) == 3
        assert f"coverage beta 0.4 (eps 0.2), penalties: {mode}" in capsys.readouterr().out
    bad = main(["translate", "--model", str(gru_sparsemax), "--input", str(src), "--output", str(tmp_path / "x"),
                "--coverage-eps", "0"])
    assert bad == 2
    assert "decode.coverage_eps" in capsys.readouterr().err


def test_tune_penalties_writes_the_best_setting_for_translate(gru_sparsemax, small_data_dir, tmp_path, capsys):
    best = tmp_path / "best.yaml"
    base = ["tune-penalties", "--model", str(gru_sparsemax), "--data", str(small_data_dir), "--limit", "12", "--beam", "2"]
    args = base + ["--grid", "0,1", "--betas", "0,0.5,1"]
    assert main(args + ["--out", str(best)]) == 0
    text = capsys.readouterr().out
    assert "alpha \\ beta" in text and "best: alpha" in text and "beam searches: 1)" in text
    res = yaml.safe_load(best.read_text(encoding="utf-8"))
    assert res["grid"]["alphas"] == [0.0, 1.0] and res["grid"]["betas"] == [0.0, 0.5, 1.0]
    table = res["grid"]["bleu"]
    assert len(table) == 2 and all(len(row) == 3 for row in table)
    assert res["bleu"] == max(max(row) for row in table)
    assert res["length_alpha"] in (0.0, 1.0) and res["coverage_beta"] in (0.0, 0.5, 1.0)
    assert res["penalty_mode"] == "rescore" and res["sentences"] == 12

    # re-ranking one decode is exact: decoding per grid point gives the same table
    again = tmp_path / "again.yaml"
    assert main(args + ["--redecode", "--out", str(again)]) == 0
    assert "beam searches: 6)" in capsys.readouterr().out
    assert yaml.safe_load(again.read_text(encoding="utf-8"))["grid"]["bleu"] == table

    # step mode decodes once per grid point
    step = tmp_path / "step.yaml"
    assert main(base + ["--grid", "0,1", "--penalty-mode", "step", "--out", str(step)]) == 0
    assert "beam searches: 4)" in capsys.readouterr().out
    assert yaml.safe_load(step.read_text(encoding="utf-8"))["penalty_mode"] == "step"

    src = tmp_path / "in.de"
    src.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    assert main(["translate", "--model", str(gru_sparsemax), "--input", str(src), "--output", str(tmp_path / "o.en"),
                 "--beam", "2", "--penalties", str(best)]) == 0
    out = capsys.readouterr().out
    assert f"length alpha {res['length_alpha']:g}, coverage beta {res['coverage_beta']:g}" in out


def test_bad_penalties_file_is_a_clear_error(gru_sparsemax, tmp_path, capsys):
    src = tmp_path / "in.de"
    src.write_text("Ein Hund.\n", encoding="utf-8")
    bad = tmp_path / "bad.yaml"
    bad.write_text("penalty_mode: always\n", encoding="utf-8")
    assert main(["translate", "--model", str(gru_sparsemax), "--input", str(src), "--output", str(tmp_path / "o"),
                 "--penalties", str(bad)]) == 2
    assert "bad.yaml" in capsys.readouterr().err
    assert main(["tune-penalties", "--model", str(gru_sparsemax), "--data", str(tmp_path), "--grid", "a,b"]) == 2
    assert "--grid" in capsys.readouterr().err
