"""How much a trained fertility predictor knows: ``scanmt fertility --eval-predictor CKPT``.

On one split (``valid``) and at the predictor's own target level (subword or word,
:mod:`scanmt.fertility.predictor.targets`), per source piece:

- accuracy of the argmax class against the capped target, and the MAE of the expected
  fertility against the uncapped target (the trainer's validation numbers);
- the same for the **majority baseline**: the most frequent capped class of the *train*
  targets, predicted for every piece (its MAE uses the same class as the prediction);
- the target class distribution and the predicted (argmax) class distribution;
- the bounds the ``predicted`` strategy would use (``+ add``): mean, standard deviation and
  the shares of pieces with a bound below ``add + 0.5`` or at least ``add + 1.5``;
- when ``{split}.word.align`` exists, yardsticks common to both levels (:class:`WordView`):
  the **word-sum MAE**, per source word ``|Σ_{j∈w} (u_j − add) − F_w|`` with ``F_w`` the word
  aligner's count, against the baseline of a bound of 1 per word (1/k_w per piece); and the
  bounds of one-piece words (mean, std, Pearson correlation with ``F_w``) apart from those
  of the pieces of longer words.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from scanmt.data.links import read_links
from scanmt.data.prepare import read_meta
from scanmt.data.subword import word_index
from scanmt.errors import DataError
from scanmt.fertility.alignments import alignment_counts, alignment_path
from scanmt.fertility.predictor.targets import fertility_targets, word_count
from scanmt.fertility.providers import PredictedFertility
from scanmt.io import read_lines


@dataclass
class PredictorEval:
    """The numbers of :func:`evaluate_predictor` (shares in %, classes as strings for JSON)."""

    level: str
    split: str
    pieces: int
    accuracy: float
    mae: float
    majority_class: int
    majority_accuracy: float
    majority_mae: float
    target_classes: dict[str, float] = field(default_factory=dict)
    predicted_classes: dict[str, float] = field(default_factory=dict)
    add: float = 1.0
    bound_mean: float = 0.0
    bound_std: float = 0.0
    bound_low_share: float = 0.0
    bound_high_share: float = 0.0
    words: "WordView | None" = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class WordView:
    """The bounds seen per source word (``F_w`` from the word aligner, bounds without ``add``)."""

    words: int
    word_sum_mae: float
    word_sum_mae_baseline: float
    one_piece_share: float  # % of words
    one_piece_bound_mean: float  # with add
    one_piece_bound_std: float
    one_piece_corr: float  # Pearson, bound vs F_w; 0.0 when either is constant
    multi_piece_bound_mean: float  # per piece, with add


def class_shares(values: Sequence[int]) -> dict[str, float]:
    """Share (%) of each value, keys in increasing order."""
    c = Counter(values)
    return {str(k): 100.0 * c[k] / len(values) for k in sorted(c)}


def majority_class(targets: Sequence[Sequence[int]], cap: int) -> int:
    """The most frequent capped target (smallest on ties)."""
    c = Counter(min(t, cap) for ts in targets for t in ts)
    if not c:
        raise DataError("no fertility targets to take a majority class from")
    return min(c, key=lambda k: (-c[k], k))


def _mean_std(xs: Sequence[float]) -> tuple[float, float]:
    if not xs:
        return 0.0, 0.0
    m = sum(xs) / len(xs)
    return m, (sum((x - m) ** 2 for x in xs) / len(xs)) ** 0.5


def _corr(xs: Sequence[float], ys: Sequence[float]) -> float:
    (mx, sx), (my, sy) = _mean_std(xs), _mean_std(ys)
    if sx == 0 or sy == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / len(xs) / sx / sy


def word_view(pieces: Sequence[Sequence[str]], bounds: Sequence[Sequence[float]], word_align: Path,
              add: float) -> WordView:
    """:class:`WordView` of per-piece ``bounds`` (without ``add``) against the word links in ``word_align``."""
    links = read_links(word_align, src_lens=[word_count(p) for p in pieces])
    err = base = 0.0
    one: list[float] = []
    one_f: list[float] = []
    multi: list[float] = []
    n = 0
    for p, b, (sure, _) in zip(pieces, bounds, links):
        fert = alignment_counts(sure, word_count(p))
        sums, size = [0.0] * len(fert), [0] * len(fert)
        for w, u in zip(word_index(p), b):
            sums[w] += u
            size[w] += 1
        err += sum(abs(s - f) for s, f in zip(sums, fert))
        base += sum(abs(1 - f) for f in fert)
        n += len(fert)
        one += [s + add for s, k in zip(sums, size) if k == 1]
        one_f += [float(f) for f, k in zip(fert, size) if k == 1]
        multi += [u + add for w, u in zip(word_index(p), b) if size[w] > 1]
    m1, s1 = _mean_std(one)
    return WordView(words=n, word_sum_mae=err / n, word_sum_mae_baseline=base / n,
                    one_piece_share=100.0 * len(one) / n, one_piece_bound_mean=m1, one_piece_bound_std=s1,
                    one_piece_corr=_corr(one, one_f), multi_piece_bound_mean=_mean_std(multi)[0])


def _split_pieces(data_dir: Path, split: str, src_lang: str) -> list[list[str]]:
    return [ln.split() for ln in read_lines(data_dir / f"{split}.bpe.{src_lang}", what="source file")]


def _targets(data_dir: Path, align_dir: Path, split: str, pieces: list[list[str]], level: str) -> list[list[int]]:
    path = alignment_path(align_dir, split, level)
    if not path.exists():
        raise DataError(f"{path}: no {level} alignment for {split!r}; run `scanmt align --data {data_dir}` first")
    return fertility_targets(pieces, path, level)


def evaluate_predictor(checkpoint: Path, data_dir: Path, *, split: str = "valid", add: float = 1.0,
                       align_dir: Path | None = None) -> PredictorEval:
    """Score a predictor checkpoint on ``split`` of a prepared directory (see the module docstring)."""
    provider = PredictedFertility.load(checkpoint, add)
    cap = provider.predictor.max_fertility
    src_lang = read_meta(data_dir)["src_lang"]
    align_dir = align_dir or data_dir / "align"
    pieces = _split_pieces(data_dir, split, src_lang)
    targets = _targets(data_dir, align_dir, split, pieces, provider.level)
    train_pieces = _split_pieces(data_dir, "train", src_lang)
    major = majority_class(_targets(data_dir, align_dir, "train", train_pieces, provider.level), cap)
    probs = [p for sent in provider.probabilities(pieces) for p in sent]
    flat = [t for ts in targets for t in ts]
    argmax = [max(range(len(p)), key=p.__getitem__) for p in probs]
    expected = [sum(k * q for k, q in enumerate(p)) for p in probs]
    bounds = provider.apply(pieces)
    flat_bounds = [u for b in bounds for u in b]
    mean, std = _mean_std(flat_bounds)
    n = len(flat)
    res = PredictorEval(
        level=provider.level, split=split, pieces=n,
        accuracy=100.0 * sum(a == min(t, cap) for a, t in zip(argmax, flat)) / n,
        mae=sum(abs(e - t) for e, t in zip(expected, flat)) / n,
        majority_class=major, majority_accuracy=100.0 * sum(min(t, cap) == major for t in flat) / n,
        majority_mae=sum(abs(major - t) for t in flat) / n,
        target_classes=class_shares([min(t, cap) for t in flat]), predicted_classes=class_shares(argmax),
        add=add, bound_mean=mean, bound_std=std,
        bound_low_share=100.0 * sum(u < add + 0.5 for u in flat_bounds) / n,
        bound_high_share=100.0 * sum(u >= add + 1.5 for u in flat_bounds) / n,
    )
    word_align = alignment_path(align_dir, split, "word")
    if word_align.exists():
        res.words = word_view(pieces, [[u - add for u in b] for b in bounds], word_align, add)
    return res


def format_eval(r: PredictorEval) -> str:
    """The evaluation as printed by ``scanmt fertility --eval-predictor``."""
    shares = lambda d: ", ".join(f"{k}: {v:.1f}%" for k, v in d.items())  # noqa: E731
    lines = [
        f"fertility predictor ({r.level} targets) on {r.split}: {r.pieces} source pieces",
        f"  accuracy          {r.accuracy:6.2f}%   (majority class {r.majority_class}: {r.majority_accuracy:.2f}%)",
        f"  MAE               {r.mae:6.3f}    (majority class: {r.majority_mae:.3f})",
        f"  target classes    {shares(r.target_classes)}",
        f"  predicted classes {shares(r.predicted_classes)}",
        f"  bounds (+{r.add:g})      mean {r.bound_mean:.3f}, std {r.bound_std:.3f}; "
        f"< {r.add + 0.5:g}: {r.bound_low_share:.1f}%, >= {r.add + 1.5:g}: {r.bound_high_share:.1f}%",
    ]
    w = r.words
    if w is not None:
        lines += [
            f"  per word ({w.words} words, word aligner's F_w; bounds with +{r.add:g})",
            f"    word-sum MAE    {w.word_sum_mae:6.3f}    (bound 1 per word: {w.word_sum_mae_baseline:.3f})",
            f"    one-piece words {w.one_piece_share:.1f}%: bound mean {w.one_piece_bound_mean:.3f}, std "
            f"{w.one_piece_bound_std:.3f}, correlation with F_w {w.one_piece_corr:.3f}",
            f"    pieces of longer words: bound mean {w.multi_piece_bound_mean:.3f}",
        ]
    return "\n".join(lines)
