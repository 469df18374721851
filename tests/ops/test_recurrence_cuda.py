"""``bounded_recurrence``'s Triton backend compiled and run on a GPU, against its torch backend there: the
interpreter's cases, NMT-sized and long rows, and a Transformer training step with bounded heads.

Skipped, with the reason in the summary, where there is no CUDA device or no Triton (CI has neither
GPU); run on a GPU machine with ``pytest tests/ops/test_recurrence_cuda.py``.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch

from scanmt.ops import bounded_recurrence

from .recurrence_cases import CASES, Case, compare

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here"),
    pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton not installed (scanmt[gpu])"),
]

LARGER = [
    Case("csparsemax", N=16, H=8, T=40, S=50),
    Case("csoftmax", shared=True, N=16, H=8, T=40, S=50),
    Case("centmax", alpha="head", N=8, H=4, T=30, S=33),
    Case("csparsemax", N=2, H=2, T=64, S=1024),
    Case("csoftmax", N=2, H=1, T=600, S=40),
]


@pytest.mark.parametrize("case", CASES + LARGER, ids=str)
def test_triton_matches_torch_on_cuda(case: Case) -> None:
    compare(case, "cuda")


def test_auto_picks_triton_on_cuda(monkeypatch) -> None:
    from scanmt.ops import recurrence

    monkeypatch.setattr(recurrence, "_torch_loop", lambda *a, **k: (_ for _ in ()).throw(AssertionError("torch")))
    z = torch.randn(2, 3, 4, 5, device="cuda")
    f = torch.full((2, 1, 5), 2.0, device="cuda")
    p, _ = recurrence.bounded_recurrence(z, f, "csparsemax")
    assert p.shape == z.shape


@pytest.mark.parametrize("transform", ["csparsemax", "centmax"])
def test_transformer_step_with_triton_matches_torch(transform: str) -> None:
    """A float32 Transformer training step with bounded heads (every layer, learned alpha for centmax): the
    loss, the reported attention and every gradient agree between the two backends."""
    from scanmt.config import ModelConfig
    from scanmt.model.transformer.config import TransformerConfig
    from scanmt.data.vocab import PAD_ID
    from scanmt.model.loss import nmt_loss
    from scanmt.model.transformer.model import TransformerModel
    from scanmt.ops.recurrence import use_backend

    torch.manual_seed(0)
    cfg = ModelConfig(arch="transformer", emb_size=32, hidden_size=32, dropout=0.0,
                      transformer=TransformerConfig(heads=4, ff_size=64, encoder_layers=2, decoder_layers=2,
                                                    attention_dropout=0.0, bounded="all"))
    cfg.attention.transform = transform
    cfg.attention.exhaustion = 0.2
    if transform == "centmax":
        cfg.attention.learn_alpha = "head"
    m = TransformerModel(cfg, 40).cuda().train()
    src = torch.randint(4, 40, (6, 9), device="cuda")
    n = torch.tensor([9, 9, 7, 5, 3, 2], device="cuda")
    src[torch.arange(9, device="cuda")[None, :] >= n[:, None]] = PAD_ID
    fert = torch.rand(6, 9, device="cuda") * 2 + 0.2
    tgt_in = torch.randint(4, 40, (6, 11), device="cuda")
    tgt_out = torch.randint(4, 40, (6, 11), device="cuda")
    results = []
    for backend in ("torch", "triton"):
        m.zero_grad()
        with use_backend(backend):
            out = m(src, n, tgt_in, fert)
            loss = nmt_loss(out.logits, tgt_out)
            loss.backward()
        grads = {k: p.grad.clone() for k, p in m.named_parameters() if p.grad is not None}
        results.append((loss.detach(), out.attention.detach(), grads))
    (l0, a0, g0), (l1, a1, g1) = results
    torch.testing.assert_close(l1, l0, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(a1, a0, atol=1e-5, rtol=0)
    assert g0.keys() == g1.keys()
    for k in g0:
        torch.testing.assert_close(g1[k], g0[k], atol=1e-4, rtol=1e-3, msg=lambda msg, k=k: f"{k}: {msg}")


@pytest.mark.parametrize("case", [Case("csparsemax", N=16, H=1, T=1, S=30),
                                  Case("centmax", alpha="head", N=8, H=4, T=1, S=33),
                                  Case("csoftmax", shared=True, N=8, H=4, T=20, S=25)], ids=str)
def test_calls_in_a_deferred_block_do_not_synchronise(case: Case) -> None:
    """Inside ``deferred_checks`` a call (forward and backward; ``T = 1`` is the LSTM's step) reads nothing
    on the host (CUDA's sync debug mode raises on any synchronising call), and the block's end finds an
    infeasible row that the call itself let pass."""
    from scanmt.ops import deferred_checks

    from .recurrence_cases import inputs

    x = inputs(case, "cuda")

    def call(f: torch.Tensor) -> None:
        z = x["z"].detach().requires_grad_()
        p, s = bounded_recurrence(z, f, case.transform, mask=x["mask"], exhaustion=case.exhaustion,
                                  attention_sum=x["attention_sum"], alpha=x["alpha"], shared=case.shared,
                                  backend="triton")
        (p.sum() + s.sum()).backward()

    call(x["fertility"])  # compiles outside the checked region
    with deferred_checks():
        torch.cuda.set_sync_debug_mode("error")
        try:
            call(x["fertility"])
        finally:
            torch.cuda.set_sync_debug_mode("default")
    f = x["fertility"].clone()
    f[0] = 0.01  # the first row's bounds sum below 1 (its sink too)
    with pytest.raises(ValueError, match="infeasible upper bounds.*deferred"):
        with deferred_checks():
            torch.cuda.set_sync_debug_mode("error")
            try:
                call(f)
            finally:
                torch.cuda.set_sync_debug_mode("default")
