"""Japanese word tokenizers on KFTT: speed, and agreement with KFTT's official KyTea segmentation.

    pip install sudachipy sudachidict-core   # the candidate scanmt did not choose (fugashi, unidic-lite are deps)
    OMP_NUM_THREADS=1 python benchmarks/japanese_tokenizers.py --kftt ../shared/data/kftt --lines 20000

For each candidate (MeCab through fugashi with unidic-lite, as :mod:`scanmt.data.japanese` runs it,
and SudachiPy with sudachidict-core in split modes A and C; each with and without NFKC normalization):

- speed: sentences per second over the first ``--lines`` lines of ``train.ja.gz`` (one pass, one thread);
- agreement with KyTea on ``dev.ja.gz`` against ``tok/dev.ja.gz`` (KFTT's official segmentation):
  word-boundary precision, recall and F1 (a boundary is a character offset between two words of the
  sentence without its spaces; with NFKC, KyTea's words are normalized the same way, word by word),
  and words per sentence beside KyTea's.

docs/japanese.md reports the numbers and the choice.
"""

from __future__ import annotations

import argparse
import gzip
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

Words = Callable[[str], list[str]]


def _lines(path: Path, limit: int | None = None) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [line.rstrip("\n") for _, line in zip(range(limit) if limit else iter(int, 1), fh)]


def _nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def candidates() -> dict[str, Words]:
    """name -> words of a raw line (whitespace never inside a word)."""
    from scanmt.data.japanese import JapaneseWords

    mecab = JapaneseWords()
    out: dict[str, Words] = {
        "mecab-unidic-lite": lambda s: [p for w in mecab.tagger(s) for p in w.surface.split()],
        "mecab-unidic-lite+nfkc (scanmt)": mecab.words,
    }
    try:
        from sudachipy import Dictionary, SplitMode
    except ImportError:
        print("(sudachipy is not installed: pip install sudachipy sudachidict-core to measure it)")
        return out
    dictionary = Dictionary(dict="core")

    def split(mode, normalize: bool) -> Words:
        sudachi = dictionary.tokenizer(mode=mode)  # all fields: with fewer, its number joining is off (8 6 7 for 867)

        def words(s: str) -> list[str]:
            text = _nfkc(s) if normalize else s
            return [p for m in sudachi.tokenize(text) for p in m.surface().split()]
        return words

    for name, mode in (("A", SplitMode.A), ("C", SplitMode.C)):
        out[f"sudachi-core-{name}"] = split(mode, False)
        out[f"sudachi-core-{name}+nfkc"] = split(mode, True)
    return out


def boundaries(words: list[str]) -> set[int]:
    """Character offsets (in the words joined without spaces) where one word ends and the next begins."""
    out, at = set(), 0
    for w in words[:-1]:
        at += len(w)
        out.add(at)
    return out


@dataclass
class Agreement:
    precision: float
    recall: float
    f1: float
    words_per_sentence: float
    kytea_words_per_sentence: float
    skipped: int  # sentences whose characters differ from KyTea's (not compared)


def agreement(words: Words, raw: list[str], kytea: list[list[str]], normalize: bool) -> Agreement:
    tp = fp = fn = n_words = n_ref = skipped = 0
    for line, ref in zip(raw, kytea):
        hyp = words(line)
        ref = [_nfkc(w) for w in ref] if normalize else ref
        if "".join(hyp) != "".join(ref):
            skipped += 1
            continue
        h, r = boundaries(hyp), boundaries(ref)
        tp, fp, fn = tp + len(h & r), fp + len(h - r), fn + len(r - h)
        n_words, n_ref = n_words + len(hyp), n_ref + len(ref)
    p, r = tp / (tp + fp), tp / (tp + fn)
    compared = len(raw) - skipped
    return Agreement(p, r, 2 * p * r / (p + r), n_words / compared, n_ref / compared, skipped)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kftt", default="../shared/data/kftt", help="KFTT folder (train.ja.gz, dev.ja.gz, tok/dev.ja.gz)")
    ap.add_argument("--lines", type=int, default=20000, help="training lines timed")
    args = ap.parse_args()
    kftt = Path(args.kftt)
    train = _lines(kftt / "train.ja.gz", args.lines)
    dev = _lines(kftt / "dev.ja.gz")
    kytea = [line.split() for line in _lines(kftt / "tok" / "dev.ja.gz")]
    print(f"speed: {len(train)} lines of train.ja.gz; agreement: {len(dev)} lines of dev.ja.gz vs tok/dev.ja.gz (KyTea)")
    print(f"{'tokenizer':34s} {'sent/s':>8s} {'P':>7s} {'R':>7s} {'F1':>7s} {'words/sent':>10s} {'KyTea':>6s} {'skipped':>7s}")
    for name, words in candidates().items():
        words(train[0])  # load the dictionary before timing
        start = time.perf_counter()
        for line in train:
            words(line)
        speed = len(train) / (time.perf_counter() - start)
        a = agreement(words, dev, kytea, normalize=name.split(" ")[0].endswith("+nfkc"))
        print(f"{name:34s} {speed:8.0f} {a.precision:7.4f} {a.recall:7.4f} {a.f1:7.4f} {a.words_per_sentence:10.2f} "
              f"{a.kytea_words_per_sentence:6.2f} {a.skipped:7d}")


if __name__ == "__main__":
    main()
