"""The cases on which ``bounded_recurrence``'s triton backend must match its torch backend.

Shared by the interpreter tests (``interpreter_recurrence.py``, run in a child process with
``TRITON_INTERPRET=1`` by ``test_recurrence_triton.py``) and the CUDA tests (``test_recurrence_cuda.py``).
Each case runs both backends on the same inputs, forward and backward (a random linear loss on the
probabilities and on the returned attention sum), and compares: the forward to 1e-5, the gradients to
``z``, the fertility, the initial attention sum and a learned alpha to 1e-4 (bfloat16 or float16 ``z``: its
gradient also to one rounding of that dtype).  Every case's batch has a padded row (masked columns, fertility 0 there),
a fully masked row, and random initial attention sums.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from scanmt.ops import bounded_recurrence


@dataclass(frozen=True)
class Case:
    transform: str
    shared: bool = False
    exhaustion: float = 0.2
    dtype: torch.dtype = torch.float32
    #: "none" (csoftmax / csparsemax), "fixed" (1.5), "head" (learned, one per head), "one" (learned, a head at 1)
    alpha: str = "none"
    #: the last column is a sink (fertility inf); without it the fertilities are large enough to stay feasible
    sink: bool = True
    N: int = 3
    H: int = 2
    T: int = 3
    S: int = 6
    #: the scores' standard deviation (20: peaked rows, most of the mass capped at the top)
    scale: float = 2.0

    def __str__(self) -> str:
        return "-".join(str(v) for v in (self.transform, "shared" if self.shared else "own", f"c{self.exhaustion}",
                                          str(self.dtype).split(".")[-1], self.alpha, "sink" if self.sink else "nosink",
                                          f"{self.N}x{self.H}x{self.T}x{self.S}", f"sd{self.scale:g}"))


def _alpha(case: Case, device: str):
    if case.alpha == "none":
        return None
    if case.alpha == "fixed":
        return 1.5
    values = [1.7, 1.3, 2.4, 1.5] if case.alpha == "head" else [1.0, 1.6, 1.2, 2.2]
    return torch.tensor(values[: case.H], dtype=torch.float32, device=device).view(1, case.H, 1)


def inputs(case: Case, device: str, seed: int = 0) -> dict:
    """``z [N, H, T, S]``, ``fertility [N, 1, S]``, ``mask [N, 1, S]``, ``attention_sum`` and ``alpha``."""
    g = torch.Generator().manual_seed(seed)
    N, H, T, S = case.N, case.H, case.T, case.S
    z = (torch.randn(N, H, T, S, generator=g) * case.scale).to(case.dtype)
    if case.sink:
        f = torch.rand(N, 1, S, generator=g) * 1.5 + 0.1
        f[..., -1] = float("inf")
    else:  # sum(f) >= S > T: every step stays feasible
        f = torch.rand(N, 1, S, generator=g) + 1.0
    mask = torch.ones(N, 1, S, dtype=torch.bool)
    mask[0, :, S // 2] = False  # a padded column
    f[0, :, S // 2] = 0.0
    if N > 2:
        mask[2] = False  # a fully masked row
    s0 = torch.rand(N, 1 if case.shared else H, S, generator=g) * 0.3
    to = dict(device=device)
    return dict(z=z.to(**to), fertility=f.to(**to), mask=mask.to(**to), attention_sum=s0.to(**to),
                alpha=_alpha(case, device))


def run(case: Case, backend: str, device: str, seed: int = 0) -> dict:
    """Both outputs and every gradient of one backend."""
    x = inputs(case, device, seed)
    leaves = {k: x[k].clone().requires_grad_() for k in ("z", "fertility", "attention_sum")}
    alpha = x["alpha"]
    if isinstance(alpha, torch.Tensor):
        alpha = leaves["alpha"] = alpha.clone().requires_grad_()
    p, s = bounded_recurrence(leaves["z"], leaves["fertility"], case.transform, mask=x["mask"],
                              exhaustion=case.exhaustion, attention_sum=leaves["attention_sum"], alpha=alpha,
                              shared=case.shared, backend=backend)
    g = torch.Generator().manual_seed(seed + 1)
    wp = torch.randn(p.shape, generator=g).to(device)
    ws = torch.randn(s.shape, generator=g).to(device)
    ((p * wp).sum() + (s * ws).sum()).backward()
    out = {"p": p.detach(), "attention_sum": s.detach()}
    out.update({f"d{k}": v.grad for k, v in leaves.items()})
    return out


def compare(case: Case, device: str) -> None:
    """The triton backend against the torch backend on ``case`` (module docstring)."""
    ref, got = run(case, "torch", device), run(case, "triton", device)
    assert ref.keys() == got.keys()
    for key in ref:
        a, b = ref[key], got[key]
        assert b is not None and a is not None, key
        assert a.shape == b.shape and a.dtype == b.dtype, (key, a.shape, b.shape, a.dtype, b.dtype)
        rtol = torch.finfo(case.dtype).eps if key == "dz" and case.dtype != torch.float32 else 0.0
        atol = 1e-5 if key in ("p", "attention_sum") else 1e-4
        torch.testing.assert_close(b.float(), a.float(), atol=atol, rtol=rtol, msg=lambda m, k=key: f"{case}: {k}: {m}")
    # the probabilities are exact distributions: rows sum to 1, 0 where masked (row 2 is fully masked: all 0)
    p = got["p"]
    live = [i for i in range(case.N) if i != 2]
    sums = p[live].sum(-1)
    assert torch.allclose(sums, torch.ones_like(sums), atol=1e-5)
    assert case.N <= 2 or bool((p[2] == 0).all())
    assert bool((p[0, :, :, case.S // 2] == 0).all())


TRANSFORMS = ("csoftmax", "csparsemax", "centmax")

#: the interpreter's cases (small: each kernel program runs in Python)
CASES = [
    *(Case(t) for t in ("csoftmax", "csparsemax")),
    Case("centmax", alpha="head"),
    *(Case(t, shared=True, H=3) for t in ("csoftmax", "csparsemax")),
    Case("centmax", shared=True, H=3, alpha="head"),
    *(Case(t, exhaustion=0.0, sink=False) for t in ("csoftmax", "csparsemax")),
    Case("centmax", exhaustion=0.0, sink=False, alpha="fixed"),
    *(Case(t, dtype=torch.bfloat16) for t in ("csoftmax", "csparsemax")),
    Case("centmax", dtype=torch.bfloat16, alpha="head"),
    Case("csparsemax", dtype=torch.float16, shared=True),
    Case("centmax", alpha="one"),  # a head at alpha = 1: solved (and differentiated) as csoftmax
    Case("csoftmax", T=1, N=3, H=3),  # one position: the LSTM's and beam search's step
    Case("csparsemax", N=1, H=1, T=2, S=1030),  # a row longer than 1,024 columns
    *(Case(t, scale=20.0, T=4, alpha="head" if t == "centmax" else "none") for t in TRANSFORMS),
]
