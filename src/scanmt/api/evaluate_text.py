"""Text metrics of ``evaluate``: BLEU (detokenized and tokenized), paired bootstrap, METEOR, REP, DROP."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from scanmt.errors import ConfigError, DataError
from scanmt.io import read_lines

if TYPE_CHECKING:
    from scanmt.api.evaluate import EvaluateRequest

Row = tuple[str, str, str]  # metric, value, note


def read_hypotheses(path: Path, n_ref: int, ref_path: Path) -> list[str]:
    """Read a system output: empty lines are allowed (empty translations), but not an
    extra trailing blank line, and the line count must match the reference."""
    lines = read_lines(path, allow_empty=True, what="hypothesis file")
    if len(lines) == n_ref + 1 and not lines[-1].strip():
        raise DataError(f"{path}:{len(lines)}: hypothesis file ends with a blank line (an extra trailing newline?)")
    check_line_counts(path, len(lines), ref_path, n_ref)
    return lines


def check_line_counts(path: Path, n: int, ref_path: Path, n_ref: int) -> None:
    """Raise :class:`DataError` naming ``path`` (the file checked against the reference), both counts and the
    first line that has no partner."""
    if n > n_ref:
        raise DataError(f"{path}:{n_ref + 1}: {path} has {n} lines but {ref_path} has only {n_ref}")
    if n < n_ref:
        raise DataError(f"{path}: {path} has only {n} lines but {ref_path} has {n_ref} (line {n + 1} of "
                        f"{ref_path} has no partner)")

class Texts:
    """The evaluated corpus in both forms: detokenized (sacrebleu) and tokenized (the rest)."""

    def __init__(self, request: EvaluateRequest):
        from scanmt.data.tokenize import detokenize, tokenize

        self.ref_raw = read_lines(request.ref, what="reference file")
        self.hyp_raw = read_hypotheses(request.hyp, len(self.ref_raw), request.ref)
        self.hyp2_raw = read_hypotheses(request.hyp2, len(self.ref_raw), request.ref) if request.hyp2 else None
        self.src_raw = None
        if request.src is not None:
            self.src_raw = read_lines(request.src, what="source file")
            check_line_counts(request.src, len(self.src_raw), request.ref, len(self.ref_raw))
        lang, slang = request.tgt_lang, request.src_lang
        if request.tokenized:
            conv, tok = (lambda x, lg: detokenize(x, lg)), (lambda x, lg: " ".join(x.split()))
        else:
            conv, tok = (lambda x, lg: x), (lambda x, lg: tokenize(x, lg) if x.strip() else "")
        self.ref = [conv(x, lang) for x in self.ref_raw]
        self.hyp = [conv(x, lang) for x in self.hyp_raw]
        self.hyp2 = [conv(x, lang) for x in self.hyp2_raw] if self.hyp2_raw is not None else None
        self.ref_tok = [tok(x, lang) for x in self.ref_raw]
        self.hyp_tok = [tok(x, lang) for x in self.hyp_raw]
        self.hyp2_tok = [tok(x, lang) for x in self.hyp2_raw] if self.hyp2_raw is not None else None
        self.src_tok = [tok(x, slang) for x in self.src_raw] if self.src_raw is not None else None


def text_metrics(request: EvaluateRequest, metrics: list[str], rows: list[Row], out: dict[str, Any]) -> None:
    """Add the text ``metrics`` (and the paired bootstrap with ``hyp2``) to the table ``rows`` and the JSON ``out``."""
    from scanmt.metrics import bleu as bleu_mod
    from scanmt.metrics.paired import format_p

    texts = Texts(request)
    out["sentences"] = len(texts.ref)
    if "bleu" in metrics:
        r = bleu_mod.detok_bleu(texts.hyp, texts.ref)
        rows.append(("BLEU (detok, cased)", f"{r.score:.2f}", r.signature))
        out["bleu"] = {"score": r.score, "signature": r.signature, "details": r.details}
    if "tok-bleu" in metrics:
        r = bleu_mod.tokenized_bleu(texts.hyp_tok, texts.ref_tok)
        rows.append(("BLEU (tokenized, lc)", f"{r.score:.2f}", f"tokenized (scanmt.data.tokenize); {r.signature}"))
        out["tok_bleu"] = {"score": r.score, "signature": r.signature, "details": r.details}
    if texts.hyp2 is not None:
        tokenized = "bleu" not in metrics and "tok-bleu" in metrics
        h1, h2, ref = (texts.hyp_tok, texts.hyp2_tok, texts.ref_tok) if tokenized else (texts.hyp, texts.hyp2, texts.ref)
        b = bleu_mod.paired_bootstrap(h1, h2, ref, tokenized=tokenized, samples=request.bootstrap_samples)
        resamples = f" ({b.samples} resamples)" if b.p_value is not None else ""  # None: too few sentences, no test
        note = f"vs {b.score1:.2f}: p = {format_p(b.p_value)}{resamples}"
        rows.append(("BLEU --hyp2 (bootstrap)", f"{b.score2:.2f}", note))
        out["bootstrap"] = {  # p_value: null where the test could not be run
            "bleu_hyp": b.score1, "bleu_hyp2": b.score2, "p_value": b.p_value,
            "samples": b.samples, "signature": b.signature, "tokenized": tokenized,
        }
    hyp_words = [x.split() for x in texts.hyp_tok]
    ref_words = [x.split() for x in texts.ref_tok]
    if "meteor" in metrics:
        from scanmt.metrics.meteor import corpus_meteor

        m = corpus_meteor(hyp_words, ref_words, use_synonyms=not request.no_synonyms)
        rows.append(("METEOR", f"{m.score:.2f}", f"nltk, mean of sentences; {m.note}"))
        out["meteor"] = {"score": m.score, "synonyms": m.synonyms, "note": m.note}
    if "rep" in metrics:
        from scanmt.metrics.rep import rep_score

        rep = rep_score(hyp_words, ref_words)
        rows.append(("REP", f"{rep:.2f}", "n=2, λ1=1, λ2=2, per 100 reference words; lower is better"))
        out["rep"] = {"score": rep, "n": 2, "lambda1": 1.0, "lambda2": 2.0}
    if "drop" in metrics:
        _drop(request, texts, rows, out)


def load_word_aligner(path: Path, src_lang: str, tgt_lang: str):
    """The word-level aligner of ``--align-model path`` (``path`` or ``path/word``) for ``src_lang -> tgt_lang``, and
    the folder it was loaded from; a clear error for a subword-level one or other languages."""
    from scanmt.data.align import MODEL_FILE, Aligner

    if not (path / MODEL_FILE).exists() and (path / "word" / MODEL_FILE).exists():
        path = path / "word"
    aligner = Aligner.load(path)
    level = aligner.info.get("level")
    if level not in (None, "word"):
        raise ConfigError(f"--align-model {path}: a {level}-level aligner; DROP needs the word-level one (ALIGN_DIR/word)")
    langs = (aligner.info.get("src_lang"), aligner.info.get("tgt_lang"))
    if None not in langs and langs != (src_lang, tgt_lang):
        raise ConfigError(
            f"--align-model {path} aligns {langs[0]}->{langs[1]} but --src-lang/--tgt-lang are {src_lang}->{tgt_lang}"
        )
    return aligner, path


Links = list[set[tuple[int, int]]]  # per sentence, 0-based (source word, target word) links


def align_pairs(aligner, src: list[list[str]], tgt: list[list[str]]) -> Links:
    """Align pairs of word lists, skipping those with an empty side (no links)."""
    keep = [k for k, (s, t) in enumerate(zip(src, tgt)) if s and t]
    links = aligner.align([src[k] for k in keep], [tgt[k] for k in keep]) if keep else []
    out: Links = [set() for _ in src]
    for k, ls in zip(keep, links):
        out[k] = set(ls)
    return out


def identical_outputs(hyp_tok: list[str], ref_tok: list[str]) -> list[bool]:
    """Which outputs equal their reference, word for word: eflomal is random, so these take the reference's
    links (:func:`link_pairings`) instead of an alignment of their own, whose differences would count as drops."""
    return [h == r for h, r in zip(hyp_tok, ref_tok)]


def link_samples(aligner, src: list[list[str]], tgt_tok: list[str], k: int, bar=None,
                 skip: list[bool] | None = None) -> list[Links]:
    """``k`` alignments of the source words ``src`` with the tokenized lines ``tgt_tok`` (eflomal samples at
    random); the sentences where ``skip`` is True get no links.  ``bar``: a progress bar updated once each."""
    tgt = [[] if skip is not None and skip[i] else line.split() for i, line in enumerate(tgt_tok)]
    samples = []
    for _ in range(k):
        samples.append(align_pairs(aligner, src, tgt))
        if bar is not None:
            bar.update()
    return samples


def with_reference_links(hyp_links: Links, ref_links: Links, same: list[bool]) -> Links:
    """``hyp_links`` with the outputs that equal their reference (``same``) taking the reference's links."""
    return [set(r) if eq else h for h, r, eq in zip(hyp_links, ref_links, same)]


def link_pairings(ref_samples: list[Links], hyp_samples: list[Links],
                  same: list[bool]) -> Iterator[tuple[Links, Links]]:
    """Every pairing of a source-reference alignment with a source-output one (DROP's K x K), the outputs that
    equal their reference (``same``) taking that pairing's reference links."""
    for ref_links in ref_samples:
        for hyp_links in hyp_samples:
            yield ref_links, with_reference_links(hyp_links, ref_links, same)


def _drop(request: EvaluateRequest, texts: Texts, rows: list[Row], out: dict[str, Any]) -> None:
    from scanmt.metrics.drop import DropSamples, drop_score
    from tqdm import tqdm

    aligner, path = load_word_aligner(request.align_model, request.src_lang, request.tgt_lang)
    k = request.drop_samples
    src = [x.split() for x in texts.src_tok]
    # each eflomal call takes seconds: a bar over the 2k of them
    with tqdm(total=2 * k, desc="DROP: aligning", unit="alignment", leave=False) as bar:
        ref_samples = link_samples(aligner, src, texts.ref_tok, k, bar)
        same = identical_outputs(texts.hyp_tok, texts.ref_tok)
        hyp_samples = link_samples(aligner, src, texts.hyp_tok, k, bar, same)
    lens = [len(s) for s in src]
    d = DropSamples(tuple(drop_score(r, h, lens) for r, h in link_pairings(ref_samples, hyp_samples, same)))
    if k == 1:
        spread = "one alignment sample (eflomal is random; --drop-samples averages several)"
    else:
        spread = f"mean ± {d.score_sd:.2f} over {k}×{k} pairings of {k} alignment samples"
    rows.append(
        ("DROP", f"{d.score:.2f}",
         f"% of {d.source_words} source words; {d.score_of_aligned:.2f}% of ref-aligned; {spread}; lower is better")
    )
    out["drop"] = {
        "score": d.score, "score_of_ref_aligned": d.score_of_aligned, "dropped": d.dropped,
        "source_words": d.source_words, "ref_aligned": d.ref_aligned, "align_model": str(path),
        "samples": k, "score_sd": d.score_sd, "scores": d.scores,
    }
