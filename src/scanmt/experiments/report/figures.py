"""The report's Figure 2 analogue (attention maps of two systems, side by side, for test sentences where the
baseline repeats words) and its Appendix B analogue (translation examples).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Container, Sequence

from scanmt.experiments.layout import attention_figure_name, attention_name, report_figure, run_dir
from scanmt.experiments.report.collection import SystemResults, Texts, hyp_lines, tokenize_all
from scanmt.experiments.report.markdown import md_escape
from scanmt.experiments.report.page import Page


MAX_FIGURE_BYTES = 150_000
#: the width a figure aims at, in pixels, at up to 100 dots per inch
FIGURE_WIDTH_PIXELS = 1400
#: the fewest dots per inch a figure is drawn at: its 9-point labels are then 9 pixels high, the smallest that
#: stays legible; a long sentence's maps grow wider than FIGURE_WIDTH_PIXELS, and above MAX_FIGURE_BYTES, instead
LEGIBLE_DPI = 72


def repetition_scores(hyps_tok: Sequence[str], refs_tok: Sequence[str]) -> list[float]:
    """REP sentence score σ(t, r) (repeated bigrams and doubled words beyond the reference) per sentence."""
    from scanmt.metrics.rep import rep_sentence

    return [rep_sentence(h.split(), r.split()) for h, r in zip(hyps_tok, refs_tok)]


def choose_sentences(base_tok: Sequence[str], other_tok: Sequence[str] | None, texts: Texts, k: int, *,
                     max_src_words: int, max_hyp_words: int = 40, src_tokens: Sequence[int] | None = None,
                     max_src_tokens: int = 0, min_src_words: int = 0, among: Container[int] | None = None
                     ) -> list[int]:
    """Test sentences where the baseline repeats words (σ > 0), those the other system repeats least first.

    Ranked by (σ_baseline − σ_other, σ_baseline), among sources of ``min_src_words`` to ``max_src_words``
    words (``texts.src_words``) and, with ``src_tokens`` (subwords per source, from the attention file), at most
    ``max_src_tokens`` subwords, and outputs of at most ``max_hyp_words`` words (readable maps); with
    ``among``, among those sentence indices only (the sentences partial attention files hold).
    """
    rb = repetition_scores(base_tok, texts.ref_tok)
    ro = repetition_scores(other_tok, texts.ref_tok) if other_tok is not None else [0.0] * len(rb)
    cands = [
        i for i in range(len(rb))
        if rb[i] > 0 and min_src_words <= texts.src_words[i] <= max_src_words
        and (src_tokens is None or src_tokens[i] <= max_src_tokens)
        and len(base_tok[i].split()) <= max_hyp_words
        and (other_tok is None or len(other_tok[i].split()) <= max_hyp_words)
        and (among is None or i in among)
    ]
    cands.sort(key=lambda i: (-(rb[i] - ro[i]), -rb[i], texts.src_words[i], i))
    return cands[:k]


def draw_figure(out_png: Path, panels: list[tuple[str, Any]], title: str) -> int:
    """Attention maps side by side (scanmt.viz.attention_map); returns the PNG's size in bytes.

    Drawn at the dpi, from :data:`LEGIBLE_DPI` to 100, that keeps the figure within :data:`FIGURE_WIDTH_PIXELS`
    and :data:`MAX_FIGURE_BYTES` where it can: never below :data:`LEGIBLE_DPI`, since a map whose labels cannot
    be read (a 50-word sentence drawn 1,400 pixels wide) shows nothing."""
    from scanmt.viz.attention_map import Panel, figure_pixels, plot_attention_maps

    ps = [Panel(name=name, attention=s.attention, src=list(s.src), hyp=list(s.hyp)) for name, s in panels]
    w, _ = figure_pixels(ps, 100)
    dpi = max(LEGIBLE_DPI, min(100, int(100 * FIGURE_WIDTH_PIXELS / max(w, 1))))
    while True:
        plot_attention_maps(ps, out_png, title=title, dpi=dpi)
        size = out_png.stat().st_size
        if size <= MAX_FIGURE_BYTES or dpi <= LEGIBLE_DPI:
            return size
        dpi = max(LEGIBLE_DPI, int(dpi * 0.75))


def figure_systems(rec: dict[str, Any], systems: Sequence[SystemResults], baseline: str) -> tuple[str, str] | None:
    names = [s.name for s in systems]
    fig = rec.get("figure") or []
    if len(fig) == 2:
        return fig[0], fig[1]
    transforms = rec.get("transforms", {})
    other = next((n for n in names if n != baseline and transforms.get(n) == "csparsemax"), None)
    other = other or next((n for n in names if n != baseline), None)
    return (baseline, other) if other else None


def figures(p: Page) -> tuple[list[str], list[Path], list[int]]:
    """The Figure 2 analogue: ``(lines, PNG files, chosen sentence indices)``."""
    L = ["## Attention maps (Figure 2 analogue)", ""]
    pair = figure_systems(p.rec, p.systems, p.baseline)
    if p.opts.figures <= 0:
        return L + ["No figures requested (`--figures 0`).", ""], [], []
    if pair is None:
        return L + ["No figure: the grid needs two systems.", ""], [], []
    a_sys = next((s for s in p.systems if s.name == pair[0]), None)
    b_sys = next((s for s in p.systems if s.name == pair[1]), None)
    ha = hyp_lines(p.out, p.rec, pair[0], 1) if a_sys and a_sys.seed(1) else None
    hb = hyp_lines(p.out, p.rec, pair[1], 1) if b_sys and b_sys.seed(1) else None
    if a_sys is None or b_sys is None or ha is None or hb is None:
        return L + [f"No figure: {pair[0]} and {pair[1]} need finished seed-1 runs.", ""], [], []
    lines, files, chosen = _figure_pair(p, (a_sys, ha), (b_sys, hb))
    return L + lines, files, chosen


def _figure_pair(p: Page, a: tuple[SystemResults, list[str]], b: tuple[SystemResults, list[str]]
                 ) -> tuple[list[str], list[Path], list[int]]:
    """Attention maps of two systems' seed-1 runs for the sentences :func:`choose_sentences` picks."""
    from scanmt.data.attention_file import ROWS_KEPT, AttentionFile

    (a_sys, ha), (b_sys, hb) = a, b
    texts, opts, split = p.texts, p.opts, p.rec["split"]
    ta, tb = tokenize_all(ha, texts.tgt_lang), tokenize_all(hb, texts.tgt_lang)
    fa = AttentionFile(run_dir(p.out, a_sys.name, 1) / attention_name(split))
    fb = AttentionFile(run_dir(p.out, b_sys.name, 1) / attention_name(split))
    src_tokens = [len(fa.source(i)) for i in range(len(fa))]
    held = [i for i in range(len(fa)) if fa.has(i) and fb.has(i)]
    chosen = choose_sentences(ta, tb, texts, opts.figures, max_src_words=opts.max_figure_words,
                              src_tokens=src_tokens, max_src_tokens=opts.max_figure_tokens,
                              min_src_words=opts.min_figure_words, max_hyp_words=opts.max_figure_output_words,
                              among=None if len(held) == len(fa) else set(held))
    where = (f"sources of {opts.min_figure_words} to {opts.max_figure_words} words" if opts.min_figure_words else
             f"sources of at most {opts.max_figure_words} words") + (
        f" and {opts.max_figure_tokens} subwords, outputs of at most {opts.max_figure_output_words} words")
    partial = next((f for f in (fa, fb) if f.rows is not None), None)
    if partial is not None:  # restored from an archive with a figure window
        where += (f", of the {len(held)} of {len(fa)} test sentences whose attention the seed-1 runs hold "
                  f"({md_escape(str(partial.meta.get(ROWS_KEPT) or 'partial attention files'))})")
    if not chosen:
        return [f"No figure: {md_escape(a_sys.label)} repeats no word (REP sentence score 0) in the test "
                f"sentences with {where}.", ""], [], []
    L = [f"Test sentences where {md_escape(a_sys.label)} repeats words (REP sentence score σ > 0, those "
         f"{md_escape(b_sys.label)} repeats least first), chosen automatically from the seed-1 outputs "
         f"among {where}. Source subwords on the x axis, output subwords on the y axis, white is exactly zero.", ""]
    ra, rb = repetition_scores(ta, texts.ref_tok), repetition_scores(tb, texts.ref_tok)
    files = []
    for i in chosen:
        png = report_figure(p.docs, p.stem, attention_figure_name(i + 1), p.figure_grid)
        size = draw_figure(png, [(a_sys.label, fa[i]), (b_sys.label, fb[i])], f"{split} sentence {i + 1}")
        files.append(png)
        L += [
            f"**Sentence {i + 1}** (σ {a_sys.label} = {ra[i]:g}, σ {b_sys.label} = {rb[i]:g}; {size // 1024} KB)",
            "",
            f"![attention maps, sentence {i + 1}]({p.stem}/{png.name})",
            "",
            "| | |", "|---|---|",
            f"| source | {md_escape(texts.src[i])} |",
            f"| reference | {md_escape(texts.ref[i])} |",
            f"| {md_escape(a_sys.label)} | {md_escape(ha[i])} |",
            f"| {md_escape(b_sys.label)} | {md_escape(hb[i])} |",
            "",
        ]
    return L, files, chosen


def examples(p: Page, chosen: Sequence[int]) -> list[str]:
    """The Appendix B analogue: the figures' sentences, then those the baseline repeats words in, then short ones."""
    texts, opts = p.texts, p.opts
    L = ["## Translation examples (Appendix B analogue)", ""]
    outputs = {s.name: hyp_lines(p.out, p.rec, s.name, 1) for s in p.systems if s.seed(1) is not None}
    if not outputs or opts.examples <= 0:
        return L + ["No examples: no system has a finished seed-1 run.", ""]
    base_out = outputs.get(p.baseline)
    picks = list(chosen)
    if base_out is not None:
        more = choose_sentences(tokenize_all(base_out, texts.tgt_lang), None, texts, len(texts.ref),
                                max_src_words=opts.max_figure_words)
        picks += [i for i in more if i not in picks]
    picks += [i for i in range(len(texts.ref)) if i not in picks and texts.src_words[i] <= opts.max_figure_words]
    L += ["Seed-1 outputs; sentences where the baseline repeats words first, then the first short test sentences.", ""]
    for i in picks[: opts.examples]:
        L += [f"**Sentence {i + 1}**", "", "| | |", "|---|---|",
              f"| source | {md_escape(texts.src[i])} |", f"| reference | {md_escape(texts.ref[i])} |"]
        for s in p.systems:
            if s.name in outputs and outputs[s.name] is not None:
                L.append(f"| {md_escape(s.label)} | {md_escape(outputs[s.name][i])} |")
        L.append("")
    return L
