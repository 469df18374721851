"""train.precision: bf16 mixed precision for the training forward pass."""

import math

import pytest
import torch

from scanmt.config import Config
from scanmt.errors import ConfigError
from scanmt.presets import preset_path
from scanmt.training import precision
from scanmt.training.precision import bf16_speedup, precision_advice
from tests.conftest import one_train_step, tiny_config


def test_unknown_precision_names_the_key(small_data_dir):
    with pytest.raises(ConfigError, match=r"train\.precision: unknown precision 'fp16' \(known: fp32, bf16\)"):
        tiny_config(small_data_dir, train__precision="fp16")


@pytest.mark.parametrize(
    "attention",
    [
        {"transform": "softmax"},
        {"transform": "csparsemax", "sink": True, "exhaustion": 0.2,
         "fertility": {"strategy": "constant", "value": 2.0}},
    ],
    ids=["softmax", "csparsemax"],
)
def test_bf16_step_is_close_to_fp32_and_keeps_float32_state(small_data_dir, tmp_path, attention):
    over = {"model__dropout": 0.0, "model__attention": attention, "train__optimizer": "sgd", "train__lr": 0.5}
    _, loss32, g32 = one_train_step(tiny_config(small_data_dir, **over), tmp_path / "fp32")
    trainer, loss16, g16 = one_train_step(tiny_config(small_data_dir, train__precision="bf16", **over), tmp_path / "bf16")

    assert math.isfinite(loss16) and abs(loss16 - loss32) < 0.02 * loss32, (loss16, loss32)
    for name, p in trainer.model.named_parameters():  # master weights, gradients and optimizer stay float32
        assert p.dtype == torch.float32, name
        assert p.grad is None or p.grad.dtype == torch.float32, name
    assert g16.keys() == g32.keys()
    flat16 = torch.cat([g.flatten() for g in g16.values()])
    flat32 = torch.cat([g.flatten() for g in g32.values()])
    assert torch.isfinite(flat16).all()
    cos = torch.nn.functional.cosine_similarity(flat16, flat32, dim=0)
    assert cos > 0.99, f"bf16 gradient direction differs from fp32: cosine {cos:.4f}"
    # and bf16 was really in effect: the products were rounded, so the gradients are not bit-identical
    assert (flat16 - flat32).abs().max() > 0


@pytest.mark.parametrize(
    "preset, train_precision, device, cpu_speedup, warned",
    [
        ("transformer-small", "bf16", "cuda", 2.0, "18x"),
        ("transformer-small", "fp32", "cuda", 2.0, None),
        ("cpu-small", "bf16", "cuda", 2.0, None),  # the LSTM loses 11-22 % in bf16 there, not 14-18x
        ("transformer-small", "bf16", "cpu", 1.8, None),  # where the CPU multiplies bf16 faster
        ("transformer-small", "bf16", "cpu", 0.9, None),  # within the margin for a shared machine
        ("transformer-small", "bf16", "cpu", 0.45, "run at 0.45x the speed of float32"),  # the Xeon of session 20
        ("cpu-small", "bf16", "cpu", 0.45, "run at 0.45x the speed of float32"),
        ("cpu-small", "fp32", "cpu", 0.45, None),
    ],
)
def test_precision_advice(monkeypatch, preset, train_precision, device, cpu_speedup, warned):
    monkeypatch.setattr(precision, "cpu_bf16_speedup", lambda threads=1: cpu_speedup)
    cfg = Config.load(preset_path(preset), [f"train.precision={train_precision}"])
    advice = precision_advice(cfg.model.arch, cfg.train.precision, torch.device(device))
    assert (advice is not None) == (warned is not None)
    if warned:
        assert "train.precision=fp32" in advice and warned in advice


def test_bf16_speedup_is_fp32_time_over_bf16_time(monkeypatch):
    """With a clock that makes every fp32 product take 1 s and every bf16 product 2 s, bf16 is 0.5x as fast."""
    ticks = iter([t for r in range(3) for t in (10 * r, 10 * r + 1, 10 * r + 5, 10 * r + 7)])

    class Clock:
        @staticmethod
        def perf_counter() -> float:
            return float(next(ticks))

    before = torch.get_num_threads()
    monkeypatch.setattr(precision, "time", Clock)
    assert bf16_speedup(shape=(8, 4, 8), repeats=3, threads=1) == pytest.approx(0.5)
    assert torch.get_num_threads() == before


def test_bf16_speedup_measures_this_machine():
    speedup = bf16_speedup(shape=(64, 32, 64), repeats=3)
    assert math.isfinite(speedup) and 0.01 < speedup < 100, speedup


@pytest.mark.parametrize("speedup, prefers", [(1.8, True), (1.25, True), (1.1, False), (0.45, False)])
def test_auto_precision_follows_the_measurement(monkeypatch, speedup, prefers):
    monkeypatch.setattr(precision, "cpu_bf16_speedup", lambda threads=1: speedup)
    assert precision.cpu_prefers_bf16() is prefers


@pytest.mark.parametrize("asked, speedup, chosen", [("auto", 1.8, "bf16"), ("auto", 0.45, "fp32"),
                                                    ("fp32", 1.8, "fp32"), ("bf16", 0.45, "bf16")])
def test_the_demo_takes_the_measured_precision(monkeypatch, asked, speedup, chosen):
    from scanmt.cli.demo import training_precision

    monkeypatch.setattr(precision, "cpu_bf16_speedup", lambda threads=1: speedup)
    got, why = training_precision(asked)
    assert got == chosen
    assert why == (f" (auto: bf16 matrix products measure {speedup:.2f}x fp32's speed here)" if asked == "auto" else "")
