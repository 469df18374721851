"""The subword alignments a prepared folder's fertilities are counted from (written by ``scanmt align``).

``ALIGN_DIR/{split}.{level}.align`` (:func:`alignment_path`); :func:`alignment_counts` counts the
distinct target tokens aligned to each source position, zeros included (the guided table,
the ``actual`` oracle and the predictor's targets all start from it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from scanmt.data.links import read_links
from scanmt.errors import DataError

Link = tuple[int, int]

ALIGN_DIR = "align"
LEVEL = "subword"


def alignment_counts(links: Iterable[Link], src_len: int) -> list[int]:
    """Number of distinct target tokens aligned to each source position (zeros included).

    Raises:
        DataError: a link whose source index is outside ``0..src_len-1``.
    """
    counts = [0] * src_len
    seen: set[Link] = set()
    for i, j in links:
        if not 0 <= i < src_len:
            raise DataError(f"link {i}-{j}: source index {i} out of range for {src_len} source tokens")
        if (i, j) not in seen:
            seen.add((i, j))
            counts[i] += 1
    return counts


def alignment_path(align_dir: str | Path, split: str, level: str = LEVEL) -> Path:
    """``ALIGN_DIR/{split}.{level}.align`` as written by ``scanmt align``."""
    return Path(align_dir) / f"{split}.{level}.align"


def read_split_links(align_dir: Path, split: str, src: list[list[str]], data_dir: Path) -> list[set[Link]]:
    """The sure links of ``split``'s subword alignment in ``align_dir``, checked against the source ``src``."""
    path = alignment_path(align_dir, split)
    if not path.exists():
        raise DataError(f"{path}: no {LEVEL} alignment for split {split!r}; run `scanmt align --data {data_dir}` first")
    return [sure for sure, _ in read_links(path, src_lens=[len(s) for s in src])]
