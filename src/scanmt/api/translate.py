"""``translate``: raw sentences in, :class:`~scanmt.decoding.translator.Translation` s out; files too."""

from __future__ import annotations

import collections.abc
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from scanmt.api.arguments import check_type
from scanmt.api.decode import DecodeOverrides
from scanmt.api.requests import CommandRequest, option
from scanmt.config import DecodeConfig, key_range
from scanmt.errors import ConfigError
from scanmt.io import atomic_outputs, check_outputs, is_stdio, read_lines, write_lines

if TYPE_CHECKING:
    from scanmt.decoding.translator import SearchStats, Translation, Translator


@dataclass(frozen=True)
class TranslateRequest(CommandRequest):
    """``scanmt translate``: translate the file ``input`` (``-``: standard input) into ``output``.

    The decode options left None keep the checkpoint's settings (``penalties`` is a
    ``tune_penalties`` file; the explicit values override it).  ``force_target``
    replaces search by forced decoding of those target sentences (``output`` gets
    ``log P(target|source)`` per line).  ``search_stats`` names a JSON file for what the
    searches did (:meth:`TranslateResult.search_stats_json`).
    """

    COMMAND = "translate"
    #: checkpoint (``best.pt`` or ``last.pt`` of a run)
    model: str
    input: str
    output: str
    #: beam size; 1 = greedy; None: the checkpoint's ``decode.beam``
    beam: int | None = option(None, key="decode.beam")
    #: cut source sentences longer than this many subwords
    max_len: int | None = option(None, range=key_range("data.max_len"))
    length_alpha: float | None = option(None, key="decode.length_alpha")
    coverage_beta: float | None = option(None, key="decode.coverage_beta")
    coverage_eps: float | None = option(None, key="decode.coverage_eps")
    penalty_mode: str | None = None
    penalties: str | None = None
    batch_size: int | None = option(None, key="decode.batch_size")
    #: no ``</s>`` before this many output tokens (``decode.min_len``); None: the checkpoint's
    min_output_len: int | None = option(None, key="decode.min_len")
    #: attention matrices (.npz), Moses-tokenized output, fertility bounds file, forced targets
    attention_out: str | None = None
    tokenized_out: str | None = None
    fertility: str | None = None
    force_target: str | None = None
    device: str = "cpu"
    #: refuse source sentences of more subwords (``decode.max_source_len``); None: the checkpoint's
    max_source_len: int | None = option(None, key="decode.max_source_len")
    #: a JSON file for the search statistics (mean output support, exact searches, forced ``</s>``)
    search_stats: str | None = None

    def decode_overrides(self) -> DecodeOverrides:
        return DecodeOverrides(self.penalties, self.length_alpha, self.coverage_beta, self.coverage_eps,
                               self.penalty_mode, self.batch_size, self.min_output_len, self.max_source_len)

    def outputs(self) -> dict[str, str | None]:
        """The output files by option, in the order they are renamed into place (``--output`` last)."""
        return {"--attention-out": self.attention_out, "--tokenized-out": self.tokenized_out,
                "--search-stats": self.search_stats, "--output": self.output}

    def inputs(self) -> dict[str, str | None]:
        """The files read, by option."""
        return {"--input": self.input, "--model": self.model, "--force-target": self.force_target,
                "--fertility": self.fertility, "--penalties": self.penalties}

    @property
    def source_name(self) -> str:
        """The input as named in messages (``<stdin>`` for ``-``)."""
        return source_name(self.input)


@dataclass
class TranslateResult:
    """The translations of a :class:`TranslateRequest` (written to its files) and how they were made."""

    translations: list[Translation]
    #: the beam size used; 0 for forced decoding
    beam: int
    decode: DecodeConfig
    seconds: float
    #: the model's ``model.output`` (softmax, sparsemax, entmax15, entmax)
    output: str = "softmax"

    @property
    def search_stats(self) -> SearchStats:
        """Mean output support, exact searches and forced ends of the translations (none for forced decoding)."""
        from scanmt.decoding.translator import SearchStats

        return SearchStats.of(self.translations)

    @property
    def perplexity(self) -> float:
        """Forced decoding's perplexity of the target file: ``exp(-Σ log P(target|source) / T)`` over its ``T``
        subwords with one ``</s>`` a sentence, as validation computes it (``inf`` where a sparse output gives a
        target word probability 0)."""
        n_tok = sum(len(t.pieces) + 1 for t in self.translations)
        total = sum(t.hypothesis.log_prob for t in self.translations)
        return math.exp(min(-total / max(n_tok, 1), 700.0)) if math.isfinite(total) else math.inf

    def search_stats_json(self) -> dict[str, Any]:
        """What ``--search-stats`` writes: the model's ``output``, the ``beam``, then the fields of
        :meth:`SearchStats.to_dict` (``sentences``, ``mean_support``, ``exact``, ``forced``, ``exact_share``)."""
        return {"output": self.output, "beam": self.beam, **self.search_stats.to_dict()}

    def summary(self, request: TranslateRequest) -> str:
        """The lines ``scanmt translate`` prints at its end: sentences, decoding settings, speed, the outputs much
        shorter than their source (:func:`short_outputs`), a sparse output's support and exact searches, attention
        file."""
        from scanmt.model.output import is_sparse

        out, beam, dt, d = self.translations, self.beam, self.seconds, self.decode
        n_tok = sum(len(t.pieces) + 1 for t in out)
        mode = "forced (log-probabilities written)" if request.force_target else ("greedy" if beam <= 1 else f"beam {beam}")
        pen = "" if beam <= 1 or request.force_target else (
            f", length alpha {d.length_alpha:g}, coverage beta {d.coverage_beta:g} (eps {d.coverage_eps:g}), "
            f"penalties: {d.penalty_mode}"
        )
        if not request.force_target:
            pen += f", output length {d.min_len} to {d.max_len_a:g} x source + {d.max_len_b}"
        lines = [
            f"translated {len(out)} sentences from {request.source_name} -> {request.output}",
            f"  decoding: {mode}{pen}",
            f"  time: {dt:.1f} s, {len(out) / max(dt, 1e-9):.1f} sentences/s, {n_tok / max(dt, 1e-9):.0f} tokens/s",
        ]
        if request.force_target:
            ppl = self.perplexity
            lines.append(f"  perplexity: {ppl:.2f} over {n_tok} target subwords (with one </s> a sentence)"
                         if math.isfinite(ppl) else "  perplexity: infinite (the model gives a target word "
                         "probability 0, as a sparse output can)")
        short = [] if request.force_target else short_outputs(out)
        if short:
            where = ", ".join(str(i + 1) for i in short[:5]) + (", ..." if len(short) > 5 else "")
            hint = ("; a beam without a length penalty can prefer an early </s>: try --length-alpha, tuned on dev by "
                    "`scanmt tune-penalties`" if beam > 1 and d.length_alpha == 0 else "")
            lines.append(f"  short outputs: {len(short)} of {len(out)} have fewer than a third of their source's "
                         f"subwords (lines {where}){hint}")
        if not request.force_target and is_sparse(self.output):  # a softmax gives every word a probability
            lines.append(f"  {self.search_stats.describe(self.output)}")
        if request.attention_out:
            lines.append(f"  attention: {request.attention_out}")
        if request.search_stats:
            lines.append(f"  search statistics: {request.search_stats}")
        return "\n".join(lines)


#: sources of fewer subwords are not checked for short outputs
SHORT_OUTPUT_MIN_SOURCE = 6


def short_outputs(translations: Sequence[Translation]) -> list[int]:
    """0-based indices of the outputs with fewer than a third of their source's subwords (sources of
    :data:`SHORT_OUTPUT_MIN_SOURCE` or more): on KFTT a beam without a length penalty ended list entries such as
    "27.袋井宿（静岡県袋井市）" after their number (docs/kftt.md, "Eleventh session")."""
    return [i for i, t in enumerate(translations)
            if len(t.src_pieces) >= SHORT_OUTPUT_MIN_SOURCE and 3 * len(t.pieces) < len(t.src_pieces)]


def source_name(path: str) -> str:
    return "<stdin>" if is_stdio(path) else path


def load_translator(model: str | Path, *, decode: DecodeOverrides | None = None, device: str = "cpu") -> Translator:
    """A :class:`Translator` of the checkpoint ``model``, its decode settings changed by ``decode``."""
    from scanmt.decoding.translator import Translator

    check_type("load_translator", "model", model, str, Path)
    check_type("load_translator", "decode", decode, DecodeOverrides, optional=True)
    check_type("load_translator", "device", device, str)
    tr = Translator.from_checkpoint(model, device=device)
    if decode is not None:
        tr.decode = decode.apply(tr.decode)
    return tr


def translate(
    lines: Sequence[str],
    model: str | Path | Translator,
    *,
    beam: int | None = None,
    decode: DecodeOverrides | None = None,
    fertility: Sequence[Sequence[float]] | None = None,
    max_len: int | None = None,
    device: str = "cpu",
    progress: bool = False,
) -> list[Translation]:
    """Translate raw sentences (one per item) with a checkpoint (or a loaded :class:`Translator`).

    ``beam`` None uses the checkpoint's; ``decode`` changes the decode settings (a given
    translator keeps the changed ones); ``fertility`` gives the bounds of a constrained
    model (one list per sentence, one number per source subword); ``max_len`` cuts longer
    sentences.  An empty line gives an empty translation.
    """
    from scanmt.decoding.translator import Translator

    check_translate_arguments(lines, beam, max_len)
    check_type("translate", "model", model, str, Path, Translator)
    check_type("translate", "decode", decode, DecodeOverrides, optional=True)
    check_type("translate", "device", device, str)
    check_type("translate", "progress", progress, bool)
    if isinstance(model, Translator):
        tr = model
        if decode is not None:
            tr.decode = decode.apply(tr.decode)
    else:
        tr = load_translator(model, decode=decode, device=device)
    return tr.translate_lines(lines, beam=beam, progress=progress, fertility=fertility, max_len=max_len)


def check_translate_arguments(lines: Sequence[str], beam: int | None, max_len: int | None) -> None:
    """Raise :class:`ConfigError` for arguments of :func:`translate` of the wrong type or out of range (the
    ranges of :class:`TranslateRequest`'s ``beam`` and ``max_len``)."""
    if isinstance(lines, str) or not isinstance(lines, collections.abc.Sequence):
        raise ConfigError(f"lines: expected a sequence of sentences (strings), got {lines!r:.80}")
    bad = next((i for i, line in enumerate(lines) if not isinstance(line, str)), None)
    if bad is not None:
        raise ConfigError(f"lines[{bad}]: expected a sentence (a string), got {lines[bad]!r:.80}")
    for name, value in (("beam", beam), ("max_len", max_len)):
        if value is not None:
            field = TranslateRequest.__dataclass_fields__[name]
            field.metadata["range"].check(name, value, integer=True)


def check_request(request: TranslateRequest) -> None:
    """Options that do not go together, refused before any work: :func:`check_stdio`; ``max_len`` (it cuts
    the sentences searched) or ``search_stats`` (it describes the searches) with ``force_target`` (which scores
    each given pair whole, without search); an output that cannot be written, that is an input, or that another
    output names too (:func:`scanmt.io.check_outputs`)."""
    if request.max_len is not None and request.force_target:
        raise ConfigError("--max-len cuts source sentences for search; --force-target scores every pair whole, "
                          "so the two do not go together: drop --max-len")
    if request.search_stats and request.force_target:
        raise ConfigError("--search-stats describes the beam searches; --force-target scores the given targets "
                          "without search, so the two do not go together: drop --search-stats")
    check_stdio(request)
    check_outputs(request.outputs(), request.inputs())


def check_stdio(request: TranslateRequest) -> None:
    """At most one file read from standard input and one written to standard output (not the binary attention)."""
    if request.attention_out and is_stdio(request.attention_out):
        raise ConfigError("--attention-out -: the attention file is binary (.npz); give a file name")
    for kind, options in (("input", ("input", "force_target", "fertility")),
                          ("output", ("output", "tokenized_out", "search_stats"))):
        named = [f"--{o.replace('_', '-')}" for o in options if is_stdio(getattr(request, o) or "")]
        if len(named) > 1:
            raise ConfigError(f"{' and '.join(named)} are all -: only one of them can be standard {kind}")


def _read_fertility(request: TranslateRequest, tr: Translator, lines: list[str]) -> list[list[float]] | None:
    if not request.fertility:
        return None
    tr.check_uses_bounds()  # before the file is read
    from scanmt.data.fertility import read_fertility

    lens = [len(p) for p in tr.pipeline.source_pieces_all(lines)]
    return read_fertility(request.fertility, src_lens=lens, src_path=request.input)


def _force(request: TranslateRequest, tr: Translator, lines: list[str]) -> list[Translation]:
    from scanmt.io import check_parallel

    targets = read_lines(request.force_target, what="target file")
    check_parallel(lines, targets, request.input, request.force_target)
    return tr.force(lines, targets, progress=True, source=request.source_name)


def write_attention(path: str | Path, translations: Sequence[Translation], tr: Translator) -> None:
    """The attention matrices of ``translations`` as an attention file (.npz, one entry per sentence)."""
    from scanmt.data.attention_file import save_attention

    sents = [t.sentence_attention() for t in translations]
    save_attention(path, sents, {"transform": tr.model.cfg.attention.transform, "sink": tr.model.sink})


def write_search_stats(path: str | Path, result: TranslateResult) -> None:
    """:meth:`TranslateResult.search_stats_json` as an indented JSON object (the caller makes it atomic)."""
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(result.search_stats_json(), fh, indent=2)
        fh.write("\n")


def translate_file(request: TranslateRequest) -> TranslateResult:
    """Run a :class:`TranslateRequest`: read ``input``, translate (or force-decode), write every output file."""
    check_type("translate_file", "request", request, TranslateRequest)
    check_request(request)
    lines = read_lines(request.input, what="input file", allow_empty=not request.force_target)
    tr = load_translator(request.model, decode=request.decode_overrides(), device=request.device)
    beam = tr.decode.beam if request.beam is None else request.beam
    fertility = _read_fertility(request, tr, lines)
    t0 = time.time()
    if request.force_target:
        out, beam = _force(request, tr, lines), 0
    else:
        out = tr.translate_lines(lines, beam=beam, progress=True, source=request.source_name, fertility=fertility,
                                 max_len=request.max_len)
    result = TranslateResult(out, beam, tr.decode, time.time() - t0, tr.model.cfg.output)
    write_outputs(request, result, tr)
    return result


def write_outputs(request: TranslateRequest, result: TranslateResult, tr: Translator) -> None:
    """Every output file of ``request`` as one unit (:func:`scanmt.io.atomic_outputs`): all written to temporary
    files, then renamed in the order of :meth:`TranslateRequest.outputs` (``--output`` last), or none changed."""
    out = result.translations
    given = {option: path for option, path in request.outputs().items() if path}
    with atomic_outputs(list(given.values())) as temp:
        if request.attention_out:
            write_attention(temp[request.attention_out], out, tr)
        if request.tokenized_out:
            write_lines(temp[request.tokenized_out], [tr.pipeline.tokenized_target(t.pieces) for t in out])
        if request.search_stats:
            write_search_stats(temp[request.search_stats], result)
        texts = [f"{t.hypothesis.log_prob:.4f}" for t in out] if request.force_target else [t.text for t in out]
        write_lines(temp[request.output], texts)
