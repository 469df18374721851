"""``train.lr_schedule``: the rate of every update under epoch decay and the inverse square root."""

from __future__ import annotations

import csv
import math

import pytest

from scanmt.config import TrainConfig
from scanmt.training.optim import epoch_lr, update_lr


def test_inverse_sqrt_rises_linearly_to_the_peak_then_falls_as_one_over_the_root():
    cfg = TrainConfig(optimizer="adam", lr=0.002, lr_schedule="inverse_sqrt", warmup_steps=4)
    rates = [update_lr(cfg.lr, step, cfg) for step in range(16)]  # updates 1..16
    assert rates[:4] == pytest.approx([0.0005, 0.001, 0.0015, 0.002])
    assert max(rates) == pytest.approx(0.002) and rates.index(max(rates)) == 3
    # after the warm-up: lr * sqrt(W / k), so update 16 has half the peak, and k * rate^2 is constant
    assert rates[15] == pytest.approx(0.001)
    assert [k * r * r for k, r in zip(range(5, 17), rates[4:])] == pytest.approx([4 * 0.002**2] * 12)


def test_inverse_sqrt_ignores_the_epoch_decay():
    cfg = TrainConfig(optimizer="adam", lr=0.002, lr_schedule="inverse_sqrt", warmup_steps=4, lr_decay=0.5,
                      lr_decay_start=2)
    assert epoch_lr(0.002, 5, cfg, decay_started=True) == 0.002
    # the rate depends on the update alone, never on the epoch's rate
    assert update_lr(0.0001, 99, cfg) == pytest.approx(0.002 * math.sqrt(4 / 100))


def test_epoch_decay_warms_up_then_uses_the_epochs_rate():
    cfg = TrainConfig(optimizer="adam", lr=0.004, warmup_steps=4, lr_decay=0.5, lr_decay_start=3)
    assert [update_lr(0.004, s, cfg) for s in range(6)] == pytest.approx([0.001, 0.002, 0.003, 0.004, 0.004, 0.004])
    assert epoch_lr(0.004, 2, cfg, decay_started=False) == 0.004
    assert epoch_lr(0.004, 3, cfg, decay_started=False) == 0.002
    assert epoch_lr(0.004, 2, cfg, decay_started=True) == 0.002  # a validation without progress starts it early
    no_warmup = TrainConfig(optimizer="adam", lr=0.004)
    assert update_lr(0.001, 0, no_warmup) == 0.001


def _rates_of_a_training_run(small_data_dir, run, steps: int, **overrides) -> tuple[list[float], list[float]]:
    """The optimizer's lr at each of ``steps`` updates of a tiny run, and the lr the training log reports
    for each (``metrics.csv``, 6 significant digits)."""
    from scanmt.training.trainer import Trainer
    from tests.conftest import tiny_config

    cfg = tiny_config(small_data_dir, train__max_steps=steps, train__log_every=1, train__logger="csv", **overrides)
    trainer = Trainer(cfg, run)
    seen: list[float] = []
    step = trainer.loop.train_step

    def recording(batch, probe=False):
        seen.append(trainer.loop.optimizer.param_groups[0]["lr"])
        return step(batch, probe)

    trainer.loop.train_step = recording
    trainer.train()
    with open(run / "metrics.csv", encoding="utf-8") as fh:
        logged = {int(r["step"]): float(r["value"]) for r in csv.DictReader(fh) if r["name"] == "train/lr"}
    return seen, [logged[k] for k in range(1, steps + 1)]


def test_warmup_raises_the_lr_linearly_then_holds_it(small_data_dir, tmp_path):
    """``train.warmup_steps`` under the epoch decay: update k (1-based) of the warm-up uses lr * k / warmup_steps,
    then the full lr; the training log reports the lr each update used, not the schedule's target."""
    seen, logged = _rates_of_a_training_run(small_data_dir, tmp_path / "run", 6, train__warmup_steps=4,
                                            train__lr=0.004)
    assert seen == pytest.approx([0.001, 0.002, 0.003, 0.004, 0.004, 0.004])
    assert logged == pytest.approx(seen, rel=1e-5)


def test_training_uses_the_inverse_sqrt_rate_at_every_update(small_data_dir, tmp_path):
    seen, logged = _rates_of_a_training_run(small_data_dir, tmp_path / "run", 8, train__warmup_steps=2,
                                            train__lr=0.004, train__lr_schedule="inverse_sqrt",
                                            train__optimizer="adam")
    expected = [0.004 * min(k / 2, math.sqrt(2 / k)) for k in range(1, 9)]
    assert seen == pytest.approx(expected)
    assert logged == pytest.approx(expected, rel=1e-5)
