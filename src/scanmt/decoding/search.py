"""Beam search over any :class:`~scanmt.model.interface.NMTModel`, through its five calls only.

One entry point, :func:`search` (or :func:`search_encoded` from a kept encoding), with its settings
given once as a frozen :class:`SearchSettings`; greedy decoding is a beam of one
(``SearchSettings.of(decode, beam=1)``: no penalties).  It returns one :class:`Hypothesis` per input
sentence (in batch order).  The beam keeps ``K`` hypotheses per sentence in a ``[B*K]`` batch; after every step
the top ``2K`` extensions are ranked, ``</s>`` extensions ranked inside the top
``K`` become finished hypotheses, and the first ``K`` others continue.  The
decoder state (whatever the architecture keeps, and the cumulative attention
``attention_sum`` that the coverage penalty scores) and the attention history are
reordered by the backpointers (``model.reorder``).  A
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
  ``log P / lp(t + 1) + cp(A_t)``, where ``A_t`` is its parent's
  cumulative attention including the attention of step ``t`` (the one that
  produced the candidate word); the choice of the top ``2K``, of the
  hypotheses that finish and of those that continue all use this score.  The
  accumulated ``log P`` is kept separately, and a finished hypothesis' score is
  the same formula (so it equals its ranking score).

With ``beam = 1`` and both penalties off, this is greedy search.

Zero-probability words (``model.output``: sparsemax, entmax15, entmax; ``log P = -inf``)
-----------------------------------------------------------------------------------------
A sparse output gives most words exactly zero probability.  The rules:

* an extension with a non-finite score (``-inf``, or NaN) is never finished nor kept: a beam
  slot without a finite hypothesis holds ``-inf`` and is never extended into a result, so no
  hypothesis or score is ever NaN or ``-inf``;
* ``</s>`` stays reachable at the length limit: at a row's last step (only ``</s>`` allowed, see
  :func:`_length_rules`) a ``</s>`` of zero probability is given ``log P = 0`` (the forced word
  counts as certain): the hypothesis finishes with the ``log P`` of its words, and
  ``Hypothesis.forced`` says so.  Softmax never gives ``-inf``, so nothing changes for it;
* a sentence stops as soon as no finite extension that is not ``</s>`` is left (its beam cannot
  continue).  If it has no finished hypothesis then, its best live hypothesis (highest ``log P``)
  finishes with a forced ``</s>`` (``log P`` of its words, ``forced``), so every sentence gets a
  translation; this can be shorter than ``decode.min_len`` when the only words with probability
  were a ``</s>`` that ``min_len`` forbade.

Exact search (Peters, Niculae and Martins, 2019: a sparse output sometimes makes beam search exact)
------------------------------------------------------------------------------------------------
``Hypothesis.exact`` says whether the search of its sentence was exact: whether its best finished
hypothesis is the best of every output sequence of nonzero probability that the length rules allow
(``score``; forced ``</s>`` as above).  A search step *drops* the finite extensions that it neither
finishes nor keeps in the beam (those beyond the beam, and every unfinished extension of the step at
which the sentence stops).  The search is exact when

1. it dropped no finite extension: then it enumerated every sequence of nonzero probability, and the
   finished set holds the best one whatever the penalties; or
2. the ranking is plain ``log P`` (no length or coverage penalty: greedy search, or a beam with
   ``length_alpha = coverage_beta = 0``) and the best finished ``log P`` is at least the highest
   ``log P`` of any dropped extension: adding a word never raises ``log P``, so no completion of a
   dropped prefix can beat it.

Softmax gives every word probability, so only case 2 can make its search exact (rarely).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from scanmt.config import DecodeConfig
from scanmt.data.vocab import BOS_ID, EOS_ID
from scanmt.decoding.penalties import Penalties, coverage_penalty, hypothesis_score, length_penalty
from scanmt.errors import ConfigError
from scanmt.model.interface import DecoderState, EncoderOutput, NMTModel


@dataclass(frozen=True)
class SearchSettings(Penalties):
    """How to search, built once: the penalties (:class:`~scanmt.decoding.penalties.Penalties`: ``length_alpha``,
    ``coverage_beta``, ``coverage_eps``, ``penalty_mode``), the ``beam`` size (1: greedy), and the output
    length limits: at most ``max_len_a * |x| + max_len_b`` tokens, ``</s>`` included, and no ``</s>`` before
    ``min_len`` tokens.  Checked when built (a ConfigError naming the ``decode`` key)."""

    beam: int = 5
    max_len_a: float = 2.0
    max_len_b: int = 10
    min_len: int = 1

    def __post_init__(self) -> None:
        self.checked()
        if isinstance(self.beam, bool) or not isinstance(self.beam, int) or self.beam < 1:
            raise ConfigError(f"decode.beam must be a whole number >= 1 (1 = greedy search), got {self.beam!r}")
        if self.min_len < 0:
            raise ConfigError(f"decode.min_len must be >= 0 (0 allows an empty translation), got {self.min_len}")

    @classmethod
    def of(cls, decode: DecodeConfig, beam: int | None = None) -> "SearchSettings":
        """The settings of ``decode`` (its beam unless ``beam`` is given); a beam of one is greedy search
        and has no penalties."""
        beam = decode.beam if beam is None else beam
        penalties = Penalties.of(decode) if beam > 1 else Penalties()
        return cls(**penalties.weights, penalty_mode=penalties.penalty_mode, beam=beam,
                   max_len_a=decode.max_len_a, max_len_b=decode.max_len_b, min_len=decode.min_len)


@dataclass
class Hypothesis:
    """A finished translation.

    Attributes:
        tokens: output ids without ``</s>``.
        log_prob: ``log P(Y|X)`` including ``</s>``.
        score: the ranking score (``log_prob / lp + cp``).
        attention: ``[len(tokens) + 1, S']`` attention rows (the ``</s>`` step last).
        attention_sum: ``[J]`` cumulative attention ``sum_t a_tj`` over the real source
            words (no ``<sink>``) when the hypothesis finished; what ``cp`` is computed from.
        forced: it finished with a ``</s>`` of zero probability (at the length limit, or when its
            sentence had no finite extension left; ``log_prob`` then sums its words only).
        exact: whether the search of its sentence was exact (module docstring); None when the
            hypothesis does not come from a search (forced decoding, an empty input).
        support: the size of the output distribution's support (words of nonzero probability) at
            each of its steps, ``</s>`` step included; None when not from a search.
    """

    tokens: list[int]
    log_prob: float
    score: float
    attention: torch.Tensor
    attention_sum: torch.Tensor | None = None
    forced: bool = False
    exact: bool | None = None
    support: list[int] | None = None


def _max_lengths(src_len: torch.Tensor, a: float, b: int) -> torch.Tensor:
    return (src_len.float() * a + b).long().clamp_min(1)


def _support(logp: torch.Tensor) -> torch.Tensor:
    """``[N, 1]``: the number of words of nonzero probability in each row of ``logp [N, V]``.  A
    log-probability is never +inf or NaN, so ``> -inf`` is ``isfinite``; a dense output (no ``-inf``
    anywhere, found by one cheap ``amin``) has the whole vocabulary in every row."""
    if bool(torch.gt(logp.amin(1), -torch.inf).all()):
        return torch.full((logp.size(0), 1), logp.size(1), dtype=torch.long, device=logp.device)
    return torch.gt(logp, -torch.inf).sum(1, keepdim=True)


def _length_rules(logp: torch.Tensor, t: int, min_len: int, max_len: torch.Tensor) -> torch.Tensor:
    """``logp [N, V]`` of step ``t`` (``t`` tokens so far) under the length limits: rows at their
    maximum length ``max_len [N]`` may only produce ``</s>``; before ``min_len`` tokens the others
    may not produce it (the maximum wins where it is the shorter).  At the maximum, a ``</s>`` of zero
    probability (``-inf``: a sparse output) gets ``log P = 0``, so that it stays reachable."""
    force = (t + 1) >= max_len
    if t >= min_len and not bool(force.any()):
        return logp  # no rule applies at this step: left as it is (and not copied)
    not_eos = torch.arange(logp.size(1), device=logp.device) != EOS_ID
    logp = logp.masked_fill(force.unsqueeze(1) & not_eos.unsqueeze(0), -torch.inf)  # a new tensor
    logp[:, EOS_ID] = logp[:, EOS_ID].masked_fill(force & torch.isneginf(logp[:, EOS_ID]), 0.0)
    if t < min_len:
        logp[:, EOS_ID] = logp[:, EOS_ID].masked_fill(~force, -torch.inf)
    return logp


def final_score(hyp: Hypothesis, *, length_alpha: float, coverage_beta: float, coverage_eps: float) -> float:
    """``hyp.log_prob / lp(|Y|) + cp(hyp.attention_sum)`` — the score of a finished hypothesis."""
    total = hyp.attention_sum
    mask = None if total is None else torch.ones_like(total, dtype=torch.bool)
    return float(
        hypothesis_score(
            hyp.log_prob, len(hyp.tokens) + 1, total, mask,
            length_alpha=length_alpha, coverage_beta=coverage_beta, coverage_eps=coverage_eps,
        )
    )


def rescore(
    nbest: list[list[Hypothesis]], *, length_alpha: float, coverage_beta: float = 0.0, coverage_eps: float = 0.1
) -> list[Hypothesis]:
    """The best hypothesis per sentence of ``nbest`` (from :func:`search_encoded`) under new penalties.

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
        out.append(Hypothesis(h.tokens, h.log_prob, s, h.attention, h.attention_sum, h.forced, h.exact, h.support))
    return out


@torch.no_grad()
def search(
    model: NMTModel,
    src: torch.Tensor,
    src_len: torch.Tensor,
    fertility: torch.Tensor | None = None,
    *,
    settings: SearchSettings = SearchSettings(),
) -> list[Hypothesis]:
    """Search ``src [B, S]`` (lengths ``src_len [B]``; ``fertility [B, S]`` for a constrained model);
    the best hypothesis per sentence."""
    enc = model.encode(src, src_len, fertility)
    return [h[0] for h in search_encoded(model, enc, model.init_state(enc), src_len, settings=settings)]


@dataclass
class _Beam:
    """What stays fixed during one beam search of ``B`` sentences with ``K`` hypotheses each
    (``N = B * K`` rows, hypothesis ``k`` of sentence ``b`` in row ``b * K + k``)."""

    K: int
    V: int
    #: [N, S'] True at the real source words (no padding, no ``<sink>``)
    words: torch.Tensor
    #: [N] the maximum output length of each row's sentence
    max_len: torch.Tensor
    #: [B, 1] the row of each sentence's first hypothesis
    offsets: torch.Tensor
    #: [1, 2K] the ranks 0 .. 2K-1 of the extensions kept per step
    ranks: torch.Tensor
    #: per row: the source length with the sink, and the number of real words
    n_src: list[int]
    n_words: list[int]
    penalties: Penalties

    def rank(self, cand: torch.Tensor, attention_sum: torch.Tensor, t: int) -> torch.Tensor:
        """The ranking score ``[N, V]`` of every extension at step ``t`` from its accumulated
        ``log P`` ``cand [N, V]`` and its parent's cumulative attention ``attention_sum [N, S']``."""
        p = self.penalties
        if not p.rank_live:
            return cand
        rank = cand / float(length_penalty(t + 1, p.length_alpha))
        if p.coverage_beta:
            rank = rank + coverage_penalty(attention_sum, self.words, p.coverage_beta, p.coverage_eps).unsqueeze(1)
        return rank


@dataclass
class _Extensions:
    """The top ``2K`` extensions of each sentence at one step, best first (all ``[B, 2K]``)."""

    rank: torch.Tensor  # ranking score
    score: torch.Tensor  # accumulated log P
    origin: torch.Tensor  # row of the parent hypothesis
    word: torch.Tensor  # the new word
    is_eos: torch.Tensor
    index: torch.Tensor  # position in the sentence's [K * V] extensions

    @classmethod
    def top(cls, rank: torch.Tensor, cand: torch.Tensor, beam: _Beam) -> _Extensions:
        B, KV = rank.size(0) // beam.K, beam.K * beam.V
        top_r, top_i = rank.view(B, KV).topk(2 * beam.K, dim=1)
        word = top_i % beam.V
        return cls(top_r, cand.view(B, KV).gather(1, top_i), top_i // beam.V + beam.offsets, word, word == EOS_ID,
                   top_i)


@dataclass
class _Live:
    """The ``N`` hypotheses being extended (``t`` words so far), and those finished."""

    #: [B, K] accumulated log P (``-inf``: no hypothesis in that slot)
    scores: torch.Tensor
    #: [N] the last word, [N, t] all words, [N, t, S'] their attention rows
    y: torch.Tensor
    tokens: torch.Tensor
    attention: torch.Tensor
    state: DecoderState
    #: [B] sentences that still want hypotheses
    active: torch.Tensor
    finished: list[list[Hypothesis]]
    #: [N, t] the output support size at each step so far
    support: torch.Tensor
    #: [B] whether a finite extension was dropped, and the highest log P of one (exactness)
    dropped: torch.Tensor
    lost: torch.Tensor

    @classmethod
    def start(cls, state: DecoderState, B: int, K: int, S: int, device: torch.device) -> _Live:
        scores = torch.full((B, K), -torch.inf, device=device)
        scores[:, 0] = 0.0  # one live hypothesis per sentence at first
        return cls(
            scores, torch.full((B * K,), BOS_ID, dtype=torch.long, device=device),
            torch.empty(B * K, 0, dtype=torch.long, device=device), torch.empty(B * K, 0, S, device=device),
            state, torch.ones(B, dtype=torch.bool, device=device), [[] for _ in range(B)],
            torch.empty(B * K, 0, dtype=torch.long, device=device), torch.zeros(B, dtype=torch.bool, device=device),
            torch.full((B,), -torch.inf, device=device),
        )

    def _hypothesis(self, o: int, log_prob: float, attention: torch.Tensor, attention_sum: torch.Tensor,
                    support: torch.Tensor, forced: bool, beam: _Beam) -> Hypothesis:
        """Row ``o`` finished with ``</s>`` at this step (``attention [N, t+1, S']``, ``support [N, t+1]``)."""
        hyp = Hypothesis(
            self.tokens[o].tolist(), log_prob, 0.0, attention[o, :, : beam.n_src[o]].cpu(),
            attention_sum[o, : beam.n_words[o]].clone(),  # this hypothesis' own, kept from now on
            forced=forced, support=support[o].tolist(),
        )
        hyp.score = final_score(hyp, **beam.penalties.weights)
        return hyp

    def finish(self, ext: _Extensions, attention: torch.Tensor, support: torch.Tensor, zero_eos: torch.Tensor,
               beam: _Beam) -> torch.Tensor:
        """Finish the finite ``</s>`` extensions ranked inside the top ``K`` of an active sentence;
        ``attention [N, t+1, S']`` and ``support [N, t+1]`` hold this step's rows, ``zero_eos [N]`` the rows
        whose ``</s>`` had zero probability.  Then stop the sentences with no finite extension left but
        ``</s>`` (finishing their best live hypothesis if they have none).  Returns the finished ``[B, 2K]``."""
        fin = ext.is_eos & (beam.ranks < beam.K) & self.active.unsqueeze(1) & torch.isfinite(ext.rank)
        stuck = self.active & ~(~ext.is_eos & torch.isfinite(ext.rank)).any(1)  # nothing left to continue with
        if not bool(fin.any()) and not bool(stuck.any()):
            return fin
        attention_sum = self.state.attention_sum.float().cpu()
        for b, r in fin.nonzero().tolist():
            o = int(ext.origin[b, r])
            self.finished[b].append(self._hypothesis(o, float(ext.score[b, r]), attention, attention_sum, support,
                                                     bool(zero_eos[o]), beam))
        for b in stuck.nonzero().flatten().tolist():
            if not self.finished[b]:  # its best live hypothesis, with a forced </s>
                k = int(self.scores[b].argmax())
                o = b * beam.K + k
                self.finished[b].append(self._hypothesis(o, float(self.scores[b, k]), attention, attention_sum,
                                                         support, True, beam))
        n_fin = torch.tensor([len(f) for f in self.finished], device=self.active.device)
        self.active = self.active & (n_fin < beam.K) & ~stuck
        return fin

    def advance(self, ext: _Extensions, attention: torch.Tensor, support: torch.Tensor, beam: _Beam,
                model: NMTModel) -> torch.Tensor:
        """Continue with the ``K`` best finite non-``</s>`` extensions (reordering the state by the
        backpointers); returns those kept ``[B, 2K]``."""
        K, ranks = beam.K, beam.ranks
        key = torch.where(ext.is_eos | ~torch.isfinite(ext.rank), ranks + 2 * K, ranks)
        keep = key.argsort(dim=1)[:, :K]  # [B, K]
        origin = ext.origin.gather(1, keep).view(-1)
        word = ext.word.gather(1, keep).view(-1)
        score = ext.score.gather(1, keep)
        kept = (key.gather(1, keep) < 2 * K) & self.active.unsqueeze(1)
        self.scores = torch.where(kept, score, torch.full_like(score, -torch.inf))
        self.state = model.reorder(self.state, origin)
        self.tokens = torch.cat([self.tokens.index_select(0, origin), word.unsqueeze(1)], dim=1)
        self.attention = attention.index_select(0, origin)
        self.support = support.index_select(0, origin)
        self.y = word
        return torch.zeros_like(ext.is_eos).scatter_(1, keep, kept)

    def account(self, was_active: torch.Tensor, used: torch.Tensor, ext: _Extensions, rank: torch.Tensor,
                cand: torch.Tensor, beam: _Beam) -> None:
        """Record the finite extensions of the sentences active at this step (``was_active [B]``) that were
        neither finished nor kept (``used [B, 2K]``): whether there were any, and the highest ``log P``."""
        B = was_active.size(0)
        # log P of the extensions of finite rank (-inf elsewhere: a finite rank has a finite log P, and an
        # extension of log P -inf has rank -inf; ranks are never +inf or NaN), the finished and kept ones
        # set to -inf too: what is left are the dropped ones, and their best
        if rank is cand:  # no penalties: the rank is log P itself
            left = cand.clone().view(B, -1)
        else:
            left = torch.where(torch.gt(rank, -torch.inf), cand, -torch.inf).view(B, -1)
        left.scatter_(1, ext.index, left.gather(1, ext.index).masked_fill_(used, -torch.inf))
        best = torch.where(was_active, left.amax(1), -torch.inf)
        self.dropped |= torch.gt(best, -torch.inf)
        self.lost = torch.maximum(self.lost, best)

    def mark_exact(self, penalties: Penalties) -> None:
        """Set ``exact`` on every finished hypothesis (module docstring: exact search)."""
        plain = not penalties.length_alpha and not penalties.coverage_beta
        dropped, lost = self.dropped.tolist(), self.lost.tolist()
        for b, hyps in enumerate(self.finished):
            best = max((h.score for h in hyps), default=-math.inf)
            exact = not dropped[b] or (plain and best >= lost[b])
            for h in hyps:
                h.exact = exact


@torch.no_grad()
def search_encoded(
    model: NMTModel,
    enc: EncoderOutput,
    state: DecoderState,
    src_len: torch.Tensor,
    *,
    settings: SearchSettings = SearchSettings(),
) -> list[list[Hypothesis]]:
    """Beam search from a kept encoding (``enc = model.encode(...)``, ``state = model.init_state(enc)``).

    ``enc`` and ``state`` are not modified, so one encoding serves many searches
    (``scanmt tune-penalties``).  ``src_len [B]`` are the source lengths without the sink.

    Returns:
        every finished hypothesis per sentence, best first (usually ``settings.beam``; the
        last step can finish a few more; at least one).
    """
    K, device, B = settings.beam, enc.memory.device, enc.mask.size(0)
    src_len = src_len.to(device)
    expand = torch.arange(B, device=device).repeat_interleave(K)
    enc = model.reorder(enc, expand)
    S = enc.mask.size(1)
    max_len = _max_lengths(src_len, settings.max_len_a, settings.max_len_b)
    spec = _Beam(
        K, model.vocab_size,
        words=torch.arange(S, device=device).unsqueeze(0) < src_len.repeat_interleave(K).unsqueeze(1),  # no sink
        max_len=max_len.repeat_interleave(K), offsets=(torch.arange(B, device=device) * K).unsqueeze(1),
        ranks=torch.arange(2 * K, device=device).unsqueeze(0), n_src=enc.mask.sum(1).tolist(),
        n_words=src_len.repeat_interleave(K).tolist(), penalties=settings,
    )
    live = _Live.start(model.reorder(state, expand), B, K, S, device)
    for t in range(int(max_len.max())):
        step = model.step(live.y, live.state, enc)
        live.state = step.state
        raw = step.log_probs.float()
        zero_eos = ((t + 1) >= spec.max_len) & torch.isneginf(raw[:, EOS_ID])  # forced </s> of zero probability
        logp = _length_rules(raw, t, settings.min_len, spec.max_len)
        cand = live.scores.view(-1, 1) + logp  # [N, V] accumulated log P of every extension
        rank = spec.rank(cand, live.state.attention_sum, t)
        ext = _Extensions.top(rank, cand, spec)
        attention = torch.cat([live.attention, step.attention.unsqueeze(1).float()], dim=1)  # [N, t+1, S']
        support = torch.cat([live.support, _support(raw)], dim=1)  # [N, t+1]
        was_active = live.active
        used = live.finish(ext, attention, support, zero_eos, spec)
        if bool(live.active.any()):
            used = used | live.advance(ext, attention, support, spec, model)
        live.account(was_active, used, ext, rank, cand, spec)
        if not bool(live.active.any()):
            break
    live.mark_exact(settings)
    return [sorted(f, key=lambda hyp: hyp.score, reverse=True) for f in live.finished]
