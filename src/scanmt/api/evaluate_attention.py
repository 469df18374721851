"""Attention metrics of ``evaluate``: attention statistics and AER/SAER against gold links."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scanmt.api.evaluate_text import Row
from scanmt.errors import DataError
from scanmt.io import read_lines

if TYPE_CHECKING:
    from scanmt.api.evaluate import EvaluateRequest


def attention_metrics(request: EvaluateRequest, metrics: list[str], rows: list[Row], out: dict[str, Any]) -> None:
    """Add the attention ``metrics`` of ``request.attention`` to the table ``rows`` and the JSON ``out``."""
    from scanmt.data.attention_file import AttentionFile

    att = AttentionFile(request.attention)
    sents = list(att)
    out["attention_file"] = str(request.attention)
    if "attn-stats" in metrics:
        from scanmt.metrics.attention_stats import attention_stats

        st = attention_stats(
            [s.attention for s in sents],
            sink=[s.has_sink for s in sents],
            fertilities=[s.fertility for s in sents],
            threshold=request.unattended_threshold,
        )
        rows.append(("attention: exact zeros", f"{100 * st.zero_fraction:.2f}%", f"of {st.steps} steps x source tokens"))
        rows.append(("attention: attended/step", f"{st.mean_attended:.2f}", "source tokens with non-zero weight"))
        rows.append(("attention: one-hot steps", f"{100 * st.one_hot_share:.2f}%",
                     "steps whose largest weight is above 0.999"))
        rows.append(("attention: max weight", f"{st.mean_max_weight:.3f}", "largest weight per step, mean"))
        rows.append(("attention: max cumulative", f"{st.mean_max_cumulative:.2f}", "per sentence, most-attended token, mean"))
        if st.max_fertility_ratio is not None:
            rows.append(
                ("attention: max cum./fertility", f"{st.max_fertility_ratio:.3f}",
                 f"corpus max (<= 1 when constraints hold); per-sentence mean {st.mean_max_fertility_ratio:.3f}")
            )
        else:
            rows.append(("attention: max cum./fertility", "n/a", "no fertility stored in the attention file"))
        rows.append(
            ("attention: never attended", f"{100 * st.unattended_share:.2f}%",
             f"source tokens with total attention < {st.threshold:g}")
        )
        if st.sink_share is not None:
            rows.append(("attention: to the sink", f"{100 * st.sink_share:.2f}%",
                         "of the attention per output step, mean (the <sink> column)"))
        if st.saturated_share is not None:
            rows.append(("attention: bounds reached", f"{100 * st.saturated_share:.2f}%",
                         "source tokens whose total attention reaches 99% of their fertility"))
        out["attention_stats"] = st.as_dict()
    if "aer" in metrics or "saer" in metrics:
        _aer(request, metrics, sents, rows, out)


def _aer(request: EvaluateRequest, metrics: list[str], sents: list, rows: list[Row], out: dict[str, Any]) -> None:
    from scanmt.data.subword import word_index
    from scanmt.metrics.aer import aer, hard_alignment, saer, strip_specials, word_attention
    from scanmt.data.links import read_links

    hard, soft, src_lens, tgt_lens = [], [], [], []
    for s in sents:
        a, src, hyp = strip_specials(s.attention, s.src, s.hyp, sink=s.has_sink)
        si, ti = word_index(src), word_index(hyp)
        src_lens.append(si[-1] + 1 if si else 0)
        tgt_lens.append(ti[-1] + 1 if ti else 0)
        hard.append(hard_alignment(a, si, ti))
        soft.append(word_attention(a, si, ti))
    lines = read_lines(request.gold_align, allow_empty=True, what="gold alignment file")
    if len(lines) != len(sents):
        raise DataError(
            f"{request.gold_align} has {len(lines)} lines but {request.attention} has {len(sents)} sentences "
            "(the attention must come from forced decoding of the gold set)"
        )
    gold = read_links(request.gold_align, one_indexed=request.gold_one_indexed, src_lens=src_lens, tgt_lens=tgt_lens)
    base = "1-indexed" if request.gold_one_indexed else "0-indexed"
    if "aer" in metrics:
        v = aer(hard, gold)
        rows.append(("AER", f"{v:.2f}", f"argmax attention per output token, words; gold {base}"))
        out["aer"] = {"score": v, "links": sum(map(len, hard))}
    if "saer" in metrics:
        v = saer(soft, gold)
        rows.append(("SAER", f"{v:.2f}", "soft attention projected to words (Tu et al. 2016)"))
        out["saer"] = {"score": v}
