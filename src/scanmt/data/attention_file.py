"""On-disk format for attention matrices written by ``scanmt translate --attention-out``.

One ``.npz`` archive (no pickle) holds every sentence of a test set::

    meta            0-d unicode array: JSON with {"version": 1, "n": N, "transform": ..., "sink": bool}
                    ("sink": whether the last source column of every sentence is the <sink>;
                    files written without it are read by the column's label)
    attn_{i}        float32 [T_i, S_i]  attention of output step t over source position j
                    (S_i includes the <sink> column last when the model has one)
    src_{i}         unicode [S_i]       source subword tokens (the sink as "<sink>")
    hyp_{i}         unicode [T_i]       output subword tokens (the final "</s>" included)
    fert_{i}        float32 [S_i]       optional: fertility upper bounds used (inf for the sink)

Sentence indices are 0-based and follow the input file's line order.

A *partial* file holds ``attn_{i}``, ``hyp_{i}`` and ``fert_{i}`` for some sentences only: its meta lists them
(``"rows"``, sorted indices) and says which were kept (``"rows_kept"``, a phrase).  An archive writes one to keep
the attention of only the sentences a report can draw (:mod:`scanmt.experiments.archive.corpus`); every
sentence keeps its source tokens.
"""

from __future__ import annotations

import json
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from scanmt.data.vocab import SINK
from scanmt.errors import DataError
from scanmt.io import atomic_open

FORMAT_VERSION = 1
#: a partial file's meta keys: the indices of the sentences whose attention it holds, and which those are
ROWS, ROWS_KEPT = "rows", "rows_kept"
#: what numpy raises for a file that is empty, truncated, damaged or not an attention file
_UNREADABLE = (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile, zlib.error)


@dataclass
class SentenceAttention:
    """Attention of one translated sentence.

    Attributes:
        attention: ``[T, S]`` weights, row t is the distribution at output step t.
        src: ``S`` source tokens (subwords; the sink last if present).
        hyp: ``T`` output tokens (subwords).
        fertility: optional ``[S]`` upper bounds (``inf`` for the sink).
        sink: whether the last source column is the model's ``<sink>`` (None: not recorded;
            :func:`labelled_sink` tells it by the label).
    """

    attention: np.ndarray
    src: list[str]
    hyp: list[str]
    fertility: np.ndarray | None = None
    sink: bool | None = None

    @property
    def has_sink(self) -> bool:
        """Whether the last source column is the sink: as recorded, else by its label."""
        return labelled_sink(self.src) if self.sink is None else self.sink

    @property
    def words(self) -> list[str]:
        """The source tokens without the sink."""
        return self.src[:-1] if self.has_sink else list(self.src)


def labelled_sink(src: Sequence[str]) -> bool:
    """For attention without a sink record (files written before it): whether the last label is ``<sink>``."""
    return bool(src) and src[-1] == SINK


def save_attention(path: str | Path, sentences: Sequence[SentenceAttention], meta: dict | None = None) -> None:
    """Write ``sentences`` atomically to ``path`` (an ``.npz`` file)."""
    path = Path(path)
    arrays: dict[str, np.ndarray] = {}
    info = {"version": FORMAT_VERSION, "n": len(sentences), **(meta or {})}
    recorded = {s.sink for s in sentences if s.sink is not None}
    if len(recorded) > 1:
        raise DataError(f"{path}: some sentences have a sink column and some do not (one model per file)")
    if recorded:
        info["sink"] = recorded.pop()
    arrays["meta"] = np.array(json.dumps(info))
    for i, s in enumerate(sentences):
        a = np.asarray(s.attention, dtype=np.float32)
        if a.shape != (len(s.hyp), len(s.src)):
            raise DataError(
                f"sentence {i}: attention shape {a.shape} does not match "
                f"{len(s.hyp)} output x {len(s.src)} source tokens"
            )
        arrays[f"attn_{i}"] = a
        arrays[f"src_{i}"] = np.array(s.src, dtype=str)
        arrays[f"hyp_{i}"] = np.array(s.hyp, dtype=str)
        if s.fertility is not None:
            arrays[f"fert_{i}"] = np.asarray(s.fertility, dtype=np.float32)
    with atomic_open(path, "wb") as fh:
        np.savez_compressed(fh, **arrays)


class AttentionFile:
    """Lazy reader: ``len(f)``, ``f[i]`` -> :class:`SentenceAttention`, ``f.meta``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.exists():
            raise DataError(f"{self.path}: attention file not found")
        if self.path.is_dir():
            raise DataError(f"{self.path}: is a folder, expected an attention file (.npz)")
        try:
            self._npz = np.load(self.path, allow_pickle=False)
            self.meta = json.loads(str(self._npz["meta"]))
            self.n = int(self.meta["n"])
        except _UNREADABLE as exc:
            raise DataError(f"{self.path}: not a scanmt attention file, or a truncated one "
                            f"({type(exc).__name__}: {exc or 'empty'})") from None
        #: whether the sentences end with the sink column; None in files without the record
        self.sink: bool | None = self.meta["sink"] if isinstance(self.meta.get("sink"), bool) else None
        rows = self.meta.get(ROWS)
        if rows is not None and not (isinstance(rows, list) and all(type(i) is int and 0 <= i < self.n for i in rows)):
            raise DataError(f"{self.path}: its meta lists the sentences it holds attention for as {str(rows)[:80]}, "
                            f"not indices below {self.n} (a damaged file)")
        #: the sentences whose attention the file holds: None for all of them (see :data:`ROWS`)
        self.rows: frozenset[int] | None = None if rows is None else frozenset(rows)

    def has(self, i: int) -> bool:
        """Whether the file holds sentence ``i``'s attention (a partial file holds some only)."""
        return 0 <= i < self.n and (self.rows is None or i in self.rows)

    def source(self, i: int) -> list[str]:
        """Sentence ``i``'s source tokens (the sink last if present), which every sentence keeps."""
        self._check_index(i)
        try:
            return self._npz[f"src_{i}"].tolist()
        except _UNREADABLE as exc:
            raise self._damaged(i, exc) from None

    def _damaged(self, i: int, exc: BaseException) -> DataError:
        return DataError(f"{self.path}: sentence {i} cannot be read: the file is damaged or truncated "
                         f"({type(exc).__name__}: {exc or 'empty'})")

    def _check_index(self, i: int) -> None:
        if not 0 <= i < self.n:
            raise DataError(f"{self.path}: sentence index {i} out of range (file has {self.n})")

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> SentenceAttention:
        self._check_index(i)
        if not self.has(i):
            raise DataError(f"{self.path}: holds the attention of {len(self.rows or ())} of its {self.n} sentences "
                            f"({self.meta.get(ROWS_KEPT) or 'a partial file'}), not of sentence {i}; translate "
                            "again with --attention-out for all of them")
        z = self._npz
        try:
            fert = z[f"fert_{i}"] if f"fert_{i}" in z.files else None
            return SentenceAttention(
                attention=z[f"attn_{i}"], src=z[f"src_{i}"].tolist(), hyp=z[f"hyp_{i}"].tolist(), fertility=fert,
                sink=self.sink,
            )
        except _UNREADABLE as exc:
            raise self._damaged(i, exc) from None

    def __iter__(self) -> Iterator[SentenceAttention]:
        for i in range(self.n):
            yield self[i]
