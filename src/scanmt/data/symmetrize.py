"""Symmetrization of two directional word alignments (Koehn et al. 2005).

A directional aligner gives, for one sentence pair, a set of 0-based links
``(i, j)`` (source position ``i``, target position ``j``) in each direction:
``fwd`` (every target word picks at most one source word) and ``rev`` (every
source word picks at most one target word), both written source-first.  The
functions here combine them into one link set:

- :func:`intersect`: links found in both directions (high precision).
- :func:`union`: links found in either direction (high recall).
- :func:`grow_diag`, :func:`grow_diag_final`, :func:`grow_diag_final_and`:
  start from the intersection and add union links next to existing ones.

The grow-diag family follows Koehn's reference pseudo-code (the Moses
documentation, "Training step 3: word alignment")::

    GROW-DIAG-FINAL(e2f, f2e):
      neighboring = ((-1,0),(0,-1),(1,0),(0,1),(-1,-1),(-1,1),(1,-1),(1,1))
      alignment = intersect(e2f, f2e)
      GROW-DIAG(); FINAL(e2f); FINAL(f2e)

    GROW-DIAG():
      iterate until no new points added
        for english word e = 0 ... en
          for foreign word f = 0 ... fn
            if (e aligned with f)
              for each neighboring point (e-new, f-new):
                if ((e-new not aligned or f-new not aligned)
                    and (e-new, f-new) in union(e2f, f2e))
                  add alignment point (e-new, f-new)

    FINAL(a):
      for english word e-new = 0 ... en
        for foreign word f-new = 0 ... fn
          if ((e-new not aligned or f-new not aligned)      # "and" for -final-and
              and (e-new, f-new) in alignment a)
            add alignment point (e-new, f-new)

"aligned" is always the current state (points added earlier in the same sweep
count).  The implementation visits exactly the cells the grid scan would, in
the same order, but only the aligned ones, so it costs O(links · log links)
per sweep instead of O(src_len · tgt_len).  Here "english" is our source side
(the first index) and ``e2f`` is ``fwd``.

All functions are pure: they take any iterables of ``(i, j)`` pairs and return
a new ``set``.
"""

from __future__ import annotations

import heapq
from typing import Callable, Iterable

from scanmt.errors import ConfigError

Link = tuple[int, int]

#: Koehn's neighbour order: the 4 orthogonal cells first, then the diagonals.
NEIGHBOURS: tuple[Link, ...] = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))

METHODS: tuple[str, ...] = ("intersect", "union", "grow-diag", "grow-diag-final", "grow-diag-final-and")


def intersect(fwd: Iterable[Link], rev: Iterable[Link]) -> set[Link]:
    """Links present in both directions."""
    return set(fwd) & set(rev)


def union(fwd: Iterable[Link], rev: Iterable[Link]) -> set[Link]:
    """Links present in either direction."""
    return set(fwd) | set(rev)


def _grow(fwd: set[Link], rev: set[Link], *, final: str | None) -> set[Link]:
    uni = fwd | rev
    alignment = fwd & rev
    src_aligned = {i for i, _ in alignment}
    tgt_aligned = {j for _, j in alignment}

    def add(point: Link) -> None:
        alignment.add(point)
        src_aligned.add(point[0])
        tgt_aligned.add(point[1])

    # GROW-DIAG: sweeps in (i, j) order until a sweep adds nothing.  A point
    # added after the scan position (larger in (i, j) order) is visited later
    # in the same sweep, exactly as in the grid scan; one added before it waits
    # for the next sweep.  Candidates come from the union only, so every point
    # stays inside the sentence.
    while True:
        heap = sorted(alignment)  # a sorted list is a valid heap
        added = False
        while heap:
            cur = heapq.heappop(heap)
            i, j = cur
            for di, dj in NEIGHBOURS:
                new = (i + di, j + dj)
                if new in alignment or new not in uni:
                    continue
                if new[0] not in src_aligned or new[1] not in tgt_aligned:
                    add(new)
                    added = True
                    if new > cur:
                        heapq.heappush(heap, new)
        if not added:
            break

    if final is not None:
        both = final == "and"
        for direction in (fwd, rev):
            for i, j in sorted(direction):
                if (i, j) in alignment:
                    continue
                free_i = i not in src_aligned
                free_j = j not in tgt_aligned
                if (free_i and free_j) if both else (free_i or free_j):
                    add((i, j))
    return alignment


def grow_diag(fwd: Iterable[Link], rev: Iterable[Link]) -> set[Link]:
    """Intersection grown with neighbouring (incl. diagonal) union links."""
    return _grow(set(fwd), set(rev), final=None)


def grow_diag_final(fwd: Iterable[Link], rev: Iterable[Link]) -> set[Link]:
    """:func:`grow_diag`, then add directional links whose source *or* target word is still unaligned."""
    return _grow(set(fwd), set(rev), final="or")


def grow_diag_final_and(fwd: Iterable[Link], rev: Iterable[Link]) -> set[Link]:
    """:func:`grow_diag`, then add directional links whose source *and* target words are both unaligned."""
    return _grow(set(fwd), set(rev), final="and")


_FUNCS: dict[str, Callable[[Iterable[Link], Iterable[Link]], set[Link]]] = {
    "intersect": intersect,
    "union": union,
    "grow-diag": grow_diag,
    "grow-diag-final": grow_diag_final,
    "grow-diag-final-and": grow_diag_final_and,
}


def get_method(name: str) -> Callable[[Iterable[Link], Iterable[Link]], set[Link]]:
    """The symmetrization function called ``name`` (one of :data:`METHODS`).

    Raises:
        ConfigError: an unknown name (the message lists the valid ones).
    """
    try:
        return _FUNCS[name]
    except KeyError:
        raise ConfigError(f"unknown symmetrization {name!r}; choose one of: {', '.join(METHODS)}") from None


def symmetrize(fwd: Iterable[Link], rev: Iterable[Link], method: str = "grow-diag-final-and") -> set[Link]:
    """Combine the two directional link sets of one sentence pair with ``method``."""
    return get_method(method)(fwd, rev)
