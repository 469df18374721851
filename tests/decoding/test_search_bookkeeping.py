"""The search's bookkeeping over the ``[hypotheses, vocabulary]`` scores against direct oracles: the output support
counted per step, and the dropped extensions recorded for exactness.  Both were rewritten for speed (results.md,
section 1e); these tests hold them to the plain definitions on random rows with ``-inf`` entries."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from scanmt.decoding.search import _Extensions, _Live, _support


def _log_probs(gen: torch.Generator, N: int, V: int, zero_share: float) -> torch.Tensor:
    """``[N, V]`` log-probabilities with about ``zero_share`` of them ``-inf`` (never a whole row)."""
    logp = torch.log_softmax(torch.randn(N, V, generator=gen), dim=1)
    zero = torch.rand(N, V, generator=gen) < zero_share
    zero[:, 0] = False
    return logp.masked_fill(zero, -torch.inf)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), N=st.integers(1, 12), V=st.integers(1, 40),
       zero_share=st.sampled_from([0.0, 0.0, 0.3, 0.9, 1.0]))
def test_support_is_the_count_of_finite_log_probabilities(seed, N, V, zero_share):
    logp = _log_probs(torch.Generator().manual_seed(seed), N, V, zero_share)
    got = _support(logp)
    assert got.shape == (N, 1) and got.dtype == torch.long
    assert torch.equal(got, torch.isfinite(logp).sum(1, keepdim=True))


class _Beam:
    """What ``_Extensions.top`` and ``_Live.account`` read of the search's fixed settings."""

    def __init__(self, B: int, K: int, V: int):
        self.K, self.V = K, V
        self.offsets = (torch.arange(B) * K).unsqueeze(1)


def _oracle(was_active, used, index, rank, cand, K, V):
    """The definition, one extension at a time: the finite-rank extensions of an active sentence that were
    neither finished nor kept; whether there is one, and their highest log P."""
    B = was_active.size(0)
    dropped, lost = [], []
    r, c = rank.view(B, K * V), cand.view(B, K * V)
    for b in range(B):
        taken = {int(index[b, j]) for j in range(index.size(1)) if used[b, j]}
        vals = [float(c[b, i]) for i in range(K * V)
                if bool(was_active[b]) and i not in taken and bool(torch.isfinite(r[b, i]))]
        dropped.append(bool(vals))
        lost.append(max(vals, default=-float("inf")))
    return dropped, lost


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), B=st.integers(1, 4), K=st.integers(1, 3), V=st.integers(2, 9),
       zero_share=st.sampled_from([0.0, 0.5, 0.95]), penalised=st.booleans())
def test_dropped_extensions_match_their_definition(seed, B, K, V, zero_share, penalised):
    gen = torch.Generator().manual_seed(seed)
    N = B * K
    scores = torch.randn(B, K, generator=gen) * 3
    scores[torch.rand(B, K, generator=gen) < 0.2] = -torch.inf  # empty beam slots
    cand = scores.view(-1, 1) + _log_probs(gen, N, V, zero_share)
    if penalised:  # a rank that is not log P: scaled, shifted per row, -inf where a coverage term is
        shift = torch.randn(N, 1, generator=gen)
        shift[torch.rand(N, 1, generator=gen) < 0.2] = -torch.inf
        rank = cand / 1.7 + shift
    else:
        rank = cand
    beam = _Beam(B, K, V)
    ext = _Extensions.top(rank, cand, beam)
    used = torch.rand(B, 2 * K, generator=gen) < 0.5
    was_active = torch.rand(B, generator=gen) < 0.8
    live = _Live.__new__(_Live)
    live.dropped = torch.zeros(B, dtype=torch.bool)
    live.lost = torch.full((B,), -torch.inf)
    live.account(was_active, used, ext, rank, cand, beam)
    dropped, lost = _oracle(was_active, used, ext.index, rank, cand, K, V)
    assert live.dropped.tolist() == dropped
    assert live.lost.tolist() == lost
