"""CovVector: the coverage models of Tu et al. (2016, Section 3) for the attention scores.

A coverage model keeps a coverage state ``C [B, S, d]`` per source position
(``LSTMState.covvector`` in :mod:`scanmt.model.lstm.decoder`, reordered by the
beam backpointers), updates it after every decoder step from the attention weights
``a_t`` and contributes ``V C_{t-1,j}`` to the attention scores of the next
step (see :mod:`scanmt.model.lstm.attention`)::

    bilinear (the paper's adaptation):  z_tj = s_t^T (W h_j + V C_{t-1,j})
    MLP (Tu et al., Sec. 3.2):          z_tj = v^T tanh(W s_t + U h_j + V C_{t-1,j})

``V`` is ``[H, d]`` without bias (for ``d = 1`` it is the paper's vector ``v``).
The models (``model.coverage.type``), with ``H_m`` the annotation size, ``H_q``
the decoder state size, ``s_t`` the decoder state that computed ``a_t``
(Tu et al.'s ``t_{i-1}``) and ``C_0 = 0``:

* ``linguistic`` (Sec. 3.1.1, ``Phi = 1``): ``C_t = C_{t-1} + a_t``.
  Parameters: ``V`` = ``H_q``.
* ``linguistic_fertility`` (Eq. 7–8): ``C_t = C_{t-1} + a_t / Phi_j`` with
  ``Phi_j = N * sigmoid(U_f h_j)`` (``N = fertility_scale``, 2 in the paper;
  ``U_f`` is ``1 x H_m`` without bias), computed once per sentence at encode time.
  Parameters: ``H_q + H_m``.
* ``nn`` (Sec. 3.1.2, no gating): a tanh RNN per source position,
  ``C_t = tanh(W C_{t-1} + u a_tj + U h_j + S s_t + b)``.
  Parameters: ``d (d + 1 + H_m + H_q + 1) + H_q d``.
* ``nn_gru`` (Sec. 3.1.2, GRU gating, Cho et al. 2014)::

      z = sigmoid(W_z C_{t-1} + u_z a_tj + U_z h_j + S_z s_t + b_z)
      r = sigmoid(W_r C_{t-1} + u_r a_tj + U_r h_j + S_r s_t + b_r)
      C~ = tanh(W (r * C_{t-1}) + u a_tj + U h_j + S s_t + b)
      C_t = (1 - z) * C_{t-1} + z * C~

  Parameters: ``3 d (d + 1 + H_m + H_q + 1) + H_q d``.

With Tu et al.'s sizes (``H_m = 2000``, ``H_q = 1000``) these are 1K, 3K, 4K,
10K (``d = 1``) and 100K (``d = 10``): the "+1K ... +100K" of their Table 1.

The per-token projections of ``h_j`` (``Phi_j``, or ``U h_j`` of the NN models)
are computed once per sentence by :meth:`CovVector.precompute` and stored in
``LSTMEncoderOutput.covvector_features``.  The coverage of padding positions stays exactly 0.
"""

from __future__ import annotations

import abc

import torch
from torch import nn

from scanmt.config import CoverageConfig


class CovVector(nn.Module, abc.ABC):
    """Base class: ``precompute(memory)``, ``init``, ``update`` and ``score_term``."""

    #: coverage state dimension ``d``
    dim: int = 1

    def __init__(self, query_size: int, memory_size: int, dim: int):
        super().__init__()
        self.dim = dim
        self.V = nn.Linear(dim, query_size, bias=False)

    def precompute(self, memory: torch.Tensor) -> torch.Tensor | None:
        """Per-token features of ``memory [B, S, H_m]`` needed by :meth:`update` (once per sentence)."""
        return None

    def init(self, memory: torch.Tensor) -> torch.Tensor:
        """``C_0 = 0``: ``[B, S, d]`` for ``memory [B, S, H_m]``."""
        return memory.new_zeros(memory.shape[:2] + (self.dim,))

    def score_term(self, cov: torch.Tensor) -> torch.Tensor:
        """``V C_{t-1,j}``: ``[B, S, d]`` -> ``[B, S, H_q]``, added to the attention keys."""
        return self.V(cov)

    @abc.abstractmethod
    def update(
        self, cov: torch.Tensor, attention: torch.Tensor, feats: torch.Tensor | None, query: torch.Tensor,
        mask: torch.Tensor,
    ) -> torch.Tensor:
        """``C_t`` from ``C_{t-1} [B, S, d]``, the attention ``a_t [B, S]``, the precomputed features,
        the decoder state ``query [B, H_q]`` that computed ``a_t`` and ``mask [B, S]``."""


class LinguisticCovVector(CovVector):
    """``C_t = C_{t-1} + a_t`` (``Phi = 1``)."""

    def update(self, cov, attention, feats, query, mask):
        return cov + attention.unsqueeze(-1).to(cov.dtype)


class FertilityCovVector(CovVector):
    """``C_t = C_{t-1} + a_t / Phi_j``, ``Phi_j = N * sigmoid(U_f h_j)``."""

    def __init__(self, query_size: int, memory_size: int, scale: float):
        super().__init__(query_size, memory_size, 1)
        self.scale = scale
        self.U_f = nn.Linear(memory_size, 1, bias=False)

    def fertility(self, memory: torch.Tensor) -> torch.Tensor:
        """``Phi [B, S, 1]`` in ``(0, N)``."""
        return self.scale * torch.sigmoid(self.U_f(memory))

    def precompute(self, memory):
        return self.fertility(memory)

    def update(self, cov, attention, feats, query, mask):
        return cov + attention.unsqueeze(-1).to(cov.dtype) / feats


class NNCovVector(CovVector):
    """Tanh RNN (``gated=False``) or GRU (``gated=True``) coverage of dimension ``d``."""

    def __init__(self, query_size: int, memory_size: int, dim: int, gated: bool):
        super().__init__(query_size, memory_size, dim)
        self.gated = gated
        k = 3 if gated else 1  # blocks: (update gate z, reset gate r,) candidate
        self.k = k
        self.U_h = nn.Linear(memory_size, k * dim, bias=True)  # U h_j + b, precomputed
        self.S_s = nn.Linear(query_size, k * dim, bias=False)  # S s_t
        self.u_a = nn.Linear(1, k * dim, bias=False)  # u a_tj
        if gated:
            self.W_g = nn.Linear(dim, 2 * dim, bias=False)  # W_z, W_r on C_{t-1}
        self.W_c = nn.Linear(dim, dim, bias=False)  # W on C_{t-1} (or r * C_{t-1})

    def precompute(self, memory):
        return self.U_h(memory)

    def update(self, cov, attention, feats, query, mask):
        x = feats + self.S_s(query).unsqueeze(1) + self.u_a(attention.unsqueeze(-1).to(cov.dtype))  # [B, S, k*d]
        d = self.dim
        if self.gated:
            gates = torch.sigmoid(x[..., : 2 * d] + self.W_g(cov))
            z, r = gates[..., :d], gates[..., d:]
            cand = torch.tanh(x[..., 2 * d :] + self.W_c(r * cov))
            new = (1.0 - z) * cov + z * cand
        else:
            new = torch.tanh(x + self.W_c(cov))
        return new * mask.unsqueeze(-1).to(new.dtype)


def build_covvector(cfg: CoverageConfig, query_size: int, memory_size: int) -> CovVector | None:
    """The CovVector of ``model.coverage`` (None for type ``none``), checked when the config was built."""
    if cfg.type == "none":
        return None
    if cfg.type == "linguistic":
        return LinguisticCovVector(query_size, memory_size, 1)
    if cfg.type == "linguistic_fertility":
        return FertilityCovVector(query_size, memory_size, cfg.fertility_scale)
    return NNCovVector(query_size, memory_size, cfg.dim, gated=cfg.type == "nn_gru")


def expected_parameters(cfg: CoverageConfig, query_size: int, memory_size: int) -> int:
    """The number of parameters the coverage model adds (the formulas in the module docstring)."""
    d, hq, hm = cfg.dim, query_size, memory_size
    return {
        "none": 0,
        "linguistic": hq,
        "linguistic_fertility": hq + hm,
        "nn": d * (d + 1 + hm + hq + 1) + hq * d,
        "nn_gru": 3 * d * (d + 1 + hm + hq + 1) + hq * d,
    }[cfg.type]
