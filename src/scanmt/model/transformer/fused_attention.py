"""The Transformer's fused attention: ``F.scaled_dot_product_attention`` with cuDNN's backend left out on GPUs.

PyTorch runs ``F.scaled_dot_product_attention`` with the first usable backend of a priority order.  In
PyTorch's source (``check_prefer_cudnn_attention`` in ``aten/src/ATen/native/transformers/cuda/sdp_utils.cpp``;
pytorch/pytorch#162073 made it the default on sm90 and sm100), on Hopper and Blackwell GPUs with a recent
cuDNN that order starts with cuDNN's attention, which takes only fp16 and bf16 inputs.  A cuDNN
attention graph is built for one shape: a new batch size, query length or key length builds a new graph
(pytorch/pytorch#155958 adds an opt-in that avoids it for some layouts), and in translation batches of
sentences sorted by length nearly every update brings new lengths.

What was measured (an H200, torch 2.11, before this module; ``docs/transformer.md``, section 5): with
``train.precision=bf16`` the Transformer preset trained 18x slower than in fp32, and
``torch.nn.Transformer`` of the same size 14x, while the LSTMs, which call no SDPA, lost only 11-22 %.
Only bf16 and fp16 inputs can reach cuDNN, and both Transformers call SDPA.  That graph rebuilds are the
cause follows from the source above; it has not been measured on a GPU since this module was added
(``benchmarks/train_throughput.py --device cuda --precision fp32 bf16 --sdpa flash efficient cudnn``
times each backend side by side).

:func:`fused_attention` therefore runs fp16/bf16 CUDA inputs with the backends that are enabled, less
cuDNN.  A caller that enables cuDNN alone (``torch.nn.attention.sdpa_kernel([SDPBackend.CUDNN_ATTENTION])``,
as the benchmark's ``--sdpa cudnn`` rows do) keeps it.  CPU inputs and fp32 inputs go straight to SDPA,
so CPU results do not change.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

#: input dtypes that cuDNN's attention takes
HALF_DTYPES = (torch.float16, torch.bfloat16)


def enabled_backends() -> dict[SDPBackend, bool]:
    """Whether each CUDA SDPA backend is enabled now (``torch.backends.cuda``'s global flags)."""
    cuda = torch.backends.cuda
    return {
        SDPBackend.FLASH_ATTENTION: cuda.flash_sdp_enabled(),
        SDPBackend.EFFICIENT_ATTENTION: cuda.mem_efficient_sdp_enabled(),
        SDPBackend.MATH: cuda.math_sdp_enabled(),
        SDPBackend.CUDNN_ATTENTION: cuda.cudnn_sdp_enabled(),
    }


def backends_without_cudnn(enabled: dict[SDPBackend, bool]) -> list[SDPBackend] | None:
    """The enabled backends other than cuDNN, or None to leave the choice as it is: cuDNN is off
    already, or it is the only backend enabled (the caller asked for it)."""
    if not enabled.get(SDPBackend.CUDNN_ATTENTION, False):
        return None
    others = [b for b, on in enabled.items() if on and b != SDPBackend.CUDNN_ATTENTION]
    return others or None


def fused_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kwargs: Any) -> torch.Tensor:
    """``F.scaled_dot_product_attention(q, k, v, **kwargs)``, for fp16/bf16 CUDA inputs without cuDNN's
    backend (see the module docstring).  ``q [N, h, T, d_head]``, ``k, v [N, h, S, d_head]`` ->
    ``[N, h, T, d_head]``."""
    if q.is_cuda and q.dtype in HALF_DTYPES:
        backends = backends_without_cudnn(enabled_backends())
        if backends is not None:
            with sdpa_kernel(backends):
                return F.scaled_dot_product_attention(q, k, v, **kwargs)
    return F.scaled_dot_product_attention(q, k, v, **kwargs)
