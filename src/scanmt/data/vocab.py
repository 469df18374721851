"""Subword vocabulary with the NMT special symbols.

Ids 0–4 are fixed: ``<pad>``, ``<unk>``, ``<s>``, ``</s>``, ``<sink>``.  The
sink is only ever appended to source sentences by the model (see
:mod:`scanmt.model.interface`); it never appears in data files.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

from scanmt.errors import DataError
from scanmt.io import atomic_open, read_lines

PAD, UNK, BOS, EOS, SINK = "<pad>", "<unk>", "<s>", "</s>", "<sink>"
SPECIALS = (PAD, UNK, BOS, EOS, SINK)
PAD_ID, UNK_ID, BOS_ID, EOS_ID, SINK_ID = range(5)


class Vocab:
    """A list of symbols; ``vocab[token] -> id`` (unknown -> ``UNK_ID``)."""

    def __init__(self, symbols: Sequence[str]):
        if tuple(symbols[: len(SPECIALS)]) != SPECIALS:
            raise DataError(f"vocabulary must start with {SPECIALS}, got {tuple(symbols[:5])}")
        self.itos = list(symbols)
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            dup = [s for s, c in Counter(self.itos).items() if c > 1][0]
            raise DataError(f"vocabulary has a duplicate symbol {dup!r}")

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], min_freq: int = 1) -> "Vocab":
        counts: Counter[str] = Counter()
        for s in sentences:
            counts.update(s)
        for sp in SPECIALS:
            counts.pop(sp, None)
        ordered = sorted((t for t, c in counts.items() if c >= min_freq), key=lambda t: (-counts[t], t))
        return cls(list(SPECIALS) + ordered)

    def __len__(self) -> int:
        return len(self.itos)

    def __getitem__(self, token: str) -> int:
        return self.stoi.get(token, UNK_ID)

    def encode(self, tokens: Sequence[str]) -> list[int]:
        return [self.stoi.get(t, UNK_ID) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[i] for i in ids]

    def save(self, path: str | Path) -> None:
        with atomic_open(path) as fh:
            for s in self.itos:
                fh.write(s + "\n")

    @classmethod
    def load(cls, path: str | Path) -> "Vocab":
        return cls(read_lines(path, what="vocabulary file"))
