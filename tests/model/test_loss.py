"""The fused cross-entropy equals torch's, in value and gradient, with padding and label smoothing."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn import functional as F

from scanmt.data.vocab import PAD_ID
from scanmt.model.loss import _SummedCrossEntropy, nmt_loss


def _case(seed: int, B: int = 3, T: int = 5, V: int = 11, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    logits = (3 * torch.randn(B, T, V, generator=g, dtype=dtype)).requires_grad_()
    target = torch.randint(PAD_ID + 1, V, (B, T), generator=g)
    target[0, 3:] = PAD_ID  # a short sentence
    target[2, 1] = PAD_ID
    return logits, target


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), eps=st.sampled_from([0.0, 0.1, 0.3]))
def test_matches_torch_cross_entropy(seed, eps):
    logits, target = _case(seed)
    ours = nmt_loss(logits, target, eps)
    (g_ours,) = torch.autograd.grad(ours, logits)
    ref = F.cross_entropy(logits.reshape(-1, logits.size(-1)), target.reshape(-1), ignore_index=PAD_ID,
                          reduction="sum", label_smoothing=eps)
    (g_ref,) = torch.autograd.grad(ref, logits)
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(g_ours, g_ref, rtol=1e-5, atol=1e-6)
    assert torch.all(g_ours[target == PAD_ID] == 0)


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_gradcheck_float64(eps):
    logits, target = _case(0, B=3, T=4, V=6, dtype=torch.float64)
    flat = logits.detach().reshape(-1, 6).requires_grad_()
    assert torch.autograd.gradcheck(lambda z: _SummedCrossEntropy.apply(z, target.reshape(-1), eps), (flat,))


def test_all_padding_gives_zero_loss_and_gradient():
    logits = torch.randn(2, 3, 7, requires_grad=True)
    target = torch.full((2, 3), PAD_ID)
    loss = nmt_loss(logits, target, 0.1)
    loss.backward()
    assert loss.item() == 0 and torch.all(logits.grad == 0)
