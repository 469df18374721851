"""``stress``: a stress test, models translating inputs made of K test sentences joined into one.

For each K of ``k`` the test set's lines are joined K at a time, source and reference alike
(:func:`scanmt.metrics.stress.join_groups`: lines ``gK .. gK+K-1`` joined by a space; the last incomplete
group is left out, so every joined input holds exactly K sentences), every model translates the joined
source, and each output is scored against the joined reference as ``scanmt evaluate`` scores it:

- ``bleu``: sacreBLEU on the detokenized, cased text (``evaluate``'s ``bleu``);
- ``rep``: REP-score on Moses-tokenized text (``evaluate``'s ``rep``);
- ``drop``: DROP-score, percent of source words dropped, from one eflomal word alignment of each side
  (source-reference, source-output) with the word aligner ``align_model`` (``evaluate``'s ``drop``; as there,
  an output identical to its reference reuses the reference's links);
- ``length_ratio``: output words / reference words over the joined inputs (Moses-tokenized words);
- ``dropped_sentences``: percent of joined inputs in which a whole sentence was dropped: one of its K
  source sentences has fewer than 20 % of its words linked to any output word in the same source-output
  alignment (:mod:`scanmt.metrics.stress`, :data:`~scanmt.metrics.stress.DROPPED_COVERAGE`);
- ``boundary_stop``, ``boundary_eos`` (K >= 2): whether the model ends a joined input after its first
  sentence's full stop (a step a search that writes one sentence per input rarely reaches: ``boundary_close``
  below is where it decides).  The model reads each joined reference teacher-forced; at the step after the first sentence, where
  the reference goes on, ``boundary_stop`` is the percent of inputs where it gives ``</s>`` a probability of
  0.5 or more (ending outweighs every continuation together), ``boundary_eos`` the median of that probability, and
  ``boundary_argmax`` (in ``stress.json`` only) the percent where ``</s>`` is its most probable word;
  ``boundary_close`` (K >= 2), the median probability the model gives the full stop (``!``, ``?``) that closes
  the first reference sentence, at that step, and ``boundary_close_argmax`` (in ``stress.json`` only) the percent
  where it is the most probable word there: a search that writes one sentence per joined input decides there
  whether to stop after the first sentence's content (:mod:`scanmt.decoding.boundary`).  None at K = 1, which
  has no boundary.

Without ``align_model`` there is no alignment: ``drop`` and ``dropped_sentences`` are None (``n/a`` in the
table, a note says why).  The tokenized joined source is its sentences' tokenized words one after another
(on Multi30k the same as tokenizing the joined line), so a sentence's words are known exactly.

Written into the folder ``out`` (made by this command; a rerun replaces the files it writes), all at once
at the end (:func:`scanmt.io.atomic_outputs`): ``stress.json`` (every number, the command line, K values,
models), ``stress.png`` (one panel per metric, x = K, one line per model), the joined inputs
``k{K}.src.{src}`` and ``k{K}.ref.{tgt}``, and each model's output ``{name}.k{K}.hyp.{tgt}``, so that
``scanmt evaluate --hyp DIR/NAME.kK.hyp.en --ref DIR/kK.ref.en --src DIR/kK.src.de --align-model A``
gives the same BLEU and REP (and DROP up to the aligner's randomness).  The folder is locked
(:func:`scanmt.processes.lock_folder`) from the end of the input checks on, so that a second stress test into
it fails naming the first instead of replacing ``stress.json`` and orphaning the first one's files.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from scanmt.api.arguments import check_type
from scanmt.api.decode import DecodeOverrides
from scanmt.api.requests import CommandRequest, option
from scanmt.decoding.boundary import FINE_SCORES
from scanmt.errors import ConfigError, DataError
from scanmt.io import atomic_outputs, check_output_dir, check_parallel, read_json, read_lines, write_lines
from scanmt.processes import lock_folder

if TYPE_CHECKING:
    from scanmt.decoding.translator import Translator

#: the metrics of every model and K, in the table's and the figure's order: (key, column, panel title)
METRICS = (
    ("bleu", "BLEU", "BLEU (sacreBLEU)"),
    ("rep", "REP", "REP (lower is better)"),
    ("drop", "DROP", "DROP % (lower is better)"),
    ("length_ratio", "len", "output / reference length"),
    ("dropped_sentences", "dropS%", "inputs dropping a sentence %"),
    ("boundary_stop", "stop@1%", "inputs with P(</s>) >= 0.5 after sentence 1 %\n(teacher-forced)"),
    ("boundary_eos", "P</s>@1", "P(</s>) after sentence 1, median\n(teacher-forced)"),
    ("boundary_close", "P.@1", "P(full stop closing sentence 1), median\n(teacher-forced)"),
)
#: the boundary scores of every model and K >= 2 (:func:`_score_boundary`; the module docstring)
BOUNDARY_SCORES = ("boundary_stop", "boundary_eos", "boundary_argmax", "boundary_close", "boundary_close_argmax")
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
JSON_FILE, PNG_FILE = "stress.json", "stress.png"


def default_name(model: str, parents: int = 1) -> str:
    """A model's label from its path: the run folder for ``RUN/best.pt`` or ``RUN/last.pt`` (with ``parents`` = 2,
    the folder above it too, joined by ``-``: ``softmax-seed1`` for a grid's ``runs/softmax/seed1/best.pt``), else
    the file stem."""
    p = Path(model)
    if p.name not in ("best.pt", "last.pt") or p.parent.name in ("", ".", ".."):
        return p.stem
    folders = [f.name for f in (p.parent.parent, p.parent)[-parents:] if f.name not in ("", ".", "..")]
    return "-".join(folders)


def default_names(models: Sequence[str]) -> list[str]:
    """:func:`default_name` of each model; where two share a run folder name (``seed1`` of two systems of a grid),
    those take the folder above it too."""
    names = [default_name(m) for m in models]
    return [default_name(m, 2) if names.count(n) > 1 else n for m, n in zip(models, names)]


@dataclass(frozen=True)
class StressRequest(CommandRequest):
    """``scanmt stress``: translate ``src`` joined K sentences at a time with each ``model``, score against
    ``ref`` joined alike, write everything into the folder ``out`` (see the module docstring)."""

    COMMAND = "stress"
    out: Path
    #: checkpoints (``best.pt`` of runs), compared side by side (required, except with ``boundary_only``)
    model: tuple[str, ...] = ()
    #: the test set, raw text (required, except with ``boundary_only``)
    src: Path | None = None
    ref: Path | None = None
    #: sentences joined into one input, one test per value
    k: tuple[int, ...] = (1, 2, 3, 4)
    #: the models' labels (one per model); () : from their paths (:func:`default_names`)
    names: tuple[str, ...] = ()
    beam: int | None = option(None, key="decode.beam")
    batch_size: int | None = option(None, key="decode.batch_size")
    #: word-level aligner of ``align`` (ALIGN_DIR or ALIGN_DIR/word) for DROP and dropped sentences
    align_model: Path | None = None
    max_source_len: int | None = option(None, key="decode.max_source_len")
    device: str = "cpu"
    #: measure only the boundary scores of the earlier stress output ``out`` again, with the models, test set and
    #: K values its ``stress.json`` records (:func:`remeasure_boundary`); takes ``out``, ``batch_size``, ``device``
    boundary_only: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.boundary_only:
            recorded = {"model": (), "src": None, "ref": None, "k": (1, 2, 3, 4), "names": (), "beam": None,
                        "align_model": None, "max_source_len": None}
            given = [f"--{name.replace('_', '-')}" for name, empty in recorded.items() if getattr(self, name) != empty]
            if given:
                raise ConfigError(f"--boundary-only takes the models, test set and K values from --out's "
                                  f"stress.json; leave out {', '.join(given)}")
            return
        missing = [f"--{name}" for name in ("model", "src", "ref") if getattr(self, name) in ((), None)]
        if missing:
            raise ConfigError(f"{', '.join(missing)} required (only --boundary-only runs without them)")
        if not self.k:
            raise ConfigError("--k: give at least one K (sentences joined into one input)")
        for k in self.k:
            if isinstance(k, bool) or not isinstance(k, int) or k < 1:
                raise ConfigError(f"--k must be whole numbers >= 1, got {k!r}")
        if len(set(self.k)) != len(self.k):
            raise ConfigError(f"--k {' '.join(map(str, self.k))}: give each K once")
        self.model_names()

    def model_names(self) -> list[str]:
        """The models' labels, checked: one per model, distinct, usable in file names."""
        if self.names and len(self.names) != len(self.model):
            raise ConfigError(f"--names: {len(self.names)} name(s) for {len(self.model)} model(s) (--model): give one "
                              "name per model")
        names = list(self.names) or default_names(self.model)
        for name in names:
            if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
                raise ConfigError(f"--names {name!r}: a name is letters, digits and . _ + - (it names files)")
        twice = next((n for n in names if names.count(n) > 1), None)
        if twice is not None:
            how = "--names" if self.names else "their paths (the run folders)"
            raise ConfigError(f"two models are named {twice} by {how}: give each model its own name with --names")
        return names

    def decode_overrides(self) -> DecodeOverrides:
        return DecodeOverrides(batch_size=self.batch_size, max_source_len=self.max_source_len)


Scores = dict[str, float | None]
#: per joined input, the counts behind REP and DROP, for a paired test between models
#: (:mod:`scanmt.metrics.paired`): ``rep_sigma`` (σ, :func:`scanmt.metrics.rep.rep_sentence`) and ``ref_words``;
#: ``hyp_words`` (the output's Moses-tokenized words, for REP at equal length: :mod:`scanmt.metrics.length_standardized`);
#: with an aligner also ``dropped`` (source words dropped) and ``source_words``; at K >= 2 ``boundary_eos``
#: (P(</s>) after the first sentence, teacher-forced; None for an input left out: :mod:`scanmt.decoding.boundary`)
#: and ``boundary_close`` (P of the full stop closing the first sentence there; None also where it has none)
PerInput = dict[str, list[Any]]


@dataclass
class StressResult:
    """Scores by model name and K (:data:`METRICS` keys; None: not measured) and what was written."""

    names: list[str]
    ks: list[int]
    #: name -> K -> metric -> value
    scores: dict[str, dict[int, Scores]]
    #: K -> joined inputs scored
    inputs: dict[int, int]
    out: Path
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: name -> K -> the per-input counts (:data:`PerInput`)
    per_input: dict[str, dict[int, PerInput]] = field(default_factory=dict)

    def to_json(self, request: StressRequest) -> dict[str, Any]:
        """``stress.json``: the request, the K values, the models and every number."""
        return {
            "command": request.command_line(), "k": self.ks, "names": self.names,
            "models": {n: str(Path(m).resolve()) for n, m in zip(self.names, request.model)},
            "src": str(request.src), "ref": str(request.ref),
            "align_model": str(request.align_model) if request.align_model else None,
            "inputs": {str(k): n for k, n in self.inputs.items()},
            "scores": {n: {str(k): v for k, v in by_k.items()} for n, by_k in self.scores.items()},
            "per_input": {n: {str(k): v for k, v in by_k.items()} for n, by_k in self.per_input.items()},
            "dropped_sentence_rule": "a source sentence with fewer than 20% of its words linked to the output",
            "notes": self.notes, "seconds": round(self.seconds, 1),
        }

    def summary(self, request: StressRequest | None = None) -> str:
        """What ``scanmt stress`` prints: the table (rows K, columns model x metric), notes, the files."""
        lines = [f"scanmt stress: {len(self.names)} model(s), K = {' '.join(map(str, self.ks))}", format_table(self)]
        lines += self.paired_lines()
        lines += [f"note: {n}" for n in self.notes]
        lines.append(f"written to {self.out}: {JSON_FILE}, {PNG_FILE}, joined inputs k*.src/ref, outputs NAME.k*.hyp")
        return "\n".join(lines)


    def paired_lines(self) -> list[str]:
        """Each later model against the first: the differences of REP and DROP per K with the one-sided p-value
        of "lower" from a paired bootstrap over the joined inputs (:func:`scanmt.metrics.paired.paired_rates`),
        and the first model's REP at the later one's output lengths
        (:func:`scanmt.metrics.length_standardized.standardize_rep`)."""
        from scanmt.metrics.length_standardized import standardize_rep
        from scanmt.metrics.paired import format_p, paired_rates

        if len(self.names) < 2 or not all(self.per_input.get(n) for n in self.names):
            return []
        base = self.names[0]
        lines = [f"paired bootstrap over the joined inputs against {base} (1000 resamples; p: one-sided, lower); "
                 f"REP of {base} at the model's output lengths:"]
        for name in self.names[1:]:
            for k in self.ks:
                mine, theirs = self.per_input[name][k], self.per_input[base][k]
                tests = paired_rates([(mine, theirs)])
                cells = [f"{metric} {t.delta:+.2f} (p {format_p(t.p_lower)})" for metric, t in tests.items()]
                same_length = standardize_rep([mine], [theirs])
                at = same_length.baseline_at_system_lengths
                cells.append(f"{base}'s REP at its lengths " + ("n/a" if at != at else f"{at:.2f}"))  # NaN: no overlap
                lines.append(f"  {name} K={k}: " + ", ".join(cells))
        return lines


def _cell(value: float | None, key: str, k: int) -> str:
    if value is None:
        return "–" if k == 1 and key.startswith("boundary_") else "n/a"  # (K = 1 has no sentence boundary)
    return f"{value:.3f}" if key == "length_ratio" or key in FINE_SCORES else f"{value:.2f}"


#: what the table's short column names mean
LEGEND = ("len: output / reference length; dropS%: inputs that drop a whole sentence",
          "at K >= 2, teacher-forced after sentence 1: stop@1%: inputs with P(</s>) >= 0.5;",
          "  P</s>@1: median P(</s>); P.@1: median P of the full stop that closes sentence 1")


def format_table(result: StressResult) -> str:
    """One row per K (with the number of joined inputs) and model, a column per metric, and a :data:`LEGEND`:
    about 90 characters wide whatever the number of models."""
    heads = [c for _, c, _ in METRICS]
    width = max(7, *(len(h) for h in heads))
    name_width = max(len("model"), *(len(n) for n in result.names))
    lines = [f"{'K':>3} {'inputs':>6}  {'model':<{name_width}}" + "".join(f" {h:>{width}}" for h in heads)]
    for k in result.ks:
        for i, n in enumerate(result.names):
            first = f"{k:>3} {result.inputs[k]:>6}" if i == 0 else " " * 10
            lines.append(f"{first}  {n:<{name_width}}" + "".join(
                f" {_cell(result.scores[n][k].get(key), key, k):>{width}}" for key, _, _ in METRICS))
    return "\n".join([*lines, *LEGEND])


@dataclass
class _Side:
    """One K's joined test set: raw and tokenized lines, the source sentences' word counts, source-reference links."""

    src: list[str]
    ref: list[str]
    src_tok: list[str]
    ref_tok: list[str]
    lengths: list[list[int]]
    #: each joined input's first reference sentence (raw)
    first_ref: list[str]
    ref_links: list[set[tuple[int, int]]] | None = None


def _join(src: list[str], ref: list[str], src_tok: list[str], ref_tok: list[str], k: int) -> _Side:
    from scanmt.metrics.stress import join_groups

    n = len(src) // k
    lengths = [[len(src_tok[g * k + j].split()) for j in range(k)] for g in range(n)]
    return _Side(join_groups(src, k), join_groups(ref, k), join_groups(src_tok, k), join_groups(ref_tok, k), lengths,
                 [ref[g * k] for g in range(n)])


def score_output(side: _Side, hyps: list[str], tgt_lang: str, aligner: Any) -> tuple[Scores, PerInput]:
    """The :data:`METRICS` of one model's outputs ``hyps`` of one joined test set, and the per-input counts
    behind REP and DROP (:data:`PerInput`)."""
    from scanmt.api.evaluate_text import align_pairs, identical_outputs, with_reference_links
    from scanmt.data.tokenize import tokenize
    from scanmt.metrics.bleu import detok_bleu
    from scanmt.metrics.drop import sentence_drops
    from scanmt.metrics.rep import rep_score, rep_sentence
    from scanmt.metrics.stress import dropped_sentences

    hyp_tok = [tokenize(h, tgt_lang) if h.strip() else "" for h in hyps]
    hyp_words, ref_words = [h.split() for h in hyp_tok], [r.split() for r in side.ref_tok]
    scores: Scores = {
        "bleu": detok_bleu(hyps, side.ref).score,
        "rep": rep_score(hyp_words, ref_words),
        "length_ratio": sum(map(len, hyp_words)) / max(1, sum(map(len, ref_words))),
        "drop": None, "dropped_sentences": None,
    }
    per_input: PerInput = {"rep_sigma": [rep_sentence(h, r) for h, r in zip(hyp_words, ref_words)],
                           "ref_words": [len(r) for r in ref_words], "hyp_words": [len(h) for h in hyp_words]}
    if aligner is not None and side.ref_links is not None:
        same = identical_outputs(hyp_tok, side.ref_tok)
        src = [s.split() for s in side.src_tok]
        links = align_pairs(aligner, src, [[] if eq else w for w, eq in zip(hyp_words, same)])
        links = with_reference_links(links, side.ref_links, same)
        drops = sentence_drops(side.ref_links, links, [len(s) for s in src])
        scores["drop"] = 100.0 * sum(d.dropped for d in drops) / max(1, sum(d.source_words for d in drops))
        per_input["dropped"] = [d.dropped for d in drops]
        per_input["source_words"] = [d.source_words for d in drops]
        d = dropped_sentences(links, side.lengths)
        scores["dropped_sentences"] = d.share
        scores["sentences_dropped"], scores["sentences"] = d.dropped, d.sentences
    return scores, per_input


def _score_boundary(tr: "Translator", side: _Side, k: int, scores: Scores, per_input: PerInput) -> None:
    """Add the boundary metrics (module docstring) of model ``tr`` on one joined test set (None at K = 1)."""
    from scanmt.decoding.boundary import boundary_eos

    for key in BOUNDARY_SCORES:
        scores[key] = None
    if k < 2:
        return
    b = boundary_eos(tr, side.src, side.ref, side.first_ref)
    scores["boundary_stop"], scores["boundary_eos"], scores["boundary_argmax"] = b.stop_share, b.median, b.argmax_share
    scores["boundary_close"], scores["boundary_close_argmax"] = b.median_close, b.close_argmax_share
    per_input["boundary_eos"], per_input["boundary_close"] = b.p_eos, b.p_close


def _read_test_set(request: StressRequest) -> tuple[list[str], list[str]]:
    src = read_lines(request.src, what="source file")
    ref = read_lines(request.ref, what="reference file")
    check_parallel(src, ref, request.src, request.ref)
    too_big = [k for k in request.k if k > len(src)]
    if too_big:
        raise ConfigError(f"--k {too_big[0]}: more than the {len(src)} lines of {request.src}; no input would hold "
                          f"{too_big[0]} sentences")
    return src, ref


def _load_models(request: StressRequest) -> list[Translator]:
    """Every model, loaded before any work, checked to translate the same language pair."""
    from scanmt.api.translate import load_translator

    for m in request.model:
        if not Path(m).is_file():
            raise DataError(f"--model {m}: no such checkpoint file")
    models = [load_translator(m, decode=request.decode_overrides(), device=request.device) for m in request.model]
    pairs = {(tr.pipeline.src_lang, tr.pipeline.tgt_lang) for tr in models}
    if len(pairs) > 1:
        raise ConfigError(f"--model: the models translate different language pairs ({', '.join(sorted(map('-'.join, pairs)))}); "
                          "compare models of one pair")
    return models


def stress(request: StressRequest) -> StressResult:
    """Run a :class:`StressRequest`; every output is written at the end, together (see the module docstring)."""
    from tqdm import tqdm

    from scanmt.data.tokenize import tokenize_all

    check_type("stress", "request", request, StressRequest)
    if request.boundary_only:
        raise ConfigError("a boundary-only request is run by remeasure_boundary(request.out), not stress()")
    t0 = time.time()
    out = check_output_dir(request.out, ours=lambda d: (d / JSON_FILE).is_file(), holds=f"a scanmt stress output "
                           f"({JSON_FILE})")
    src, ref = _read_test_set(request)
    names, models = request.model_names(), _load_models(request)
    sl, tl = models[0].pipeline.src_lang, models[0].pipeline.tgt_lang
    aligner, notes = None, []
    if request.align_model is not None:
        from scanmt.api.evaluate_text import load_word_aligner

        aligner, _ = load_word_aligner(request.align_model, sl, tl)
    else:
        notes.append("DROP and dropped sentences not measured (they need a word alignment): give --align-model")
    src_tok, ref_tok = tokenize_all(src, sl), tokenize_all(ref, tl)
    scores: dict[str, dict[int, Scores]] = {n: {} for n in names}
    per_input: dict[str, dict[int, PerInput]] = {n: {} for n in names}
    texts: dict[str, list[str]] = {}
    with lock_folder(out, what="--out"), tqdm(total=len(request.k) * len(models), desc="stress", unit="test") as bar:
        for k in request.k:
            side = _join(src, ref, src_tok, ref_tok, k)
            if aligner is not None:
                from scanmt.api.evaluate_text import align_pairs

                side.ref_links = align_pairs(aligner, [s.split() for s in side.src_tok],
                                             [r.split() for r in side.ref_tok])
            texts[f"k{k}.src.{sl}"], texts[f"k{k}.ref.{tl}"] = side.src, side.ref
            for name, tr in zip(names, models):
                out_lines = tr.translate_lines(side.src, beam=request.beam, source=f"{name} K={k}")
                hyps = [t.text for t in out_lines]
                texts[f"{name}.k{k}.hyp.{tl}"] = hyps
                scores[name][k], per_input[name][k] = score_output(side, hyps, tl, aligner)
                _score_boundary(tr, side, k, scores[name][k], per_input[name][k])
                bar.update()
        inputs = {k: len(src) // k for k in request.k}
        result = StressResult(names, list(request.k), scores, inputs, out, notes, time.time() - t0, per_input)
        write_stress(request, result, texts)
    return result


def write_stress(request: StressRequest, result: StressResult, texts: dict[str, list[str]]) -> None:
    """Every file of the stress test into ``result.out``, as one unit (:func:`scanmt.io.atomic_outputs`)."""
    out = result.out
    out.mkdir(parents=True, exist_ok=True)
    _write_json_and_plot(out, result.to_json(request), texts)


def _write_json_and_plot(out: Path, doc: dict[str, Any], texts: dict[str, list[str]]) -> None:
    """``stress.json`` (``doc``), its figure and the text files ``texts`` (file name -> lines) into ``out``, as one
    unit (:func:`scanmt.io.atomic_outputs`)."""
    from scanmt.viz.stress_plot import plot_stress

    paths = [out / name for name in texts] + [out / PNG_FILE, out / JSON_FILE]
    ks = [int(k) for k in doc["k"]]
    panels = {title: {n: [doc["scores"][n][str(k)].get(key) for k in ks] for n in doc["names"]}
              for key, _, title in METRICS}
    with atomic_outputs(paths) as temp:
        for name, lines in texts.items():
            write_lines(temp[str(out / name)], lines)
        plot_stress(panels, ks, temp[str(out / PNG_FILE)], title=f"coverage stress test: {doc['src']}")
        with open(temp[str(out / JSON_FILE)], "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2, ensure_ascii=False)
            fh.write("\n")


@dataclass
class BoundaryRemeasure:
    """What :func:`remeasure_boundary` changed: the boundary scores of each model and K before and after (None:
    not measured), and the largest difference between the per-input P(``</s>``) stored before and measured now,
    over the inputs both have (None: none stored; a code change in the boundary measure shows here)."""

    out: Path
    names: list[str]
    ks: list[int]
    #: name -> K -> boundary score -> value
    before: dict[str, dict[int, Scores]]
    after: dict[str, dict[int, Scores]]
    largest_eos_change: float | None

    def summary(self) -> str:
        lines = [f"scanmt stress --boundary-only: {self.out / JSON_FILE}, {len(self.names)} model(s), "
                 f"K = {' '.join(map(str, self.ks))} (K = 1 has no boundary)"]
        for name in self.names:
            for k in self.ks:
                cells = [f"{column} {_cell(self.before[name][k].get(key), key, k)} -> "
                         f"{_cell(self.after[name][k].get(key), key, k)}"
                         for key, column, _ in METRICS if key in BOUNDARY_SCORES]
                lines.append(f"  {name} K={k}: " + ", ".join(cells))
        change = self.largest_eos_change
        lines.append("per-input P(</s>) after sentence 1: " + (
            "none stored before" if change is None else f"largest change against the stored values {change:.2g}"))
        lines.append(f"wrote {self.out / JSON_FILE} and {self.out / PNG_FILE}; the outputs and other scores are "
                     "unchanged")
        return "\n".join(lines)


def remeasure_boundary(out: str | Path, *, device: str = "cpu", batch_size: int | None = None) -> BoundaryRemeasure:
    """Measure the boundary scores again (:func:`_score_boundary`: P(full stop) closing the first sentence,
    P(``</s>``) after it) for every model and K of the stress output ``out``, with this code, and rewrite its
    ``stress.json`` and figure with them; the translations and every other score are kept.  For stress tests run
    before a boundary measure existed (or changed).  The models, test set and K values are those ``stress.json``
    records; the joined sources and references in ``out`` must still be that test set's (else DataError), and
    each checkpoint must still be there."""
    check_type("remeasure_boundary", "out", out, str, Path)
    check_type("remeasure_boundary", "device", device, str)
    check_type("remeasure_boundary", "batch_size", batch_size, int, optional=True)
    out = Path(out)
    # locked while it reads and rewrites stress.json (no folder is made for a lock where there is none: an error)
    with lock_folder(out, what="--out") if out.is_dir() else contextlib.nullcontext():
        return _remeasure_boundary(out, device, batch_size)


def _remeasure_boundary(out: Path, device: str, batch_size: int | None) -> BoundaryRemeasure:
    """:func:`remeasure_boundary` of the folder ``out``, locked."""
    from scanmt.metrics.stress import join_groups

    path = out / JSON_FILE
    doc = read_json(path, missing=f"{path}: no such file; --out must be the folder of an earlier scanmt stress")
    try:
        names, ks = list(doc["names"]), [int(k) for k in doc["k"]]
        request = StressRequest(model=tuple(doc["models"][n] for n in names), src=Path(doc["src"]),
                                ref=Path(doc["ref"]), out=out, k=tuple(ks), names=tuple(names),
                                batch_size=batch_size, device=device)
        scores = {n: doc["scores"][n] for n in names}
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{path}: not a scanmt stress output ({type(exc).__name__}: {exc})") from None
    unscored = next(((n, k) for n in names for k in ks if str(k) not in scores[n]), None)
    if unscored is not None:
        raise DataError(f"{path}: no scores of {unscored[0]} at K = {unscored[1]}; run scanmt stress again")
    per_input = doc.setdefault("per_input", {})  # (a stress test older than the per-input counts has none)
    for n in names:
        for k in ks:
            per_input.setdefault(n, {}).setdefault(str(k), {})
    gone = next((m for m in request.model if not Path(m).is_file()), None)
    if gone is not None:
        raise DataError(f"{path} records the model {gone}, which is not there any more; the boundary measures need "
                        "each model's checkpoint")
    src, ref = _read_test_set(request)
    models = _load_models(request)
    sl, tl = models[0].pipeline.src_lang, models[0].pipeline.tgt_lang
    before = {n: {k: {key: scores[n][str(k)].get(key) for key in BOUNDARY_SCORES} for k in ks} for n in names}
    largest: float | None = None
    for k in ks:
        for joined, lines, what in ((out / f"k{k}.src.{sl}", src, request.src),
                                    (out / f"k{k}.ref.{tl}", ref, request.ref)):
            if read_lines(joined, what="joined test set", allow_empty=True) != join_groups(lines, k):
                raise DataError(f"{joined}: not {what} joined {k} at a time; the test set changed since the stress "
                                "test (run scanmt stress again)")
        n = len(src) // k
        side = _Side(join_groups(src, k), join_groups(ref, k), [], [], [], [ref[g * k] for g in range(n)])
        for name, tr in zip(names, models):
            old = per_input[name][str(k)].get("boundary_eos")
            _score_boundary(tr, side, k, scores[name][str(k)], per_input[name][str(k)])
            new = per_input[name][str(k)].get("boundary_eos")
            for a, b in zip(old or [], new or []):
                if a is not None and b is not None:
                    largest = max(largest or 0.0, abs(a - b))
    after = {n: {k: {key: scores[n][str(k)].get(key) for key in BOUNDARY_SCORES} for k in ks} for n in names}
    doc["notes"] = list(doc.get("notes") or []) + [
        f"boundary scores measured again by scanmt stress --boundary-only on {time.strftime('%Y-%m-%d %H:%M')}"]
    _write_json_and_plot(out, doc, {})
    return BoundaryRemeasure(out, names, ks, before, after, largest)
