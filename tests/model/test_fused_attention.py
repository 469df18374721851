"""The Transformer's fused attention leaves cuDNN's SDPA backend out for half-precision GPU inputs only
(scanmt.model.transformer.fused_attention); the GPU half of this is in tests/model/test_cuda.py."""

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend

from scanmt.model.transformer import fused_attention as fa

FLASH, EFF, MATH, CUDNN = (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH,
                           SDPBackend.CUDNN_ATTENTION)


def _flags(flash=True, eff=True, math=True, cudnn=True):
    return {FLASH: flash, EFF: eff, MATH: math, CUDNN: cudnn}


@pytest.mark.parametrize("flags, expected", [
    (_flags(), [FLASH, EFF, MATH]),                                 # PyTorch's default: cuDNN goes
    (_flags(flash=False), [EFF, MATH]),                             # the user's other choices stay
    (_flags(cudnn=False), None),                                    # cuDNN off already: nothing to do
    (_flags(flash=False, eff=False, math=False), None),             # cuDNN alone: the caller asked for it
    (_flags(flash=False, eff=False, math=False, cudnn=False), None),
])
def test_backends_without_cudnn(flags, expected):
    assert fa.backends_without_cudnn(flags) == expected


def test_enabled_backends_reads_the_global_flags():
    from torch.nn.attention import sdpa_kernel

    with sdpa_kernel([MATH]):
        assert fa.enabled_backends() == _flags(flash=False, eff=False, math=True, cudnn=False)
    with sdpa_kernel([CUDNN, EFF]):
        assert fa.enabled_backends() == _flags(flash=False, eff=True, math=False, cudnn=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("masked", [False, True])
def test_cpu_inputs_go_straight_to_sdpa(monkeypatch, dtype, masked):
    """On the CPU the result is SDPA's own, bit for bit, and no backend is restricted."""
    def refuse(*a, **k):
        raise AssertionError("sdpa_kernel entered for a CPU input")

    monkeypatch.setattr(fa, "sdpa_kernel", refuse)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 5, 8, generator=g).to(dtype) for _ in range(3))
    kw = {"attn_mask": torch.rand(2, 1, 1, 5, generator=g) > 0.3} if masked else {"is_causal": True}
    if masked:
        kw["attn_mask"][..., 0] = True  # every row attends somewhere
    ours = fa.fused_attention(q, k, v, **kw)
    assert ours.dtype == dtype
    assert torch.equal(ours, F.scaled_dot_product_attention(q, k, v, **kw))
