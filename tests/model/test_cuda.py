"""The models (the LSTM and the Transformer) and the search on a CUDA device give what they give on the CPU.

Skipped, with the reason in the summary, where there is no CUDA device (CI has
none); run on a GPU machine with ``pytest tests/model/test_cuda.py tests/ops``.
"""

import math

import pytest
import torch

from scanmt.config import ModelConfig
from scanmt.choices import BOUNDED_MODES
from scanmt.model.transformer.config import TransformerConfig
from scanmt.data.vocab import PAD_ID
from scanmt.decoding.search import SearchSettings, search
from scanmt.model.interface import NMTModel
from scanmt.model.loss import nmt_loss
from scanmt.model.lstm.model import LSTMModel
from scanmt.model.output import output_loss
from scanmt.model.transformer.model import TransformerModel

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")

TRANSFORMS = ["softmax", "sparsemax", "csoftmax", "csparsemax", "entmax", "centmax"]


def _model(transform: str, coverage: str = "none", arch: str = "lstm", bounded: str = "last_layer",
           output: str = "softmax") -> NMTModel:
    torch.manual_seed(0)
    if arch == "transformer":
        cfg = ModelConfig(arch="transformer", emb_size=16, hidden_size=16, dropout=0.0, output=output,
                          transformer=TransformerConfig(heads=4, ff_size=32, encoder_layers=2, decoder_layers=2,
                                                        attention_dropout=0.0, bounded=bounded))
    else:
        cfg = ModelConfig(emb_size=16, hidden_size=16, dropout=0.0, output=output)
    cfg.attention.transform = transform
    if transform.startswith("c"):
        cfg.attention.exhaustion = 0.2
    if transform in ("entmax", "centmax"):  # a learned alpha (its gradient is compared too), not 1.5
        cfg.attention.alpha = 1.7
        cfg.attention.learn_alpha = "head" if arch == "transformer" else "model"
    cfg.coverage.type = coverage
    model = TransformerModel(cfg, 15) if arch == "transformer" else LSTMModel(cfg, 15)
    return model.double()


def _batch():
    src = torch.tensor([[5, 6, 7, 8, 9, 10], [9, 10, 11, PAD_ID, PAD_ID, PAD_ID], [7, 8, PAD_ID, PAD_ID, PAD_ID, PAD_ID]])
    n = torch.tensor([6, 3, 2])
    fert = torch.tensor([[1.0, 2.0, 0.5, 1.0, 1.0, 3.0], [1.0, 1.0, 1.0, 0, 0, 0], [0.7, 2.0, 0, 0, 0, 0]])
    tgt_in = torch.tensor([[2, 11, 12, 13, 6, 7], [2, 13, 5, 9, PAD_ID, PAD_ID], [2, 14, 8, PAD_ID, PAD_ID, PAD_ID]])
    tgt_out = torch.tensor([[11, 12, 13, 6, 7, 3], [13, 5, 9, 3, PAD_ID, PAD_ID], [14, 8, 3, PAD_ID, PAD_ID, PAD_ID]])
    return src, n, fert.double(), tgt_in, tgt_out


def _loss_and_grads(m: NMTModel, device: str, output: str = "softmax"):
    m = m.to(device).train()  # cuDNN's LSTM backward needs training mode; dropout is 0
    src, n, fert, tgt_in, tgt_out = (t.to(device) for t in _batch())
    fert = fert if m.constrained else None
    m.zero_grad()
    out = m(src, n, tgt_in, fert)
    loss = nmt_loss(out.logits, tgt_out) if output == "softmax" else output_loss(out.logits, tgt_out, output)
    loss.backward()
    grads = {k: p.grad.detach().cpu().clone() for k, p in m.named_parameters() if p.grad is not None}
    return loss.detach().cpu(), out.attention.detach().cpu(), grads


@pytest.mark.parametrize("coverage", ["none", "linguistic"])
@pytest.mark.parametrize("transform", TRANSFORMS)
def test_forward_and_backward_match_the_cpu(transform, coverage):
    m = _model(transform, coverage)
    # the model runs in float64, but nmt_loss computes the cross-entropy in float32 by design,
    # so the loss and the gradients agree to float32 rounding; the attention to float64's
    _assert_same(*_loss_and_grads(m, "cpu"), *_loss_and_grads(m, "cuda"))


def _assert_same(loss0, attn0, g0, loss1, attn1, g1) -> None:
    torch.testing.assert_close(loss1, loss0, atol=0, rtol=1e-6)
    torch.testing.assert_close(attn1, attn0, atol=1e-9, rtol=0)
    assert g0.keys() == g1.keys() and g0
    for k in g0:
        torch.testing.assert_close(g1[k], g0[k], atol=1e-6, rtol=1e-5, msg=lambda m, k=k: f"gradient of {k}: {m}")


@pytest.mark.parametrize("bounded", BOUNDED_MODES)
@pytest.mark.parametrize("transform", TRANSFORMS)
def test_transformer_forward_and_backward_match_the_cpu(transform, bounded):
    m = _model(transform, arch="transformer", bounded=bounded)
    _assert_same(*_loss_and_grads(m, "cpu"), *_loss_and_grads(m, "cuda"))


@pytest.mark.parametrize("arch", ["lstm", "transformer"])
@pytest.mark.parametrize("output", ["sparsemax", "entmax15", "entmax"])
def test_sparse_output_loss_matches_the_cpu(arch, output):
    m = _model("softmax", arch=arch, output=output)
    _assert_same(*_loss_and_grads(m, "cpu", output), *_loss_and_grads(m, "cuda", output))


@pytest.mark.parametrize("transform", ["softmax", "csparsemax", "centmax"])
def test_transformer_trains_in_bf16_on_cuda(transform):
    """train.precision: bf16 on a GPU: the forward pass under autocast (the fused attention kernels where the
    transform is softmax) gives a loss within bf16 rounding of float32's and finite gradients everywhere."""
    m = _model(transform, arch="transformer").float().cuda().train()
    src, n, fert, tgt_in, tgt_out = (t.cuda() for t in _batch())
    fert = fert.float() if m.constrained else None
    with torch.no_grad():
        ref = nmt_loss(m(src, n, tgt_in, fert).logits, tgt_out)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = m(src, n, tgt_in, fert)
    loss = nmt_loss(out.logits, tgt_out)
    loss.backward()
    value = float(loss.detach())
    assert math.isfinite(value) and abs(value - float(ref)) <= 0.02 * abs(float(ref))
    assert torch.isfinite(out.attention.float()).all()
    for name, p in m.named_parameters():
        assert p.grad is None or torch.isfinite(p.grad).all(), name


def _spy_sdpa(monkeypatch, call_through: bool) -> list:
    """Record (dtype, cuDNN enabled, flash enabled) at every SDPA call of scanmt.model.transformer.fused_attention."""
    import scanmt.model.transformer.fused_attention as fa

    seen = []
    real = fa.F.scaled_dot_product_attention

    def spy(q, *a, **k):
        seen.append((q.dtype, torch.backends.cuda.cudnn_sdp_enabled(), torch.backends.cuda.flash_sdp_enabled()))
        return real(q, *a, **k) if call_through else torch.zeros_like(q)

    monkeypatch.setattr(fa.F, "scaled_dot_product_attention", spy)
    return seen


def test_bf16_fused_attention_leaves_cudnn_out(monkeypatch):
    """Under bf16 autocast every SDPA call of the Transformer runs with cuDNN's backend disabled, and the
    flags are as before afterwards (scanmt.model.transformer.fused_attention)."""
    from torch.nn.attention import SDPBackend

    from scanmt.model.transformer.fused_attention import enabled_backends

    seen = _spy_sdpa(monkeypatch, call_through=True)
    m = _model("softmax", arch="transformer").float().cuda().train()
    src, n, _, tgt_in, tgt_out = (t.cuda() for t in _batch())
    before = enabled_backends()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        nmt_loss(m(src, n, tgt_in).logits, tgt_out).backward()
    assert enabled_backends() == before
    assert len(seen) >= 4 and all(dtype == torch.bfloat16 for dtype, _, _ in seen)
    assert not any(cudnn for _, cudnn, _ in seen)
    assert all(flash == before[SDPBackend.FLASH_ATTENTION] for _, _, flash in seen)


def test_fused_attention_keeps_cudnn_when_it_is_the_only_backend(monkeypatch):
    """A caller that enables cuDNN alone (benchmarks/train_throughput.py --sdpa cudnn) keeps it."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from scanmt.model.transformer.fused_attention import fused_attention

    seen = _spy_sdpa(monkeypatch, call_through=False)
    q = torch.randn(2, 4, 5, 64, device="cuda", dtype=torch.bfloat16)
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        fused_attention(q, q, q)
    assert seen == [(torch.bfloat16, True, False)]


@pytest.mark.parametrize("arch", ["lstm", "transformer"])
@pytest.mark.parametrize("transform", TRANSFORMS)
def test_beam_search_matches_the_cpu(transform, arch):
    m = _model(transform, arch=arch).eval()
    src, n, fert, _, _ = _batch()
    fert = fert if m.constrained else None
    kw = dict(beam=4, max_len_a=3.0, max_len_b=4)
    hyps0 = search(m.to("cpu"), src, n, fert, settings=SearchSettings(**kw))
    hyps1 = search(m.to("cuda"), src.cuda(), n.cuda(), None if fert is None else fert.cuda(), settings=SearchSettings(**kw))
    assert len(hyps0) == len(hyps1) == len(n)
    for h0, h1 in zip(hyps0, hyps1):
        assert h1.tokens == h0.tokens
        assert h1.log_prob == pytest.approx(h0.log_prob, abs=1e-9)
        torch.testing.assert_close(h1.attention.cpu(), h0.attention, atol=1e-9, rtol=0)
