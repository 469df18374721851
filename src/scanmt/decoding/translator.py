"""Translate raw or subword-encoded text with a model (greedy or beam), in input order."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import torch
from tqdm import tqdm

from scanmt.config import DecodeConfig, check_decode_config
from scanmt.data.attention_file import SentenceAttention
from scanmt.data.dataset import Batch, ParallelData
from scanmt.data.pipeline import TextPipeline
from scanmt.data.vocab import EOS
from scanmt.decoding.search import Hypothesis, SearchSettings, search, search_encoded
from scanmt.errors import ConfigError, DataError
from scanmt.fertility import sink as sink_convention
from scanmt.fertility.providers import ActualFertility, FertilityProvider
from scanmt.fertility.rules import CONSTRAINED_TRANSFORMS
from scanmt.model.build import build_model
from scanmt.model.checkpoint import Checkpoint
from scanmt.model.interface import DecoderState, EncoderOutput, NMTModel

log = logging.getLogger(__name__)


@dataclass
class Translation:
    """One output sentence: detokenized ``text``, its subword ``pieces``, the search result.

    ``fertility`` holds the upper bounds ``f`` of the source subwords used by a
    constrained model (``[len(src_pieces)]``, the sink's infinite bound left out),
    or None for an unconstrained one.  ``sink``: whether the model appended the
    ``<sink>`` (the last column of ``hypothesis.attention``; :mod:`scanmt.fertility.sink`).
    """

    text: str
    pieces: list[str]
    src_pieces: list[str]
    hypothesis: Hypothesis
    fertility: list[float] | None = None
    sink: bool = False

    @property
    def attention_tokens(self) -> tuple[list[str], list[str]]:
        """(source tokens incl. ``<sink>`` if used, output tokens incl. ``</s>``) labelling ``attention``."""
        return sink_convention.source_labels(self.src_pieces, self.sink), list(self.pieces) + [EOS]

    def sentence_attention(self) -> SentenceAttention:
        """This translation's attention as the attention file stores it (bounds per column, ``inf`` at the sink)."""
        src, hyp = self.attention_tokens
        fert = None if self.fertility is None else np.asarray(
            sink_convention.column_bounds(self.fertility, self.sink), dtype=np.float32)
        return SentenceAttention(self.hypothesis.attention.numpy(), src, hyp, fert, sink=self.sink)


@dataclass(frozen=True)
class SearchStats:
    """What the searches of some translations did (empty inputs and forced decoding left out).

    ``mean_support``: the words of nonzero probability per output step (the ``</s>`` step included), over every
    step of every output (the vocabulary size for softmax); ``exact``: sentences whose search was exact (Peters
    et al.; :mod:`scanmt.decoding.search`); ``forced``: outputs that ended with a ``</s>`` of zero probability.
    """

    sentences: int
    mean_support: float
    exact: int
    forced: int

    @property
    def exact_share(self) -> float:
        """The share of the sentences whose search was exact (0 without sentences)."""
        return self.exact / self.sentences if self.sentences else 0.0

    @classmethod
    def of(cls, translations: Sequence["Translation"]) -> "SearchStats":
        hyps = [t.hypothesis for t in translations if t.hypothesis.support is not None]
        steps = sum(len(h.support) for h in hyps)  # type: ignore[arg-type]
        support = sum(sum(h.support) for h in hyps)  # type: ignore[arg-type]
        return cls(len(hyps), support / steps if steps else 0.0, sum(bool(h.exact) for h in hyps),
                   sum(h.forced for h in hyps))

    def to_dict(self) -> dict[str, int | float]:
        """The fields and ``exact_share``, as ``scanmt translate --search-stats`` writes them."""
        return {**dataclasses.asdict(self), "exact_share": self.exact_share}

    def describe(self, output: str) -> str:
        """One line of ``scanmt translate``'s summary."""
        line = (f"output {output}: mean support {self.mean_support:.2f} words per step; search exact for "
                f"{self.exact}/{self.sentences} sentences ({100 * self.exact_share:.1f}%)")
        if self.forced:
            line += f"; {self.forced} ended with a forced </s> of zero probability"
        return line


@dataclass
class EncodedBatch:
    """One decoding batch encoded once (``positions`` index the ``ParallelData``)."""

    positions: list[int]
    enc: EncoderOutput
    state: DecoderState
    src_len: torch.Tensor


def check_device(device: str | torch.device) -> torch.device:
    """``device`` as a ``torch.device`` this machine has; a :class:`ConfigError` naming ``--device`` otherwise
    (an unknown name, CUDA without CUDA, a GPU number beyond the GPUs there are)."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ConfigError(f"--device {device}: not a device; expected cpu, cuda or cuda:N") from None
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ConfigError(f"--device {device}: this machine has no CUDA GPU that torch can use; use --device cpu")
        if dev.index is not None and dev.index >= count:
            raise ConfigError(f"--device {device}: this machine has {count} CUDA GPU(s), numbered from 0")
    elif dev.type != "cpu":
        raise ConfigError(f"--device {device}: scanmt decodes on cpu or cuda[:N], not {dev.type}")
    return dev


def check_fertility_rows(fertility: Sequence[Sequence[float]], src_lens: Sequence[int]) -> None:
    """Raise :class:`DataError` unless ``fertility`` has one row per sentence, one number per source subword."""
    if len(fertility) != len(src_lens):
        raise DataError(f"fertility: {len(fertility)} row(s) for {len(src_lens)} sentence(s); give one row per "
                        "sentence, one number per source subword")
    for i, (row, n) in enumerate(zip(fertility, src_lens)):
        if len(row) != n:
            raise DataError(f"fertility row {i + 1}: {len(row)} number(s) for {n} source subword(s)")


class Translator:
    """Decode with ``model``; a constrained model takes its fertility bounds from ``provider``
    (the checkpoint's) unless they are given explicitly."""

    def __init__(
        self,
        model: NMTModel,
        pipeline: TextPipeline,
        decode: DecodeConfig,
        *,
        max_len: int = 0,
        provider: FertilityProvider | None = None,
        device: str | torch.device = "cpu",
    ):
        device = check_device(device)
        self.model = model.to(device).eval()
        self.pipeline = pipeline
        self._decode = decode  # a Config's, checked when it was built; searches use it as it is
        self.max_len = max_len
        self.provider = provider
        self.device = torch.device(device)

    @property
    def decode(self) -> DecodeConfig:
        """The decode settings (beam, penalties, batch size); new ones are checked once, when set."""
        return self._decode

    @decode.setter
    def decode(self, value: DecodeConfig) -> None:
        check_decode_config(value)  # the penalties, and min_len
        self._decode = value

    @classmethod
    def from_checkpoint(cls, path: str | Path, device: str = "cpu", **kwargs) -> "Translator":
        check_device(device)  # before the checkpoint is read
        ckpt = Checkpoint.load(path)
        cfg = ckpt.nmt_config()
        pipeline = ckpt.text_pipeline()
        model = build_model(cfg, len(pipeline.vocab), ckpt.weights, what=str(path))
        kwargs.setdefault("provider", ckpt.fertility_provider())
        tr = cls(model, pipeline, cfg.decode, max_len=cfg.data.max_len, device=device, **kwargs)
        tr.config = cfg
        return tr

    @property
    def fertility_strategy(self) -> str | None:
        """The strategy of the fertility provider (None without one)."""
        return self.provider.name if self.provider is not None else None

    def _bounds_provider(self) -> FertilityProvider:
        """The provider of bounds not given explicitly; without one they must be given, as for the oracle."""
        return self.provider if self.provider is not None else ActualFertility()

    def source_bounds(self, src_pieces: Sequence[Sequence[str]]) -> list[list[float]]:
        """The fertility bounds ``[S]`` of each source sentence of ``S`` subword pieces, from the provider (the
        checkpoint's); for teacher forcing a constrained model outside the search."""
        return self._bounds_provider().apply(src_pieces)

    # ------------------------------------------------------------------ core
    def _batches(self, data: ParallelData) -> Iterator[tuple[list[int], Batch, torch.Tensor | None]]:
        """``(positions, batch on device, fertility or None)`` in decoding order; a constrained model's
        bounds come from ``data`` or, where it has none, from the provider."""
        for positions in data.sequential_batches(self.decode.batch_size):
            batch = data.make_batch(positions).to(self.device)
            fert = batch.fertility
            if self.model.constrained and fert is None:
                fert = self._provided_bounds([data.src[i] for i in positions], batch.src.shape)
            yield positions, batch, fert

    def settings(self, beam: int | None = None) -> SearchSettings:
        """The search settings of ``self.decode`` (its beam unless ``beam`` is given; 1 = greedy, no penalties)."""
        return SearchSettings.of(self.decode, beam)

    def search(self, data: ParallelData, *, beam: int | None = None, progress: bool = False) -> list[Hypothesis]:
        """Decode every sentence of ``data``; results in ``data`` order.

        ``beam <= 1`` is greedy search (no penalties); otherwise beam search with the
        length and coverage penalties of ``self.decode``.
        """
        settings = self.settings(max(beam, 1) if beam is not None else None)
        out: list[Hypothesis | None] = [None] * len(data)
        bar = tqdm(total=len(data), desc=f"translate (beam {settings.beam})", unit="sent", disable=not progress,
                   leave=False)
        for positions, batch, fert in self._batches(data):
            hyps = search(self.model, batch.src, batch.src_len, fert, settings=settings)
            for p, h in zip(positions, hyps):
                out[p] = h
            bar.update(len(positions))
        bar.close()
        return out  # type: ignore[return-value]

    @torch.no_grad()
    def encode_all(self, data: ParallelData) -> list[EncodedBatch]:
        """Encode every batch of ``data`` once, to run many searches from it (:meth:`search_encoded`)."""
        out = []
        for positions, batch, fert in self._batches(data):
            enc = self.model.encode(batch.src, batch.src_len, fert)
            out.append(EncodedBatch(positions, enc, self.model.init_state(enc), batch.src_len))
        return out

    def search_encoded(
        self, encoded: Sequence[EncodedBatch], n: int, *, beam: int | None = None
    ) -> list[list[Hypothesis]]:
        """Beam search (penalties of ``self.decode``) from :meth:`encode_all`; all finished
        hypotheses per sentence, best first, in ``data`` order (``n = len(data)``)."""
        settings = self.settings(beam)
        out: list[list[Hypothesis] | None] = [None] * n
        for e in encoded:
            for p, h in zip(e.positions, search_encoded(self.model, e.enc, e.state, e.src_len, settings=settings)):
                out[p] = h
        return out  # type: ignore[return-value]

    def texts(self, hyps: Sequence[Hypothesis]) -> list[str]:
        """Detokenized output text of each hypothesis."""
        pipe = self.pipeline
        return [pipe.detokenize_target(pipe.target_pieces(h.tokens)) for h in hyps]

    def _provided_bounds(self, src_ids: list[list[int]], shape: torch.Size) -> torch.Tensor:
        """The provider's bounds ``[B, S]`` (0 at padding) of a batch of id sentences."""
        values = self._bounds_provider().apply_ids(src_ids, self.pipeline.vocab)
        fert = torch.zeros(shape, dtype=torch.float32)
        for b, v in enumerate(values):
            fert[b, : len(v)] = torch.tensor(list(v), dtype=torch.float32)
        return fert.to(self.device)

    def translate_pieces(
        self,
        src_pieces: Sequence[Sequence[str]],
        *,
        beam: int | None = None,
        progress: bool = False,
        fertility: Sequence[Sequence[float]] | None = None,
    ) -> list[Translation]:
        """Translate subword sentences; ``fertility`` (one list per sentence) overrides the model's provider."""
        vocab = self.pipeline.vocab
        data = ParallelData([vocab.encode(p) for p in src_pieces], None)
        if fertility is None and self.model.constrained:
            fertility = self.source_bounds(src_pieces)  # once, so that the translations can report it
        if fertility is not None:
            data = data.with_fertility(fertility)
        hyps = self.search(data, beam=beam, progress=progress)
        out = []
        for i, (sp, h) in enumerate(zip(src_pieces, hyps)):
            pieces = self.pipeline.target_pieces(h.tokens)
            fert = [float(x) for x in fertility[i]] if fertility is not None and self.model.constrained else None
            out.append(Translation(self.pipeline.detokenize_target(pieces), pieces, list(sp), h, fert, self.model.sink))
        return out

    @torch.no_grad()
    def force(
        self, src_lines: Sequence[str], tgt_lines: Sequence[str], *, progress: bool = False, source: str = "input"
    ) -> list[Translation]:
        """Forced decoding: attention and ``log P(tgt|src)`` of given target sentences (raw text); ``source``
        names the input in errors (:meth:`check_source_lengths`).

        Used to extract alignments from attention for AER/SAER against gold links.
        """
        src_pieces = self.pipeline.source_pieces_all(src_lines)
        self.check_source_lengths(src_pieces, source)
        return self.force_pieces(src_pieces, self.pipeline.target_pieces_all(tgt_lines), progress=progress)

    @torch.no_grad()
    def force_pieces(
        self, src_pieces: Sequence[Sequence[str]], tgt_pieces: Sequence[Sequence[str]], *, progress: bool = False
    ) -> list[Translation]:
        """:meth:`force` on subword pieces."""
        vocab = self.pipeline.vocab
        data = ParallelData([vocab.encode(p) for p in src_pieces], [vocab.encode(p) for p in tgt_pieces])
        out: list[Translation | None] = [None] * len(data)
        bar = tqdm(total=len(data), desc="forced decoding", unit="sent", disable=not progress, leave=False)
        for positions, batch, fert in self._batches(data):
            res = self.model(batch.src, batch.src_len, batch.tgt_in, fert)
            # model.output's log-probabilities: -inf where a sparse output gives a target word zero probability
            logp = self.model.output_log_probs(res.logits.float()).gather(2, batch.tgt_out.unsqueeze(2)).squeeze(2)
            for row, p in enumerate(positions):
                T = len(data.tgt[p]) + 1
                S = sink_convention.columns(len(data.src[p]), self.model.sink)
                lp = float(logp[row, :T].sum())
                hyp = Hypothesis(data.tgt[p], lp, lp, res.attention[row, :T, :S].float().cpu())
                text = self.pipeline.detokenize_target(list(tgt_pieces[p]))
                f = fert[row, : len(data.src[p])].tolist() if fert is not None else None
                out[p] = Translation(text, list(tgt_pieces[p]), list(src_pieces[p]), hyp, f, self.model.sink)
            bar.update(len(positions))
        bar.close()
        return out  # type: ignore[return-value]

    @torch.no_grad()
    def forced_word_probs(
        self, src_pieces: Sequence[Sequence[str]], tgt_pieces: Sequence[Sequence[str]],
        queries: Sequence[Sequence[tuple[int, int]]],
    ) -> list[list[tuple[float, bool]]]:
        """Teacher-forced on ``tgt_pieces``: for each sentence ``i`` and each query ``(t, word)`` of ``queries[i]``
        (the model has read the first ``t`` target pieces, ``0 <= t <= len(tgt_pieces[i])``; ``word`` a vocabulary
        id), the probability of the next word being ``word`` (``model.output``'s distribution, so exactly 0 is
        possible under a sparse output) and whether ``word`` is the most probable next word there, in the order of
        the queries.  One forward pass per batch answers every query of its sentences.  A constrained model takes
        its bounds from the provider (the checkpoint's), as :meth:`translate_lines` does."""
        if len(queries) != len(src_pieces) or len(tgt_pieces) != len(src_pieces):
            raise ValueError(f"{len(src_pieces)} sources, {len(tgt_pieces)} targets and {len(queries)} query lists")
        vocab = self.pipeline.vocab
        for i, (tgt, qs) in enumerate(zip(tgt_pieces, queries)):
            bad = next((t for t, _ in qs if not 0 <= t <= len(tgt)), None)
            if bad is not None:
                raise ValueError(f"sentence {i}: step {bad} outside 0..{len(tgt)} (its target has {len(tgt)} pieces)")
            word = next((w for _, w in qs if not 0 <= w < len(vocab)), None)
            if word is not None:
                raise ValueError(f"sentence {i}: word id {word} outside the vocabulary's 0..{len(vocab) - 1}")
        data = ParallelData([vocab.encode(p) for p in src_pieces], [vocab.encode(p) for p in tgt_pieces])
        out: list[list[tuple[float, bool]]] = [[] for _ in src_pieces]
        for positions, batch, fert in self._batches(data):
            rows = [(r, t, w) for r, p in enumerate(positions) for t, w in queries[p]]
            if not rows:
                continue
            logits = self.model(batch.src, batch.src_len, batch.tgt_in, fert).logits  # [B, T, V]
            picked = logits[[r for r, _, _ in rows], [t for _, t, _ in rows]].float()  # [N, V]
            log_p = self.model.output_log_probs(picked)
            words = torch.tensor([w for _, _, w in rows], device=log_p.device)
            p_word = log_p.gather(1, words[:, None]).squeeze(1).exp().tolist()
            best = (log_p.argmax(-1) == words).tolist()
            for (r, _, _), p, b in zip(rows, p_word, best):
                out[positions[r]].append((p, b))
        return out

    def translate_lines(
        self,
        lines: Sequence[str],
        *,
        beam: int | None = None,
        progress: bool = False,
        source: str = "input",
        fertility: Sequence[Sequence[float]] | None = None,
        max_len: int | None = None,
    ) -> list[Translation]:
        """Raw sentences -> translations, one per line, in order.

        An empty (or blank) line gives an empty translation.  With ``max_len``, a
        sentence of more subwords is cut to its first ``max_len`` (with a warning that
        counts them); without, sentences longer than the model was trained on
        (``data.max_len``) are translated in full, with a warning that counts them.
        ``source`` names the input in the warnings.
        """
        if fertility is not None:
            self.check_uses_bounds()
        src_pieces = self.pipeline.source_pieces_all(lines)
        if fertility is not None:
            check_fertility_rows(fertility, [len(p) for p in src_pieces])
        if max_len:
            src_pieces, fertility = self._cut_lengths(src_pieces, fertility, max_len, source)
        self.check_source_lengths(src_pieces, source)
        if not max_len:  # after the check: a line refused as too long is not "translated in full"
            self._warn_longer_than_trained(src_pieces, source)
        todo = [i for i, pieces in enumerate(src_pieces) if pieces]
        out = [self._empty_translation() for _ in src_pieces]
        if todo:
            fert = None if fertility is None else [fertility[i] for i in todo]
            done = self.translate_pieces([src_pieces[i] for i in todo], beam=beam, progress=progress, fertility=fert)
            for i, t in zip(todo, done):
                out[i] = t
        if len(todo) < len(out):
            log.info("%s: %d empty line(s) give empty translations", source, len(out) - len(todo))
        return out

    def check_uses_bounds(self, option: str = "--fertility") -> None:
        """Refuse fertility bounds given (``option``) to a model whose transform does not use them."""
        if not self.model.constrained:
            raise ConfigError(f"{option}: fertility bounds were given, but the model's attention transform "
                              f"{self.model.cfg.attention.transform} does not use them (only "
                              f"{', '.join(sorted(CONSTRAINED_TRANSFORMS))} do): drop {option}")

    def check_source_lengths(self, src_pieces: Sequence[Sequence[str]], source: str) -> None:
        """Refuse, before any decoding, a sentence of more subwords than ``decode.max_source_len`` (the attention
        kept for it grows with the square of its length); the error names ``source``, the line and the length."""
        limit = self.decode.max_source_len
        for i, pieces in enumerate(src_pieces):
            if len(pieces) > limit:
                raise DataError(
                    f"{source}:{i + 1}: the line has {len(pieces)} subwords, more than decode.max_source_len={limit} "
                    "(decoding memory grows with the square of the length): split the line, cut such lines with "
                    "--max-len N, or raise the limit with --max-source-len N"
                )

    def _cut_lengths(
        self, src_pieces: list[list[str]], fertility: Sequence[Sequence[float]] | None, max_len: int, source: str,
    ) -> tuple[list[list[str]], Sequence[Sequence[float]] | None]:
        """Cut sentences to ``max_len`` subwords (and their fertilities), with a warning that counts them."""
        long = [i for i, pieces in enumerate(src_pieces) if len(pieces) > max_len]
        if not long:
            return src_pieces, fertility
        log.warning("%s: %d line(s) have more than --max-len %d subwords and were cut to their first %d (lines %s)",
                    source, len(long), max_len, max_len, _first_lines(long))
        cut = [pieces[:max_len] for pieces in src_pieces]
        return cut, None if fertility is None else [list(f)[:max_len] for f in fertility]

    def _warn_longer_than_trained(self, src_pieces: Sequence[Sequence[str]], source: str) -> None:
        """Warn about (and count) sentences longer than the model was trained on (``data.max_len``)."""
        long = [i for i, pieces in enumerate(src_pieces) if self.max_len and len(pieces) > self.max_len]
        if long:
            log.warning("%s: %d line(s) have more than %d subwords, the longest the model was trained on "
                        "(data.max_len); translated in full (lines %s; --max-len N cuts them)",
                        source, len(long), self.max_len, _first_lines(long))

    def _empty_translation(self) -> Translation:
        """The translation of an empty line: no words, ``</s>`` attending to the sink (if any)."""
        hyp = Hypothesis([], 0.0, 0.0, torch.ones(1, sink_convention.columns(0, self.model.sink)))
        return Translation("", [], [], hyp, [] if self.model.constrained else None, self.model.sink)


def _first_lines(indices: Sequence[int]) -> str:
    """The first five of 0-based line ``indices`` as 1-based line numbers (``3, 8, ...``)."""
    return ", ".join(str(i + 1) for i in indices[:5]) + (", ..." if len(indices) > 5 else "")
