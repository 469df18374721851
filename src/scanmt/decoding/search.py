"""Greedy decoding and batched beam search over an :class:`~scanmt.model.nmt.NMTModel`.

Both return one :class:`Hypothesis` per input sentence (in batch order).  The
beam keeps ``K`` hypotheses per sentence in a ``[B*K]`` batch; after every step
the top ``2K`` extensions are ranked, ``</s>`` extensions ranked inside the top
``K`` become finished hypotheses, and the first ``K`` others continue.  The
decoder state (LSTM states, input feed and the cumulative attention ``beta`` used
for fertility bounds) and the attention history are reordered by the
backpointers.  A sentence stops when it has ``K`` finished hypotheses or
reaches its maximum length ``a * |src| + b``; finished hypotheses are ranked by
``log P / lp(|Y|)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from scanmt.data.vocab import BOS_ID, EOS_ID
from scanmt.decoding.penalties import length_penalty
from scanmt.model.nmt import NMTModel


@dataclass
class Hypothesis:
    """A finished translation.

    Attributes:
        tokens: output ids without ``</s>``.
        log_prob: ``log P(Y|X)`` including ``</s>``.
        score: the ranking score (``log_prob / lp``).
        attention: ``[len(tokens) + 1, S']`` attention rows (the ``</s>`` step last).
    """

    tokens: list[int]
    log_prob: float
    score: float
    attention: torch.Tensor


def _max_lengths(src_len: torch.Tensor, a: float, b: int) -> torch.Tensor:
    return (src_len.float() * a + b).long().clamp_min(1)


def _force_eos(logp: torch.Tensor, force: torch.Tensor) -> torch.Tensor:
    """Rows where ``force [N]`` is True may only produce ``</s>``."""
    not_eos = torch.arange(logp.size(1), device=logp.device) != EOS_ID
    return logp.masked_fill(force.unsqueeze(1) & not_eos.unsqueeze(0), -torch.inf)


@torch.no_grad()
def greedy_search(
    model: NMTModel,
    src: torch.Tensor,
    src_len: torch.Tensor,
    fertility: torch.Tensor | None = None,
    *,
    max_len_a: float = 2.0,
    max_len_b: int = 10,
) -> list[Hypothesis]:
    """Argmax decoding of a batch ``src [B, S]``."""
    enc, state = model.encode(src, src_len, fertility)
    B = src.size(0)
    max_len = _max_lengths(src_len, max_len_a, max_len_b).to(src.device)
    y = torch.full((B,), BOS_ID, dtype=torch.long, device=src.device)
    done = torch.zeros(B, dtype=torch.bool, device=src.device)
    lengths = torch.zeros(B, dtype=torch.long, device=src.device)
    log_prob = torch.zeros(B, device=src.device)
    toks, attns = [], []
    for t in range(int(max_len.max())):
        h, alpha, state = model.decoder.step(model.decoder.emb(y), state, enc)
        lp = _force_eos(model.log_probs(h), (t + 1) >= max_len)
        best, y = lp.max(dim=1)
        log_prob = log_prob + torch.where(done, torch.zeros_like(best), best)
        lengths = lengths + (~done).long()
        toks.append(y)
        attns.append(alpha)
        done = done | (y == EOS_ID)
        if bool(done.all()):
            break
    tok_mat = torch.stack(toks, 1).cpu()
    att = torch.stack(attns, 1).float().cpu()
    n_src = enc.mask.sum(1).tolist()
    out = []
    for b in range(B):
        n = int(lengths[b])
        score = float(log_prob[b])
        out.append(Hypothesis(tok_mat[b, : n - 1].tolist(), score, score, att[b, :n, : n_src[b]]))
    return out


@torch.no_grad()
def beam_search(
    model: NMTModel,
    src: torch.Tensor,
    src_len: torch.Tensor,
    fertility: torch.Tensor | None = None,
    *,
    beam: int = 5,
    length_alpha: float = 0.0,
    max_len_a: float = 2.0,
    max_len_b: int = 10,
) -> list[Hypothesis]:
    """Batched beam search of ``src [B, S]`` with ``beam`` hypotheses per sentence."""
    K = beam
    device = src.device
    enc, state = model.encode(src, src_len, fertility)
    B = src.size(0)
    expand = torch.arange(B, device=device).repeat_interleave(K)
    enc = enc.index_select(expand)
    state = state.index_select(expand)
    max_len = _max_lengths(src_len, max_len_a, max_len_b).to(device)
    max_len_k = max_len.repeat_interleave(K)
    scores = torch.full((B, K), -torch.inf, device=device)
    scores[:, 0] = 0.0
    y = torch.full((B * K,), BOS_ID, dtype=torch.long, device=device)
    hist_tok = torch.empty(B * K, 0, dtype=torch.long, device=device)
    hist_att = torch.empty(B * K, 0, enc.mask.size(1), device=device)
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    active = torch.ones(B, dtype=torch.bool, device=device)
    offsets = (torch.arange(B, device=device) * K).unsqueeze(1)
    ranks = torch.arange(2 * K, device=device).unsqueeze(0)
    V = model.vocab_size
    n_src = enc.mask.sum(1).tolist()  # [B*K] real source length (+ sink)
    for t in range(int(max_len.max())):
        h, alpha, state = model.decoder.step(model.decoder.emb(y), state, enc)
        logp = _force_eos(model.log_probs(h).float(), (t + 1) >= max_len_k)
        cand = (scores.view(-1, 1) + logp).view(B, K * V)
        top_s, top_i = cand.topk(2 * K, dim=1)  # [B, 2K]
        origin = top_i // V + offsets  # flat index of the parent hypothesis
        word = top_i % V
        is_eos = word == EOS_ID
        att_now = torch.cat([hist_att, alpha.unsqueeze(1).float()], dim=1)  # [B*K, t+1, S']
        # finish: </s> extensions ranked inside the top K of an active sentence
        fin = is_eos & (ranks < K) & active.unsqueeze(1) & torch.isfinite(top_s)
        if bool(fin.any()):
            for b, r in fin.nonzero().tolist():
                o = int(origin[b, r])
                toks = hist_tok[o].tolist()
                s = float(top_s[b, r])
                lp = float(length_penalty(len(toks) + 1, length_alpha))
                finished[b].append(Hypothesis(toks, s, s / lp, att_now[o, :, : n_src[o]].cpu()))
            n_fin = torch.tensor([len(f) for f in finished], device=device)
            active = active & (n_fin < K)
        if not bool(active.any()):
            break
        # continue: the K best non-</s> extensions
        key = torch.where(is_eos | ~torch.isfinite(top_s), ranks + 2 * K, ranks)
        keep = key.argsort(dim=1)[:, :K]  # [B, K]
        next_origin = origin.gather(1, keep).view(-1)
        next_word = word.gather(1, keep).view(-1)
        next_score = top_s.gather(1, keep)
        next_score = torch.where(
            (key.gather(1, keep) < 2 * K) & active.unsqueeze(1), next_score, torch.full_like(next_score, -torch.inf)
        )
        state = state.index_select(next_origin)
        hist_tok = torch.cat([hist_tok.index_select(0, next_origin), next_word.unsqueeze(1)], dim=1)
        hist_att = att_now.index_select(0, next_origin)
        y = next_word
        scores = next_score
    return [max(f, key=lambda hyp: hyp.score) for f in finished]
