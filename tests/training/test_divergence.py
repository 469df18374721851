"""Issue 27 item 15: a diverging run ends with "loss became NaN (or inf) at step N", not an error of the ops.

Before, a finite loss whose gradient overflowed made the weights NaN, and the next forward pass
stopped with "softmax: z contains NaN" (no step named).
"""

from __future__ import annotations

import pytest
import torch

from scanmt import api
from scanmt.cli.main import main
from scanmt.errors import DataError
from scanmt.training import trainer
from tests.conftest import tiny_config


class _InfiniteGradient(torch.autograd.Function):
    """0 in the forward pass; an infinite gradient in the backward pass (an overflow)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.shape = x.shape
        return x.sum() * 0

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return torch.full(ctx.shape, float("inf"))


def _diverge_at(monkeypatch, step: int, how: str) -> None:
    """Make the NMT loss (``how`` = loss) or its gradient (``how`` = gradient) not finite from ``step`` on."""
    real, calls = trainer.NMTTask.loss, []

    def loss(self, net, batch):
        value, n = real(self, net, batch)
        calls.append(1)
        if len(calls) >= step:
            if how == "loss":
                value = value * float("nan")
            else:
                first = next(net.parameters())
                value = value + _InfiniteGradient.apply(first.reshape(-1)[:1])
        return value, n

    monkeypatch.setattr(trainer.NMTTask, "loss", loss)


@pytest.mark.parametrize("how", ["loss", "gradient"])
def test_divergence_names_the_step(small_data_dir, tmp_path, monkeypatch, how):
    _diverge_at(monkeypatch, 3, how)
    with pytest.raises(DataError, match=r"^loss became NaN \(or inf\) at step 3 ") as exc:
        api.train(tiny_config(small_data_dir, train__max_steps=6, train__valid_every=5), tmp_path / "run")
    assert "\n" not in str(exc.value)


def test_divergence_is_one_line_on_the_command_line(small_data_dir, tmp_path, monkeypatch, capsys):
    _diverge_at(monkeypatch, 2, "gradient")
    cfg = tiny_config(small_data_dir, train__max_steps=4)
    cfg.save_yaml(tmp_path / "c.yaml")
    assert main(["train", "--config", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "scanmt train: error: loss became NaN (or inf) at step 2" in err and "Traceback" not in err
