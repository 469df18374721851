"""Greedy decoding and batched beam search over an :class:`~scanmt.model.nmt.NMTModel`.

Both return one :class:`Hypothesis` per input sentence (in batch order).  The
beam keeps ``K`` hypotheses per sentence in a ``[B*K]`` batch; after every step
the top ``2K`` extensions are ranked, ``</s>`` extensions ranked inside the top
``K`` become finished hypotheses, and the first ``K`` others continue.  The
decoder state (LSTM states, input feed, the cumulative attention ``beta`` used
for fertility bounds and the coverage penalty, and the CovVector coverage
state) and the attention history are reordered by the backpointers.  A
sentence stops when it has ``K`` finished hypotheses or reaches its maximum
length ``a * |src| + b``.

Penalties (:mod:`.penalties`): a finished hypothesis ``Y`` is scored

    s(Y, X) = log P(Y|X) / lp(|Y|) + cp(X; Y)

with ``|Y|`` counting ``</s>`` and ``cp`` computed from the hypothesis' own
cumulative attention at the step it finished (the ``</s>`` step included; real
source words only, no padding, no ``<sink>``).  ``penalty_mode`` says where the
penalties act:

* ``"rescore"`` (default, Wu et al.): live hypotheses are ranked by their
  accumulated ``log P`` alone; the penalties only rank the finished ones.  The
  set of finished hypotheses therefore does not depend on ``(alpha, beta)``,
  and :func:`rescore` re-ranks it exactly for other settings.
* ``"step"``: at step ``t`` every candidate extension is ranked by
  ``log P / lp(t + 1) + cp(beta_t)``, where ``beta_t`` is its parent's
  cumulative attention including the attention of step ``t`` (the one that
  produced the candidate word); the choice of the top ``2K``, of the
  hypotheses that finish and of those that continue all use this score.  The
  accumulated ``log P`` is kept separately, and a finished hypothesis' score is
  the same formula (so it equals its ranking score).

With ``beam = 1`` and both penalties off, beam search equals greedy search.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from scanmt.config import DecodeConfig, check_penalty_config
from scanmt.data.vocab import BOS_ID, EOS_ID
from scanmt.decoding.penalties import coverage_penalty, hypothesis_score, length_penalty
from scanmt.model.decoder import DecoderState, EncoderOutput
from scanmt.model.nmt import NMTModel


@dataclass
class Hypothesis:
    """A finished translation.

    Attributes:
        tokens: output ids without ``</s>``.
        log_prob: ``log P(Y|X)`` including ``</s>``.
        score: the ranking score (``log_prob / lp + cp``).
        attention: ``[len(tokens) + 1, S']`` attention rows (the ``</s>`` step last).
        coverage: ``[J]`` cumulative attention ``sum_t alpha_tj`` over the real source
            words (no ``<sink>``) when the hypothesis finished; what ``cp`` is computed from.
    """

    tokens: list[int]
    log_prob: float
    score: float
    attention: torch.Tensor
    coverage: torch.Tensor | None = None


def _max_lengths(src_len: torch.Tensor, a: float, b: int) -> torch.Tensor:
    return (src_len.float() * a + b).long().clamp_min(1)


def _force_eos(logp: torch.Tensor, force: torch.Tensor) -> torch.Tensor:
    """Rows where ``force [N]`` is True may only produce ``</s>``."""
    not_eos = torch.arange(logp.size(1), device=logp.device) != EOS_ID
    return logp.masked_fill(force.unsqueeze(1) & not_eos.unsqueeze(0), -torch.inf)


def final_score(hyp: Hypothesis, *, length_alpha: float, coverage_beta: float, coverage_eps: float) -> float:
    """``hyp.log_prob / lp(|Y|) + cp(hyp.coverage)`` — the score of a finished hypothesis."""
    cov = hyp.coverage
    mask = None if cov is None else torch.ones_like(cov, dtype=torch.bool)
    return float(
        hypothesis_score(
            hyp.log_prob, len(hyp.tokens) + 1, cov, mask,
            length_alpha=length_alpha, beta_weight=coverage_beta, eps=coverage_eps,
        )
    )


def rescore(
    nbest: list[list[Hypothesis]], *, length_alpha: float, coverage_beta: float = 0.0, coverage_eps: float = 0.1
) -> list[Hypothesis]:
    """The best hypothesis per sentence of ``nbest`` (from :func:`beam_search_encoded`) under new penalties.

    Exact for ``penalty_mode="rescore"``: there the finished hypotheses do not
    depend on the penalties, so this equals decoding again with them.
    """
    out = []
    for hyps in nbest:
        scored = [
            (final_score(h, length_alpha=length_alpha, coverage_beta=coverage_beta, coverage_eps=coverage_eps), i)
            for i, h in enumerate(hyps)
        ]
        s, i = max(scored, key=lambda p: (p[0], -p[1]))  # first of equal scores, like the beam
        h = hyps[i]
        out.append(Hypothesis(h.tokens, h.log_prob, s, h.attention, h.coverage))
    return out


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
    """Argmax decoding of a batch ``src [B, S]`` (no penalties: score = log P)."""
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
    n_words = src_len.tolist()
    out = []
    for b in range(B):
        n = int(lengths[b])
        score = float(log_prob[b])
        a = att[b, :n, : n_src[b]]
        out.append(Hypothesis(tok_mat[b, : n - 1].tolist(), score, score, a, a[:, : n_words[b]].sum(0)))
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
    coverage_beta: float = 0.0,
    coverage_eps: float = 0.1,
    penalty_mode: str = "rescore",
    max_len_a: float = 2.0,
    max_len_b: int = 10,
) -> list[Hypothesis]:
    """Batched beam search of ``src [B, S]`` with ``beam`` hypotheses per sentence; the best per sentence."""
    enc, state = model.encode(src, src_len, fertility)
    nbest = beam_search_encoded(
        model, enc, state, src_len,
        beam=beam, length_alpha=length_alpha, coverage_beta=coverage_beta, coverage_eps=coverage_eps,
        penalty_mode=penalty_mode, max_len_a=max_len_a, max_len_b=max_len_b,
    )
    return [h[0] for h in nbest]


@torch.no_grad()
def beam_search_encoded(
    model: NMTModel,
    enc: EncoderOutput,
    state: DecoderState,
    src_len: torch.Tensor,
    *,
    beam: int = 5,
    length_alpha: float = 0.0,
    coverage_beta: float = 0.0,
    coverage_eps: float = 0.1,
    penalty_mode: str = "rescore",
    max_len_a: float = 2.0,
    max_len_b: int = 10,
) -> list[list[Hypothesis]]:
    """Beam search from a precomputed encoding (``model.encode(src, src_len, fertility)``).

    ``enc`` and ``state`` are not modified, so one encoding serves many searches
    (``scanmt tune-penalties``).  ``src_len [B]`` are the source lengths without
    the sink.

    Returns:
        every finished hypothesis per sentence, best first (usually ``beam``; the
        last step can finish a few more).
    """
    check_penalty_config(
        DecodeConfig(length_alpha=length_alpha, coverage_beta=coverage_beta, coverage_eps=coverage_eps,
                     penalty_mode=penalty_mode)
    )
    K = beam
    device = enc.memory.device
    step_mode = penalty_mode == "step" and (length_alpha != 0 or coverage_beta != 0)
    B = enc.mask.size(0)
    src_len = src_len.to(device)
    expand = torch.arange(B, device=device).repeat_interleave(K)
    enc = enc.index_select(expand)
    state = state.index_select(expand)
    S = enc.mask.size(1)
    words = torch.arange(S, device=device).unsqueeze(0) < src_len.repeat_interleave(K).unsqueeze(1)  # no sink
    max_len = _max_lengths(src_len, max_len_a, max_len_b)
    max_len_k = max_len.repeat_interleave(K)
    scores = torch.full((B, K), -torch.inf, device=device)  # accumulated log P of the live hypotheses
    scores[:, 0] = 0.0
    y = torch.full((B * K,), BOS_ID, dtype=torch.long, device=device)
    hist_tok = torch.empty(B * K, 0, dtype=torch.long, device=device)
    hist_att = torch.empty(B * K, 0, S, device=device)
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    active = torch.ones(B, dtype=torch.bool, device=device)
    offsets = (torch.arange(B, device=device) * K).unsqueeze(1)
    ranks = torch.arange(2 * K, device=device).unsqueeze(0)
    V = model.vocab_size
    n_src = enc.mask.sum(1).tolist()  # [B*K] real source length (+ sink)
    n_words = src_len.repeat_interleave(K).tolist()
    score_kw = dict(length_alpha=length_alpha, coverage_beta=coverage_beta, coverage_eps=coverage_eps)
    for t in range(int(max_len.max())):
        h, alpha, state = model.decoder.step(model.decoder.emb(y), state, enc)
        logp = _force_eos(model.log_probs(h).float(), (t + 1) >= max_len_k)
        cand = scores.view(-1, 1) + logp  # [B*K, V] accumulated log P of every extension
        if step_mode:
            rank = cand / float(length_penalty(t + 1, length_alpha))
            if coverage_beta:
                rank = rank + coverage_penalty(state.beta, words, coverage_beta, coverage_eps).unsqueeze(1)
        else:
            rank = cand
        top_r, top_i = rank.view(B, K * V).topk(2 * K, dim=1)  # [B, 2K]
        top_s = cand.view(B, K * V).gather(1, top_i)
        origin = top_i // V + offsets  # flat index of the parent hypothesis
        word = top_i % V
        is_eos = word == EOS_ID
        att_now = torch.cat([hist_att, alpha.unsqueeze(1).float()], dim=1)  # [B*K, t+1, S']
        # finish: </s> extensions ranked inside the top K of an active sentence
        fin = is_eos & (ranks < K) & active.unsqueeze(1) & torch.isfinite(top_r)
        if bool(fin.any()):
            beta_cpu = state.beta.float().cpu()
            for b, r in fin.nonzero().tolist():
                o = int(origin[b, r])
                hyp = Hypothesis(
                    hist_tok[o].tolist(), float(top_s[b, r]), 0.0, att_now[o, :, : n_src[o]].cpu(),
                    beta_cpu[o, : n_words[o]].clone(),  # this hypothesis' own coverage, kept from now on
                )
                hyp.score = final_score(hyp, **score_kw)
                finished[b].append(hyp)
            n_fin = torch.tensor([len(f) for f in finished], device=device)
            active = active & (n_fin < K)
        if not bool(active.any()):
            break
        # continue: the K best non-</s> extensions
        key = torch.where(is_eos | ~torch.isfinite(top_r), ranks + 2 * K, ranks)
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
    return [sorted(f, key=lambda hyp: hyp.score, reverse=True) for f in finished]
